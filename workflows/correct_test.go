package workflows_test

import (
	"testing"
	"time"

	"reckon/activities"
	"reckon/workflows"
)

func late(key string, win time.Time, partition int32, offset int64) activities.LateItem {
	return activities.LateItem{Key: key, WindowStart: win, WindowEnd: win.Add(5 * time.Minute), SourcePartition: partition, SourceOffset: offset}
}

// TestCorrectDebounces: too-late events arriving within the debounce are
// recomputed together, once, restricted to exactly their windows and
// waiting for the highest source offset per partition; then the workflow
// idles out and completes.
func TestCorrectDebounces(t *testing.T) {
	f := newFakeTruth()
	env := truthEnv(t, f)
	w1, w2 := day.Add(8*time.Hour), day.Add(8*time.Hour+5*time.Minute)
	send := func(at time.Duration, items ...activities.LateItem) {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.CorrectSignalLate, items) }, at)
	}
	send(0, late("u1", w1, 0, 10))
	send(3*time.Second, late("u2", w2, 1, 20), late("u1", w1, 0, 12))
	send(6*time.Second, late("u1", w1, 0, 11)) // same window, lower offset: nothing new
	start := env.Now()
	env.ExecuteWorkflow(workflows.CorrectWorkflow, workflows.CorrectParams{Stream: "payments", Debounce: 5 * time.Second, MaxDelay: time.Minute, IdleClose: time.Hour})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	calls := f.calls()
	if len(calls) != 1 {
		t.Fatalf("%d recomputes, want 1 (debounced)", len(calls))
	}
	c := calls[0]
	if len(c.Windows) != 2 || c.Windows[0].Key != "u1" || c.Windows[1].Key != "u2" || !c.From.Equal(w1) || !c.To.Equal(w2.Add(5*time.Minute)) || c.Trigger != activities.TriggerCorrection {
		t.Fatalf("recompute %+v", c)
	}
	if f.checks["payments"] != 1 {
		t.Fatalf("horizon checks %d", f.checks["payments"])
	}
	// Completed after the idle close: 6s of signals + 5s debounce + 1h idle.
	if d := env.Now().Sub(start); d < time.Hour || d > time.Hour+time.Minute {
		t.Fatalf("ran for %v", d)
	}
}

// TestCorrectMaxDelay: a steady trickle never lets the debounce expire;
// MaxDelay forces a recompute anyway, and windows of two UTC dates go to
// two recomputes.
func TestCorrectMaxDelay(t *testing.T) {
	f := newFakeTruth()
	env := truthEnv(t, f)
	for i := 0; i < 10; i++ {
		win := day.Add(-5 * time.Minute) // 2026-11-06 23:55
		if i%2 == 1 {
			win = day
		}
		items := []activities.LateItem{late("k", win, 0, int64(i))}
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.CorrectSignalLate, items) }, time.Duration(i)*3*time.Second)
	}
	env.ExecuteWorkflow(workflows.CorrectWorkflow, workflows.CorrectParams{Stream: "payments", Debounce: 5 * time.Second, MaxDelay: 10 * time.Second, IdleClose: time.Minute})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	calls := f.calls()
	// Signals at 0..27s every 3s: flushes at 10s (max delay), 22s, and after the last.
	if len(calls) < 4 || len(calls) > 8 {
		t.Fatalf("%d recomputes", len(calls))
	}
	days := map[string]bool{}
	for _, c := range calls {
		days[c.From.Format(time.DateOnly)] = true
		if c.From.Format(time.DateOnly) != c.To.Add(-time.Nanosecond).Format(time.DateOnly) {
			t.Errorf("recompute %v..%v crosses midnight", c.From, c.To)
		}
	}
	if len(days) != 2 {
		t.Fatalf("dates %v", days)
	}
}
