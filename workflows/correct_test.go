package workflows_test

import (
	"slices"
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

// TestCorrectHoppingWindows: a too-late event of a hopping stream names
// every window covering it (activities.ReadLate); the recomputes check
// exactly those, one per UTC date, over ranges on window boundaries that
// never cross midnight (docs/adr/0041).
func TestCorrectHoppingWindows(t *testing.T) {
	f := newFakeTruth()
	env := truthEnv(t, f)
	// An event at 00:01:30 in 5-minute windows every minute: windows
	// starting 23:57 … 00:01.
	var items []activities.LateItem
	for s := day.Add(-3 * time.Minute); !s.After(day.Add(time.Minute)); s = s.Add(time.Minute) {
		items = append(items, late("k", s, 0, 7))
	}
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.CorrectSignalLate, items) }, 0)
	env.ExecuteWorkflow(workflows.CorrectWorkflow, workflows.CorrectParams{Stream: "payments", Debounce: 5 * time.Second, MaxDelay: time.Minute, IdleClose: time.Minute})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	calls := f.calls()
	if len(calls) != 2 {
		t.Fatalf("%d recomputes, want one per date", len(calls))
	}
	slices.SortFunc(calls, func(a, b activities.RecomputeInput) int { return a.From.Compare(b.From) })
	for i, want := range []struct {
		from, to time.Time
		starts   []time.Time
	}{
		{day.Add(-5 * time.Minute), day, []time.Time{day.Add(-3 * time.Minute), day.Add(-2 * time.Minute), day.Add(-time.Minute)}},
		{day, day.Add(5 * time.Minute), []time.Time{day, day.Add(time.Minute)}},
	} {
		c := calls[i]
		var starts []time.Time
		for _, w := range c.Windows {
			starts = append(starts, w.Start)
		}
		if !c.From.Equal(want.from) || !c.To.Equal(want.to) || !slices.EqualFunc(starts, want.starts, time.Time.Equal) {
			t.Errorf("recompute %d: [%v, %v) windows %v; want [%v, %v) %v", i, c.From, c.To, starts, want.from, want.to, want.starts)
		}
	}
}
