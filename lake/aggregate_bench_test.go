package lake

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"reckon/internal/testing/s3test"
)

// benchLake is a lake of benchRows rows over 24 hours (one file per hour,
// 50 keys) built once per test binary run for the read benchmarks.
const benchRows = 2_000_000

var benchLakeOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "reckon-lake-bench-")
	if err != nil {
		return "", err
	}
	l, err := Open(Options{Root: dir})
	if err != nil {
		return "", err
	}
	rows := genRows(benchRows, 24, 50, 0, 0, 42)
	_, err = l.WriteRaw(context.Background(), topic, 0, 0, benchRows-1, rows)
	return dir, err
})

// benchLakeUsed is set when a benchmark built the shared lake.
var benchLakeUsed bool

func benchLake(b *testing.B) *Lake {
	b.Helper()
	benchLakeUsed = true
	dir, err := benchLakeOnce()
	if err != nil {
		b.Fatal(err)
	}
	l, err := Open(Options{Root: dir})
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// TestMain removes the benchmark lake and stops the real S3 server after the run.
func TestMain(m *testing.M) {
	code := m.Run()
	s3test.Stop()
	if benchLakeUsed {
		if dir, err := benchLakeOnce(); err == nil {
			os.RemoveAll(dir)
		}
	}
	os.Exit(code)
}

var benchQuery = Query{Topic: topic, From: testStart, To: testStart.Add(24 * time.Hour)}

// BenchmarkAggregateHourly is `reckon lake query --window 1h` over the whole
// benchmark lake: read key, occurred_at, event_id, value; dedup; aggregate.
func BenchmarkAggregateHourly(b *testing.B) {
	l := benchLake(b)
	m := startCPU(b)
	for i := 0; i < b.N; i++ {
		aggs, st, err := l.Aggregate(context.Background(), benchQuery, time.Hour)
		if err != nil || st.Rows != benchRows || len(aggs) != 24*50 {
			b.Fatalf("%d aggs, %+v, %v", len(aggs), st, err)
		}
	}
	m.report(b, benchRows)
}

// BenchmarkAggregateHourlyManyFiles is the same data archived in
// 15-minute batches (4 files per hour, as before compaction) with 1% of
// events redelivered in the next batch: the hour's files are merged to
// find duplicates (merge), or, for comparison, every id goes through a
// per-hour hash set (hash).
func BenchmarkAggregateHourlyManyFiles(b *testing.B) {
	l, err := Open(Options{Root: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	rows := genRows(benchRows, 24, 50, 0, 0, 42)
	const batches = 96
	per := benchRows / batches
	offset := int64(0)
	var carry []RawRow // redeliveries of the previous batch
	for i := 0; i < batches; i++ {
		part := append(carry, rows[i*per:(i+1)*per]...)
		carry = nil
		for j := range part {
			part[j].KafkaOffset = offset + int64(j)
			if j%100 == 0 && i+1 < batches {
				carry = append(carry, part[j])
			}
		}
		if _, err := l.WriteRaw(b.Context(), topic, 0, offset, offset+int64(len(part))-1, part); err != nil {
			b.Fatal(err)
		}
		offset += int64(len(part))
	}
	for _, mode := range []string{"merge", "hash"} {
		b.Run(mode, func(b *testing.B) {
			hashDedupForBench = mode == "hash"
			defer func() { hashDedupForBench = false }()
			m := startCPU(b)
			for i := 0; i < b.N; i++ {
				aggs, st, err := l.Aggregate(context.Background(), benchQuery, time.Hour)
				if err != nil || st.Rows != int64(per*batches) || st.Duplicates != offset-int64(per*batches) || len(aggs) != 24*50 {
					b.Fatalf("%d aggs, %+v, %v", len(aggs), st, err)
				}
			}
			m.report(b, float64(offset))
		})
	}
}
