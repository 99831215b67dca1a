package workflows_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"reckon/activities"
	"reckon/lake"
	"reckon/workflows"
)

// finalStream stands in for the horizon and the recompute in the
// finalizer's tests: the stream's purged-through point moves on by step at
// every check, the first check sees it behind.
type finalStream struct {
	mu         sync.Mutex
	purged     time.Time
	step       time.Duration
	window     time.Duration
	checks     []activities.HorizonInput
	recomputes []activities.RecomputeInput
	// recomputeAt is the workflow time of each recompute's start.
	recomputeAt []time.Time
	curated     int
	now         func() time.Time // the test environment's clock
	idle        bool             // an empty topic: every range is final at once
}

func (f *finalStream) CheckHorizon(_ context.Context, in activities.HorizonInput) (activities.HorizonResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checks = append(f.checks, in)
	if f.idle {
		return activities.HorizonResult{Ready: true, To: in.To}, nil
	}
	behind := len(f.checks) == 1
	if !behind {
		f.purged = f.purged.Add(f.step)
	}
	to := in.To
	if in.SoFar {
		to = f.purged
		if to.After(in.To) {
			to = in.To
		}
		to = to.Truncate(f.window)
		if !to.After(in.From) {
			return activities.HorizonResult{Causes: []string{activities.HorizonWatermark}, Waiting: "behind"}, nil
		}
	}
	t := activities.HorizonTarget{Partition: 0, Offset: int64(len(f.checks)), PurgedThrough: f.purged, PublishedAt: f.purged}
	return activities.HorizonResult{Ready: true, To: to, Targets: []activities.HorizonTarget{t}, PassedAt: f.purged,
		PickedAt: f.purged.Add(time.Second)}, nil
}

func (f *finalStream) RecomputeWindows(_ context.Context, in activities.RecomputeInput) (activities.RecomputeResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recomputes = append(f.recomputes, in)
	f.recomputeAt = append(f.recomputeAt, f.now())
	return activities.RecomputeResult{Report: activities.TruthReport{Stream: in.Stream, From: in.From, To: in.To, Windows: 3},
		Files: []string{"truth/stream=payments/window_date=2026-11-07/" + in.TruthFile + ".parquet"}}, nil
}

func (f *finalStream) CurateWindows(context.Context, activities.CurateInput) (lake.CurateResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.curated++
	return lake.CurateResult{}, nil
}

// runFinalize runs the finalizer from cursor with the clock at start
// until it has run for d of workflow time, then cancels it.
func runFinalize(t *testing.T, f *finalStream, start, cursor time.Time, d time.Duration) workflows.FinalizeState {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := workflows.NewTestEnv(&s)
	env.SetStartTime(start)
	f.now = env.Now
	env.RegisterWorkflowWithOptions(workflows.Finalize, workflow.RegisterOptions{Name: workflows.FinalizeWorkflow})
	for name, fn := range map[string]any{
		"CheckHorizon": f.CheckHorizon, "RecomputeWindows": f.RecomputeWindows, "CurateWindows": f.CurateWindows,
	} {
		env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
	var state workflows.FinalizeState
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(workflows.FinalizeQueryStatus)
		if err == nil {
			err = v.Get(&state)
		}
		if err != nil {
			t.Errorf("status query: %v", err)
		}
		env.CancelWorkflow()
	}, d)
	env.ExecuteWorkflow(workflows.FinalizeWorkflow, workflows.FinalizeState{Stream: "payments", Window: f.window,
		Cursor: cursor, Every: 10 * time.Second, HorizonPoll: 30 * time.Second})
	if !env.IsWorkflowCompleted() {
		t.Fatal("the finalizer did not stop when cancelled")
	}
	return state
}

