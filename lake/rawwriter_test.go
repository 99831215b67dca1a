package lake

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"reckon/internal/event"
)

func ptr(f float64) *float64 { return &f }

func testGate(t testing.TB) *event.Gate {
	t.Helper()
	g, err := event.NewGate(event.GateOptions{
		AllowUnknownTypes: true,
		Types: map[string]event.TypeRules{
			"sensor.suhu.terbaca": {Fields: map[string]event.FieldRule{
				"id_perangkat": {Required: true, Type: "string", Pattern: "sensor-[0-9]{2}"},
				"suhu_c":       {Required: true, Type: "number", Min: ptr(-40), Max: ptr(60)},
			}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func envelope(id int, typ string, occurred time.Time, data string) []byte {
	return fmt.Appendf(nil, `{"event_id":"00000000-0000-4000-8000-%012d","event_type":%q,"occurred_at":%q,"data":%s}`,
		id, typ, occurred.Format(time.RFC3339Nano), data)
}

func TestRawWriter(t *testing.T) { forEachStore(t, testRawWriter) }

// TestRawWriterCutsOversized: an oversized record (over the gate's payload
// limit, here a valid envelope padded to 1 MiB + 1, key 70 KiB) is kept in
// the rejected table as its first event.MaxKeptPrefix bytes of value and
// key, with the whole value's size and SHA-256 and a note saying what was
// cut; a short refused record is kept whole with an empty note.
func TestRawWriterCutsOversized(t *testing.T) {
	l := mustOpen(t, Options{Root: t.TempDir()})
	w, err := l.NewRawWriter(RawTable{Topic: topic, KeyPath: "data.id_perangkat", ValuePath: "data.suhu_c"}, testGate(t))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 7, 8, 0, 0, 0, time.UTC)
	pad := strings.Repeat("E (42) i2c: timeout on bus 1, retrying; ", 1<<20/40+1)
	big := envelope(1, "sensor.suhu.terbaca", at, `{"id_perangkat":"sensor-07","suhu_c":20,"debug_dump":"`+pad+`"}`)
	bigKey := []byte(strings.Repeat("k", 70<<10))
	small := []byte(`{not json`)
	res, err := w.WriteBatch(t.Context(), 0, []RawRecord{
		{Offset: 0, Timestamp: at, Value: big, Key: bigKey},
		{Offset: 1, Timestamp: at, Value: small, Key: []byte("k")},
	})
	if err != nil || res.Rejected != 2 {
		t.Fatalf("write: %+v, %v", res, err)
	}
	if len(res.Files) != 1 || res.Files[0].Bytes > event.MaxKeptPrefix/2 {
		t.Errorf("rejected files %+v: want one, far under the 64 KiB kept (the dump compresses; no stats copies)", res.Files)
	}
	rows := readParquet[RejectedRow](t, l, "rejected/topic="+topic+"/ingest_date=2026-11-07/"+FileName(topic, 0, 0, 1))
	if len(rows) != 2 {
		t.Fatalf("rejected rows %d, want 2", len(rows))
	}
	r := rows[0]
	bigSum := sha256.Sum256(big)
	if !bytes.Equal(r.Raw, big[:event.MaxKeptPrefix]) || !bytes.Equal(r.RecordKey, bigKey[:event.MaxKeptPrefix]) ||
		r.RawBytes != int64(len(big)) || !bytes.Equal(r.RawSHA256, bigSum[:]) {
		t.Errorf("oversized row: raw %d bytes, key %d bytes, raw_bytes %d (want %d), sha256 %x (want %x)",
			len(r.Raw), len(r.RecordKey), r.RawBytes, len(big), r.RawSHA256, bigSum)
	}
	wantNote := fmt.Sprintf("value: %d bytes, first %d kept; key: %d bytes, first %d kept", len(big), event.MaxKeptPrefix, len(bigKey), event.MaxKeptPrefix)
	if r.Truncated != wantNote || r.Fields != "payload" {
		t.Errorf("oversized row: truncated %q, fields %q; want %q, payload", r.Truncated, r.Fields, wantNote)
	}
	smallSum := sha256.Sum256(small)
	if r := rows[1]; string(r.Raw) != string(small) || r.Truncated != "" || r.RawBytes != int64(len(small)) || !bytes.Equal(r.RawSHA256, smallSum[:]) {
		t.Errorf("short row kept as %q, truncated %q, raw_bytes %d, sha256 %x", r.Raw, r.Truncated, r.RawBytes, r.RawSHA256)
	}
}

func testRawWriter(t *testing.T, opts Options) {
	l := mustOpen(t, opts)
	w, err := l.NewRawWriter(RawTable{Topic: topic, KeyPath: "data.id_perangkat", ValuePath: "data.suhu_c"}, testGate(t))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 7, 8, 59, 59, 999_999_999, time.UTC) // the last nanosecond of hour 08
	arrival := time.Date(2026, 11, 7, 23, 59, 0, 0, time.UTC)
	lossless := `{"id_perangkat":"sensor-07","suhu_c":24.50,"x":1.00000000000000000001,"s":"\u00e9"}`
	recs := []RawRecord{
		{Offset: 10, Timestamp: arrival, Value: envelope(1, "sensor.suhu.terbaca", at, lossless)},
		{Offset: 11, Timestamp: arrival, Value: []byte(`{not json`), Key: []byte("k")},
		{Offset: 12, Timestamp: arrival, Value: envelope(2, "sensor.suhu.terbaca", at, `{"id_perangkat":"sensor-07","suhu_c":75}`)},
		{Offset: 14, Timestamp: arrival, Value: envelope(3, "sensor.suhu.terbaca", at.Add(time.Nanosecond), `{"id_perangkat":"sensor-01","suhu_c":-3.25}`)},
		{Offset: 15, Timestamp: arrival.Add(2 * time.Minute), Value: envelope(4, "door.opened", at, `{"door":"d1"}`)},
		{Offset: 16, Timestamp: arrival, Value: envelope(5, "door.opened", at, `{"id_perangkat":17,"suhu_c":1}`)},
	}
	res, err := w.WriteBatch(t.Context(), 3, recs)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 3 || res.Rejected != 3 || res.FirstOffset != 10 || res.LastOffset != 16 || res.NextOffset != 17 {
		t.Errorf("result = %+v", res)
	}
	if !res.MaxIngestedAt.Equal(arrival.Add(2 * time.Minute)) {
		t.Errorf("max ingested = %v", res.MaxIngestedAt)
	}
	want := []string{
		"raw/topic=m8-suhu-kejadian/event_date=2026-11-07/event_hour=08/m8-suhu-kejadian-3-10-16.parquet",
		"raw/topic=m8-suhu-kejadian/event_date=2026-11-07/event_hour=09/m8-suhu-kejadian-3-10-16.parquet",
		"rejected/topic=m8-suhu-kejadian/ingest_date=2026-11-07/m8-suhu-kejadian-3-10-16.parquet",
		"rejected/topic=m8-suhu-kejadian/ingest_date=2026-11-08/m8-suhu-kejadian-3-10-16.parquet",
	}
	if files := listFiles(t, l); !slices.Equal(files, want) {
		t.Fatalf("files = %v\nwant %v", files, want)
	}
	raw := readParquet[RawRow](t, l, want[0])
	if len(raw) != 2 || raw[0].Key != "17" || raw[1].Key != "sensor-07" {
		t.Fatalf("raw rows = %+v", raw)
	}
	wantRow := RawRow{
		EventID: "00000000-0000-4000-8000-000000000001", EventType: "sensor.suhu.terbaca",
		OccurredAt: at.UnixMicro(), IngestedAt: arrival.UnixMicro(), Key: "sensor-07", Value: 24.5,
		Data: lossless, KafkaPartition: 3, KafkaOffset: 10,
	}
	if raw[1] != wantRow {
		t.Errorf("raw row = %+v\nwant      %+v", raw[1], wantRow)
	}
	var got []string
	for _, f := range want[2:] {
		for _, r := range readParquet[RejectedRow](t, l, f) {
			got = append(got, fmt.Sprintf("%d|%s|%s|%s|%s", r.KafkaOffset, r.RecordKey, r.Fields, r.Reason, r.Raw[:9]))
		}
	}
	wantRej := []string{
		"11|k|payload|payload: invalid JSON at byte 1: invalid character 'n' looking for the beginning of an object key|{not json",
		"12||data.suhu_c|data.suhu_c: 75 above max 60|{\"event_i",
		"15||data.id_perangkat,data.suhu_c|data.id_perangkat: key required (a string or a number)|{\"event_i",
	}
	if !slices.Equal(got, wantRej) {
		t.Errorf("rejected =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantRej, "\n"))
	}

	aggs, _, err := l.Aggregate(context.Background(), Query{Topic: topic, From: at.Add(-time.Hour), To: at.Add(time.Hour)}, time.Hour)
	if err != nil || len(aggs) != 3 {
		t.Fatalf("aggs = %+v, %v", aggs, err)
	}

	// Out-of-order offsets are a caller bug.
	if _, err := w.WriteBatch(t.Context(), 3, []RawRecord{recs[1], recs[0]}); err == nil {
		t.Error("out-of-order batch accepted")
	}
	// The record key is the key when the table has no key path.
	w2, _ := l.NewRawWriter(RawTable{Topic: "other"}, testGate(t))
	res, err = w2.WriteBatch(t.Context(), 0, []RawRecord{{Offset: 0, Timestamp: arrival, Key: []byte("rk"), Value: recs[0].Value}})
	if err != nil || res.Rows != 1 {
		t.Fatal(res, err)
	}
	rows := readParquet[RawRow](t, l, res.Files[0].Path)
	if rows[0].Key != "rk" || rows[0].Value != 0 {
		t.Errorf("record-key row = %+v", rows[0])
	}
}
