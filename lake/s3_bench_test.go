package lake

import (
	"context"
	"testing"
	"time"
)

// BenchmarkAggregateHourlyS3 is BenchmarkAggregateHourly on an S3 lake in
// an in-process fake (gofakes3 over loopback HTTP): the cost of the S3 read
// path (ranged GETs, copies) without network latency. It reports GETs and
// bytes fetched per query next to the files' total size.
func BenchmarkAggregateHourlyS3(b *testing.B) {
	fake := newS3Fake(b)
	l := mustOpen(b, fake.options())
	rows := genRows(benchRows, 24, 50, 0, 0, 42)
	res, err := l.WriteRaw(b.Context(), topic, 0, 0, benchRows-1, rows)
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	for _, f := range res.Files {
		size += f.Bytes
	}
	fake.gets.Store(0)
	fake.received.Store(0)
	m := startCPU(b)
	for i := 0; i < b.N; i++ {
		aggs, st, err := l.Aggregate(context.Background(), benchQuery, time.Hour)
		if err != nil || st.Rows != benchRows || len(aggs) != 24*50 {
			b.Fatalf("%d aggs, %+v, %v", len(aggs), st, err)
		}
	}
	m.report(b, benchRows)
	b.ReportMetric(float64(fake.gets.Load())/float64(b.N), "GETs/op")
	b.ReportMetric(float64(fake.received.Load())/float64(b.N)/float64(size), "fetched/size")
}