// TestFinalizeSteps: the cursor moves on step by step as the stream's
// purged-through point does; no step crosses an hour (each hour's truth
// rows share one file); the first step measures no time to final (it did
// not see the previous pick), later ones from the previous step's pick.
func TestFinalizeSteps(t *testing.T) {
	t0 := day.Add(10*time.Hour + 59*time.Minute + 40*time.Second)
	f := &finalStream{purged: t0, step: 15 * time.Second, window: 5 * time.Second}
	state := runFinalize(t, f, t0.Add(time.Minute), t0, 2*time.Minute)
	rs := f.recomputes
	if state.Steps != int64(len(rs)) || state.Windows != 3*state.Steps || !state.Cursor.Equal(rs[len(rs)-1].To) {
		t.Errorf("status: %d steps, %d windows, cursor %s after %d recomputes of 3 windows", state.Steps, state.Windows,
			state.Cursor.Format(time.TimeOnly), len(rs))
	}
	if len(rs) < 4 {
		t.Fatalf("%d steps in 2 minutes, want at least 4: %+v", len(rs), rs)
	}
	hour11 := day.Add(11 * time.Hour)
	for i, r := range rs {
		if i == 0 && !r.From.Equal(t0) || i > 0 && !r.From.Equal(rs[i-1].To) || !r.To.After(r.From) {
			t.Errorf("step %d covers [%s, %s): not contiguous from the cursor", i, r.From, r.To)
		}
		if r.From.Before(hour11) && r.To.After(hour11) {
			t.Errorf("step %d [%s, %s) crosses an hour", i, r.From.Format(time.TimeOnly), r.To.Format(time.TimeOnly))
		}
		if want := workflows.FinalizeTruthFile(r.From); r.TruthFile != want || r.Trigger != activities.TriggerFinalize {
			t.Errorf("step %d: truth file %q trigger %q, want %q finalize", i, r.TruthFile, r.Trigger, want)
		}
	}
	if rs[1].TruthFile != "final-20261107T10" || rs[2].TruthFile != "final-20261107T11" {
		t.Errorf("truth files %q, %q", rs[1].TruthFile, rs[2].TruthFile)
	}
	// The first check saw the stream behind: the first step's time to
	// final starts when the stream passed (PassedAt); the next steps'
	// at the previous step's pick.
	if !rs[0].HorizonPassedAt.Equal(t0.Add(15*time.Second)) || !rs[2].HorizonPassedAt.Equal(t0.Add(31*time.Second)) {
		t.Errorf("time to final from %s, %s; want the pass, then the previous pick",
			rs[0].HorizonPassedAt.Format(time.TimeOnly), rs[2].HorizonPassedAt.Format(time.TimeOnly))
	}
	if f.curated != len(rs) {
		t.Errorf("curated %d times after %d steps", f.curated, len(rs))
	}
}

// TestFinalizeNeverRunsAhead: on an empty topic every range is final at
// once; the cursor catches up hour by hour without pacing, yet stops at
// the present.
func TestFinalizeNeverRunsAhead(t *testing.T) {
	start := day.Add(11*time.Hour + 30*time.Minute)
	f := &finalStream{window: 5 * time.Second, idle: true}
	runFinalize(t, f, start, day.Add(9*time.Hour), 10*time.Minute)
	rs := f.recomputes
	if len(rs) < 3 {
		t.Fatalf("%d steps over 2.5 idle hours", len(rs))
	}
	last := rs[len(rs)-1]
	if end := start.Add(10 * time.Minute); last.To.After(end) {
		t.Errorf("the cursor ran ahead of the clock: %s > %s", last.To, end)
	}
	if !last.To.After(start) {
		t.Errorf("the cursor stayed behind the clock: %s", last.To)
	}
	// Catching up is not paced: the hours 09:00-11:00 took no workflow time.
	for _, r := range rs[:2] {
		if !r.To.Equal(r.From.Add(time.Hour)) {
			t.Errorf("catch-up step [%s, %s): want whole hours", r.From.Format(time.TimeOnly), r.To.Format(time.TimeOnly))
		}
	}
	if f.recomputeAt[1].Sub(f.recomputeAt[0]) > time.Second {
		t.Errorf("the second catch-up step came %v after the first", f.recomputeAt[1].Sub(f.recomputeAt[0]))
	}
}
