package lake

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkWriteRaw measures the archive writer on pre-decoded rows: sort,
// split by hour, encode with zstd, fsync, rename. Reports rows/s and bytes
// on disk per event.
func BenchmarkWriteRaw(b *testing.B) {
	for _, lvl := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("zstd=%d", lvl), func(b *testing.B) { benchWriteRaw(b, lvl) })
	}
}

func benchWriteRaw(b *testing.B, level int) {
	const n = 1_000_000
	src := genRows(n, 1, 50, 0, 0, 1)
	l, err := Open(Options{Root: b.TempDir(), ZstdLevel: level})
	if err != nil {
		b.Fatal(err)
	}
	var bytes int64
	m := startCPU(b)
	for i := 0; i < b.N; i++ {
		res, err := l.WriteRaw(b.Context(), "m8-suhu-kejadian", 0, 0, n-1, src)
		if err != nil {
			b.Fatal(err)
		}
		bytes = 0
		for _, f := range res.Files {
			bytes += f.Bytes
		}
	}
	m.report(b, n)
	b.ReportMetric(float64(bytes)/n, "bytes/event")
}

// BenchmarkArchiveBatch is the archiver's whole path for one 200,000-record
// batch (its default size): gate decode and checks, key/value extraction,
// sort, zstd, fsync, rename.
func BenchmarkArchiveBatch(b *testing.B) {
	const n = 200_000
	rows := genRows(n, 1, 50, 0, 0, 3)
	recs := make([]RawRecord, n)
	at := testStart.Add(2 * time.Hour)
	for i, r := range rows {
		recs[i] = RawRecord{Offset: int64(i), Timestamp: at, Value: fmt.Appendf(nil,
			`{"event_id":%q,"event_type":"sensor.suhu.terbaca","occurred_at":%q,"data":%s}`,
			r.EventID, r.OccurredTime().Format(time.RFC3339Nano), r.Data)}
	}
	l, err := Open(Options{Root: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	w, err := l.NewRawWriter(RawTable{Topic: topic, KeyPath: "data.id_perangkat", ValuePath: "data.suhu_c"}, testGate(b))
	if err != nil {
		b.Fatal(err)
	}
	m := startCPU(b)
	for i := 0; i < b.N; i++ {
		res, err := w.WriteBatch(b.Context(), 0, recs)
		if err != nil || res.Rows != n {
			b.Fatal(res.Rows, res.Rejected, err)
		}
	}
	m.report(b, n)
}
