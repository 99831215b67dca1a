package workers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/topics"
	"reckon/workflows"
)

// finalizeStack is the truth stack with the finalizer and the horizon
// poll at their defaults, as a fresh deployment has them (the stack's
// other tests turn the finalizer off and poll every second); the batch
// runs as `reckon batch` (batchProcess), the test starts the stream.
func finalizeStack(tb testing.TB, ctx context.Context) *truthStack {
	tb.Helper()
	return newTruthStack(tb, ctx, stackOptions{externalBatch: true, tweak: func(c *config.Config) {
		c.Batch.FinalizeEvery, c.Batch.HorizonPoll = 10*time.Second, 30*time.Second
		c.Batch.HorizonWait = 3 * time.Minute
	}})
}

// BenchmarkTimeToFinal measures, per (key, window) of steady payments
// traffic (200 events/s, clean, 60 s per iteration), the time from the
// moment the stream's published progress had purged the window on every
// partition (a watcher polls the progress topic every 100 ms and keeps
// when it first saw each point) to the moment its truth row was computed
// into the lake (the row's emitted_at) by the finalizer with its
// defaults (a step every 10 s, ADR 0034). It runs on the end-to-end
// test's stack (real dev server, kfake, stream worker in process, `reckon
// batch`; 5 s windows, 2 s allowed lateness): the finalizer's time does
// not depend on the window size. The reference is what there was before:
// the daily reconciliation at 02:00 UTC, i.e. hours.
//
// Reports p50-s, p99-s, max-s and windows. Run with -benchtime 1x.
func BenchmarkTimeToFinal(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	st := finalizeStack(b, ctx)
	st.runStream(b, ctx)
	st.batchProcess(b, ctx)
	w := st.watchPurges(b, ctx, "payments")
	// Steady state: the finalizer has walked today's hours before the
	// traffic (a first start begins at 00:00 UTC).
	waitFor(b, 3*time.Minute, "the finalizer to catch up with the clock", func() (bool, string) {
		fs, err := st.finalizeState(ctx, "payments")
		return err == nil && time.Since(fs.Cursor) < time.Minute, st.finalizeStatus(ctx, "payments")
	})
	began := time.Now()
	stop := st.backgroundTraffic(b, ctx, 200)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// The workload is a minute of paced traffic, not a wait for a state.
		<-time.After(time.Minute)
	}
	stop()
	b.StopTimer()
	// Every window that passed while the traffic ran, with its truth.
	last := w.purgedAll().Truncate(5 * time.Second)
	var all []time.Duration
	waitFor(b, 2*time.Minute, "the truth of every window the traffic's horizon passed", func() (bool, string) {
		rows, err := st.lk.ReadTruth(ctx, "payments", began.Truncate(5*time.Second), last)
		if err != nil {
			return false, err.Error()
		}
		type cell struct {
			key   string
			start time.Time
		}
		first := map[cell]event.Pane{}
		var through time.Time
		for _, r := range rows {
			k := cell{r.Key, r.WindowStart}
			if f, ok := first[k]; !ok || r.EmittedAt.Before(f.EmittedAt) {
				first[k] = r
			}
			if r.WindowEnd.After(through) {
				through = r.WindowEnd
			}
		}
		all = all[:0]
		for _, r := range first {
			passed, ok := w.passedAt(r.WindowEnd)
			if !ok || passed.Before(began) {
				continue // passed before the watcher or the traffic began
			}
			all = append(all, r.EmittedAt.Sub(passed))
		}
		return len(all) > 0 && !through.Before(last), fmt.Sprintf("%d windows measured, truth through %s of %s; %s",
			len(all), through.Format(time.TimeOnly), last.Format(time.TimeOnly), st.finalizeStatus(ctx, "payments"))
	})
	slices.Sort(all)
	b.ReportMetric(percentile(all, 0.50).Seconds(), "p50-s")
	b.ReportMetric(percentile(all, 0.99).Seconds(), "p99-s")
	b.ReportMetric(percentile(all, 1).Seconds(), "max-s")
	b.ReportMetric(float64(len(all)), "windows")
	b.ReportMetric(0, "ns/op") // the wall time per iteration is paced traffic, not a figure
}

// purgeWatch keeps, per partition of a stream's topic, when the stream's
// committed progress was first seen at each purged-through point.
type purgeWatch struct {
	mu    sync.Mutex
	parts int32
	seen  map[int32][]purgeSeen
}

type purgeSeen struct {
	purged, at time.Time
}

// watchPurges polls the stream's progress every 100 ms until ctx ends.
func (st *truthStack) watchPurges(tb testing.TB, ctx context.Context, stream string) *purgeWatch {
	tb.Helper()
	s, _ := st.cfg.StreamByName(stream)
	m, err := topics.Load("")
	if err != nil {
		tb.Fatal(err)
	}
	tp, _ := m.Find(s.Topic)
	view, err := newProgressView(st.cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		tb.Fatal(err)
	}
	w := &purgeWatch{parts: tp.Partitions, seen: map[int32][]purgeSeen{}}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if view.Sync(wctx) == nil {
				now := time.Now()
				w.mu.Lock()
				for p := range w.parts {
					pr, ok := view.Get(stream, s.Topic, p)
					if l := w.seen[p]; ok && (len(l) == 0 || pr.PurgedThrough.After(l[len(l)-1].purged)) {
						w.seen[p] = append(l, purgeSeen{pr.PurgedThrough, now})
					}
				}
				w.mu.Unlock()
			}
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	tb.Cleanup(func() { cancel(); <-done; view.Close() })
	return w
}

// passedAt is when every partition had been seen purged through end.
func (w *purgeWatch) passedAt(end time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var at time.Time
	for p := range w.parts {
		i := slices.IndexFunc(w.seen[p], func(s purgeSeen) bool { return !s.purged.Before(end) })
		if i < 0 {
			return time.Time{}, false
		}
		if i == 0 {
			return time.Time{}, false // already passed when the watch began
		}
		if w.seen[p][i].at.After(at) {
			at = w.seen[p][i].at
		}
	}
	return at, true
}

// purgedAll is the point every partition has been seen purged through.
func (w *purgeWatch) purgedAll() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var low time.Time
	for p := range w.parts {
		l := w.seen[p]
		if len(l) == 0 {
			return time.Time{}
		}
		if low.IsZero() || l[len(l)-1].purged.Before(low) {
			low = l[len(l)-1].purged
		}
	}
	return low
}

// finalizeState is the stream's finalizer's status query.
func (st *truthStack) finalizeState(ctx context.Context, stream string) (workflows.FinalizeState, error) {
	var fs workflows.FinalizeState
	v, err := st.tc.QueryWorkflow(ctx, workflows.FinalizeWorkflowID(stream), "", workflows.FinalizeQueryStatus)
	if err == nil {
		err = v.Get(&fs)
	}
	return fs, err
}

// finalizeStatus describes the stream's finalizer from its status query.
func (st *truthStack) finalizeStatus(ctx context.Context, stream string) string {
	fs, err := st.finalizeState(ctx, stream)
	if err != nil {
		return "finalizer: " + err.Error()
	}
	return fmt.Sprintf("finalizer: cursor %s, %d steps, %d windows; waiting: %s", fs.Cursor.Format(time.TimeOnly),
		fs.Steps, fs.Windows, fs.Waiting)
}
