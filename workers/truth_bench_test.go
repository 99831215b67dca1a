package workers

import (
	"context"
	"slices"
	"testing"
	"time"
)

// BenchmarkTimeToTruth measures how long an event that arrives beyond
// allowed lateness takes to be counted in a published pane: from the
// generator releasing it to a read-committed observer seeing the batch
// correction pane (timing correction, computed_by batch) that counts it.
// The path: the stream sends it to the late topic, the late watcher signals
// the stream's correction workflow, which debounces (1 s here), waits for
// the archive to hold the event, recomputes exactly the affected windows
// and publishes. It runs on the end-to-end test's stack (startTruthStack:
// real Temporal dev server, kfake, stream and batch workers in process,
// 5 s windows, 2 s allowed lateness) with the same live traffic: 1,200
// payments at 60/s per iteration, about 4% of them beyond lateness. The
// reference is the daily reconciliation the targeted correction
// supersedes for these events: truth at the next 02:00 UTC run.
//
// Reports p50-s, p99-s and max-s over every too-late event of all
// iterations, and events (how many). Run with -benchtime 1x; each
// iteration adds about 25 s of traffic.
func BenchmarkTimeToTruth(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	st := startTruthStack(b, ctx, false)
	var all []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tr := st.liveTraffic(b, ctx, int64(5+i), 1200, 60)
		tooLate, _ := st.tooLate(b, ctx, tr)
		ttt := st.timeToTruth(tooLate, 60*time.Second)
		if len(tooLate) == 0 || len(ttt) < len(tooLate) {
			b.Fatalf("targeted corrections covered %d of %d too-late events within 60 s", len(ttt), len(tooLate))
		}
		all = append(all, ttt...)
	}
	b.StopTimer()
	slices.Sort(all)
	b.ReportMetric(percentile(all, 0.50).Seconds(), "p50-s")
	b.ReportMetric(percentile(all, 0.99).Seconds(), "p99-s")
	b.ReportMetric(percentile(all, 1).Seconds(), "max-s")
	b.ReportMetric(float64(len(all)), "events")
	b.ReportMetric(0, "ns/op") // the wall time per iteration is paced traffic, not a figure
}
