package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// BenchmarkCompactPace is compactpace's default run — 30 traffic minutes
// at 2,000 events/s from 00:40 (hour 00 closes, hour 01 stays open), 1%
// late and 0.5% redelivered events, the archive every 2 s per partition
// and a compaction pass every 30 s, traffic time — at
// RECKON_BENCH_PACE_SPEED traffic seconds per wall second (default 10: 3
// wall minutes; 1 is real time). RECKON_BENCH_PACE_DURATION shortens the
// traffic for a trial (a run under about 25 minutes closes no hour, and
// the closed-hour figures are then missing).
//
// It reports the files of the closed hour furthest over its bound
// (closed-files) beside that bound (closed-bound: one file per
// lake.compaction.max_rows rows), the most archive files an open
// (partition, hour) held just before a pass (open-files) beside
// max_open_files (open-bound), the records archived, redeliveries
// generated and dropped, the compaction passes' CPU time, the speed asked
// for and the speed achieved (traffic time over wall time: below the speed
// asked when archive and compaction could not keep up), and how far the
// run fell behind the pace. pace checks that every archived
// record is in the raw table or in raw_dropped.
func BenchmarkCompactPace(b *testing.B) {
	o := defaults()
	o.Speed = 10
	if v, err := strconv.ParseFloat(os.Getenv("RECKON_BENCH_PACE_SPEED"), 64); err == nil && v > 0 {
		o.Speed = v
	}
	if v, err := time.ParseDuration(os.Getenv("RECKON_BENCH_PACE_DURATION")); err == nil && v > 0 {
		o.Duration = v
	}
	var res result
	for i := 0; i < b.N; i++ {
		o.Root = filepath.Join(b.TempDir(), "lake")
		var err error
		if res, err = pace(b.Context(), o); err != nil {
			b.Fatal(err)
		}
	}
	res.print(os.Stderr, o)
	closed, worst := 0, hourState{}
	for _, h := range res.Hours {
		if !h.Closed {
			continue
		}
		closed++
		// The hour furthest over its bound (files × bound' > files' × bound).
		if closed == 1 || int64(h.Files)*closedBound(worst.Rows, o.MaxRows) > int64(worst.Files)*closedBound(h.Rows, o.MaxRows) {
			worst = h
		}
	}
	if closed > 0 {
		b.ReportMetric(float64(worst.Files), "closed-files")
		b.ReportMetric(float64(closedBound(worst.Rows, o.MaxRows)), "closed-bound")
	}
	b.ReportMetric(float64(closed), "closed-hours")
	b.ReportMetric(float64(res.PeakOpen), "open-files")
	b.ReportMetric(float64(o.MaxOpenFiles), "open-bound")
	b.ReportMetric(float64(res.Events), "rows")
	b.ReportMetric(float64(res.Redelivered), "redelivered")
	b.ReportMetric(float64(res.Dropped), "dropped")
	b.ReportMetric(res.PassCPU.Seconds(), "compact-cpu-s")
	b.ReportMetric(o.Speed, "speed")
	b.ReportMetric(o.Duration.Seconds()/res.Wall.Seconds(), "achieved-speed")
	b.ReportMetric(o.Duration.Minutes(), "traffic-min")
	b.ReportMetric(max(0, res.Behind.Seconds()), "behind-s")
}
