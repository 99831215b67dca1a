package interop

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"reckon/lake"
)

// start is the first hour of generated data.
var start = time.Date(2026, 11, 7, 0, 0, 0, 0, time.UTC)

const topic = "m8-suhu-kejadian"

// envelope renders one sensor envelope (docs/requirements.md R-GATE-1).
func envelope(id string, occurred time.Time, key string, lantai int, suhu float64) []byte {
	return fmt.Appendf(nil, `{"event_id":%q,"event_type":"sensor.suhu.terbaca","occurred_at":%q,"data":{"id_perangkat":%q,"lantai":%d,"suhu_c":%s}}`,
		id, occurred.Format(time.RFC3339Nano), key, lantai, strconv.FormatFloat(suhu, 'f', -1, 64))
}

func uuid(rng *rand.Rand) string {
	var b [16]byte
	for i := 0; i < 16; i += 8 {
		v := rng.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

// hourRows makes n raw rows of one hour (hours after start) for the
// benchmark lakes: keys sensor-00.., values like the sensor example's
// temperatures (docs/requirements.md R-GATE-1).
func hourRows(rng *rand.Rand, hour, n, keys int, firstOffset int64) []lake.RawRow {
	rows := make([]lake.RawRow, n)
	base := start.Add(time.Duration(hour) * time.Hour).UnixMicro()
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("sensor-%02d", i)
	}
	for i := range rows {
		occ := base + int64(i)*3_600_000_000/int64(n)
		k := rng.IntN(keys)
		v := float64(rng.IntN(4000))/100 - 5
		rows[i] = lake.RawRow{
			EventID:     uuid(rng),
			EventType:   "sensor.suhu.terbaca",
			OccurredAt:  occ,
			IngestedAt:  occ + 150_000,
			Key:         names[k],
			Value:       v,
			Data:        `{"id_perangkat":"` + names[k] + `","lantai":` + strconv.Itoa(1+k%10) + `,"suhu_c":` + strconv.FormatFloat(v, 'f', -1, 64) + `}`,
			KafkaOffset: firstOffset + int64(i),
		}
	}
	return rows
}
