package lake

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
)

// testStart is the first hour of generated data.
var testStart = time.Date(2026, 11, 7, 0, 0, 0, 0, time.UTC)

// genRows makes n raw rows of partition p with offsets from firstOffset,
// spread evenly over hours starting at testStart, keys sensor-00.. and
// values like the sensor example's temperatures (docs/requirements.md
// R-GATE-1). Deterministic for a seed.
func genRows(n, hours, keys int, p int32, firstOffset int64, seed uint64) []RawRow {
	rng := rand.New(rand.NewPCG(seed, 7))
	rows := make([]RawRow, n)
	span := int64(hours) * microsPerHour
	keyNames := make([]string, keys)
	for i := range keyNames {
		keyNames[i] = fmt.Sprintf("sensor-%02d", i)
	}
	var id [16]byte
	for i := range rows {
		binaryRand(rng, id[:])
		occ := testStart.UnixMicro() + int64(i)*span/int64(n) + rng.Int64N(1_000_000)
		if occ >= testStart.UnixMicro()+span {
			occ = testStart.UnixMicro() + span - 1
		}
		k := rng.IntN(keys)
		v := float64(rng.IntN(800))/10 - 20 // within the gate's [-40, 60]
		rows[i] = RawRow{
			EventID:        uuidString(id),
			EventType:      "sensor.suhu.terbaca",
			OccurredAt:     occ,
			IngestedAt:     occ + 200_000,
			Key:            keyNames[k],
			Value:          v,
			Data:           `{"id_perangkat":"` + keyNames[k] + `","lantai":` + strconv.Itoa(1+k%10) + `,"suhu_c":` + strconv.FormatFloat(v, 'f', -1, 64) + `}`,
			KafkaPartition: p,
			KafkaOffset:    firstOffset + int64(i),
		}
	}
	return rows
}

func binaryRand(rng *rand.Rand, b []byte) {
	for i := 0; i < len(b); i += 8 {
		v := rng.Uint64()
		for j := 0; j < 8 && i+j < len(b); j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
}

func uuidString(id [16]byte) string {
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], id[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], id[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], id[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], id[8:10])
	s[23] = '-'
	hex.Encode(s[24:], id[10:])
	return string(s[:])
}
