package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"reckon/activities"
	"reckon/lake"
	"reckon/workflows"
)

// fakeTruth stands in for activities.BatchTruth in workflow tests: the same
// activity names, deterministic answers, and a record of the calls.
type fakeTruth struct {
	mu sync.Mutex // protects following fields
	// notReady: CheckHorizon answers "not ready" this many times per stream.
	notReady   int
	checks     map[string]int
	recomputes []activities.RecomputeInput
	// fail makes RecomputeWindows of "<stream> <date>" fail for good.
	fail     map[string]bool
	reports  []activities.Report
	statuses map[string]string
	// running/maxRunning measure concurrent RecomputeWindows calls.
	running, maxRunning int
	// hold keeps each RecomputeWindows busy this long (wall time) so
	// concurrent children overlap.
	hold time.Duration
	// curated records the files of every CurateWindows call.
	curated [][]string
	// soFar, when set, is the end a SoFar check picks (with one target,
	// archive behind); horizons records every check's input.
	soFar    time.Time
	horizons []activities.HorizonInput
}

func newFakeTruth() *fakeTruth {
	return &fakeTruth{checks: map[string]int{}, fail: map[string]bool{}, statuses: map[string]string{}}
}

func (f *fakeTruth) register(r interface {
	RegisterActivityWithOptions(any, activity.RegisterOptions)
}) {
	for name, fn := range map[string]any{
		"CheckHorizon": f.CheckHorizon, "RecomputeWindows": f.RecomputeWindows, "TruthStreams": f.TruthStreams,
		"WriteReport": f.WriteReport, "WorkflowStatuses": f.WorkflowStatuses, "ReadLate": f.ReadLate,
		"RecomputeExtent": f.RecomputeExtent, "PaneCursor": f.PaneCursor, "PaneArchiveEnd": f.PaneArchiveEnd, "ArchivePanes": f.ArchivePanes,
		"CurateWindows": f.CurateWindows,
	} {
		r.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
}

func (f *fakeTruth) CheckHorizon(_ context.Context, in activities.HorizonInput) (activities.HorizonResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checks[in.Stream]++
	f.horizons = append(f.horizons, in)
	if in.SoFar && !f.soFar.IsZero() {
		return activities.HorizonResult{To: f.soFar, Waiting: "archive behind",
			Causes: []string{activities.HorizonArchive}, Targets: []activities.HorizonTarget{{Partition: 0, Offset: 5}}}, nil
	}
	if f.checks[in.Stream] <= f.notReady {
		return activities.HorizonResult{Waiting: fmt.Sprintf("archive of %s behind (check %d)", in.Stream, f.checks[in.Stream])}, nil
	}
	return activities.HorizonResult{Ready: true}, nil
}

func (f *fakeTruth) RecomputeWindows(_ context.Context, in activities.RecomputeInput) (activities.RecomputeResult, error) {
	f.mu.Lock()
	f.recomputes = append(f.recomputes, in)
	f.running++
	f.maxRunning = max(f.maxRunning, f.running)
	fail := f.fail[in.Stream+" "+in.From.Format(time.DateOnly)]
	hold := f.hold
	f.mu.Unlock()
	if hold > 0 {
		time.Sleep(hold) // simulated work, so concurrent calls overlap; nothing waits on it
	}
	f.mu.Lock()
	f.running--
	f.mu.Unlock()
	if fail {
		return activities.RecomputeResult{}, temporal.NewNonRetryableApplicationError("lake unreadable", activities.ErrTypeTruthInput, nil)
	}
	// A deterministic answer: 10 windows a day, the stream got 2 wrong.
	rep := activities.TruthReport{Stream: in.Stream, From: in.From, To: in.To, DryRun: in.DryRun,
		Windows: 10, StreamExact: 8, Matched: 8, Corrected: 2, Events: 100, EventsBeyondLateness: 3,
		CountErrMax: 2, CountErrTotal: 3, SumErrMax: 40, SumErrTotal: 60, Reasons: activities.ReasonCounts{BeyondLateness: 2}}
	if len(in.Windows) > 0 {
		rep.Windows, rep.StreamExact, rep.Matched, rep.Corrected = int64(len(in.Windows)), 0, 0, int64(len(in.Windows))
	}
	rep.Add(activities.TruthReport{}) // compute means
	res := activities.RecomputeResult{Report: rep}
	if !in.DryRun {
		res.Files = []string{"truth/stream=" + in.Stream + "/window_date=" + in.From.Format(time.DateOnly) + "/truth-x.parquet"}
	}
	return res, nil
}

func (f *fakeTruth) CurateWindows(_ context.Context, in activities.CurateInput) (lake.CurateResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.curated = append(f.curated, in.Files)
	return lake.CurateResult{}, nil
}

// RecomputeExtent: a range holds data through its end, except "empty"
// streams.
func (f *fakeTruth) RecomputeExtent(_ context.Context, in activities.ExtentInput) (time.Time, error) {
	if in.Stream == "empty" {
		return in.From, nil
	}
	return in.To, nil
}

func (f *fakeTruth) TruthStreams(context.Context) ([]string, error) {
	return []string{"suhu", "payments"}, nil
}

func (f *fakeTruth) WriteReport(_ context.Context, r activities.Report) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reports = append(f.reports, r)
	if r.DryRun {
		return "", nil
	}
	return "reports/" + r.Kind + "/" + r.Name + ".json", nil
}

func (f *fakeTruth) WorkflowStatuses(_ context.Context, ids []string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = f.statuses[id]
	}
	return out, nil
}

func (f *fakeTruth) ReadLate(context.Context, activities.ReadLateInput) (activities.ReadLateResult, error) {
	return activities.ReadLateResult{}, errors.New("not used")
}
func (f *fakeTruth) PaneCursor(context.Context, string, int32) (int64, error) { return 0, nil }
func (f *fakeTruth) PaneArchiveEnd(context.Context, string, int32) (activities.PaneEnd, error) {
	return activities.PaneEnd{}, nil
}
func (f *fakeTruth) ArchivePanes(context.Context, activities.ArchivePanesInput) (activities.ArchivePanesResult, error) {
	return activities.ArchivePanesResult{}, nil
}

func (f *fakeTruth) calls() []activities.RecomputeInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.recomputes)
}

// truthEnv is a test workflow environment with the batch-truth workflows
// registered under their names and f as the activities.
func truthEnv(t *testing.T, f *fakeTruth) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := workflows.NewTestEnv(&s)
	registerTruthWorkflows(env)
	f.register(env)
	return env
}

func registerTruthWorkflows(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(workflows.Recompute, workflow.RegisterOptions{Name: workflows.RecomputeWorkflow})
	r.RegisterWorkflowWithOptions(workflows.Reconcile, workflow.RegisterOptions{Name: workflows.ReconcileWorkflow})
	r.RegisterWorkflowWithOptions(workflows.Replay, workflow.RegisterOptions{Name: workflows.ReplayWorkflow})
	r.RegisterWorkflowWithOptions(workflows.Correct, workflow.RegisterOptions{Name: workflows.CorrectWorkflow})
	r.RegisterWorkflowWithOptions(workflows.LateWatch, workflow.RegisterOptions{Name: workflows.LateWatchWorkflow})
	r.RegisterWorkflowWithOptions(workflows.PaneArchive, workflow.RegisterOptions{Name: workflows.PaneArchiveWorkflow})
	r.RegisterWorkflowWithOptions(workflows.CurateTables, workflow.RegisterOptions{Name: workflows.CurateTablesWorkflow})
}

var day = time.Date(2026, 11, 7, 0, 0, 0, 0, time.UTC)

// TestRecomputeWaitsForTheHorizon: the recompute polls the horizon on a
// timer (skipped in test time) and only then recomputes; the status query
// and current details show the wait.
func TestRecomputeWaitsForTheHorizon(t *testing.T) {
	f := newFakeTruth()
	f.notReady = 3
	env := truthEnv(t, f)
	start := env.Now()
	var polls int
	env.SetOnTimerScheduledListener(func(string, time.Duration) { polls++ })
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(workflows.RecomputeQueryStatus)
		if err != nil {
			t.Error(err)
			return
		}
		var st workflows.RecomputeStatus
		if err := v.Get(&st); err != nil || st.Status != workflows.StatusWaiting || !strings.Contains(st.Waiting, "behind") {
			t.Errorf("status while waiting = %+v, %v", st, err)
		}
	}, 90*time.Second)
	env.ExecuteWorkflow(workflows.RecomputeWorkflow, workflows.RecomputeParams{
		Stream: "suhu", From: day, To: day.Add(24 * time.Hour), Trigger: activities.TriggerManual, HorizonPoll: time.Minute,
	})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res activities.RecomputeResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Report.Corrected != 2 || res.Report.Windows != 10 {
		t.Fatalf("result %+v", res.Report)
	}
	if polls != 3 || env.Now().Sub(start) < 3*time.Minute {
		t.Fatalf("polled %d times over %v, want 3 sleeps of 1m", polls, env.Now().Sub(start))
	}
	if n := len(f.calls()); n != 1 {
		t.Fatalf("%d recomputes, want 1", n)
	}
}

// TestRecomputeOfToday: a day in progress is checked so far. The first
// check picks the end of the windows final so far and captures targets;
// the next checks keep both (never the stream's latest offset), the
// recompute covers up to there and the report says which windows were
// still open.
func TestRecomputeOfToday(t *testing.T) {
	f := newFakeTruth()
	f.soFar = day.Add(9 * time.Hour)
	env := truthEnv(t, f)
	env.SetStartTime(day.Add(9*time.Hour + 20*time.Minute))
	env.ExecuteWorkflow(workflows.RecomputeWorkflow, workflows.RecomputeParams{
		Stream: "suhu", From: day, To: day.Add(24 * time.Hour), Trigger: activities.TriggerManual, HorizonPoll: time.Minute,
	})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res activities.RecomputeResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if len(f.horizons) != 2 || !f.horizons[0].SoFar || !f.horizons[0].From.Equal(day) ||
		f.horizons[1].SoFar || !f.horizons[1].To.Equal(f.soFar) || len(f.horizons[1].Targets) != 1 ||
		f.horizons[0].WaitUpTo != 0 || f.horizons[1].WaitUpTo != time.Minute {
		// The first check answers at once (says why it waits); the next long-polls.
		t.Fatalf("horizon checks %+v", f.horizons)
	}
	calls := f.calls()
	if len(calls) != 1 || !calls[0].To.Equal(f.soFar) {
		t.Fatalf("recomputes %+v, want one up to %v", calls, f.soFar)
	}
	if !res.Report.To.Equal(f.soFar) || !res.Report.OpenUntil.Equal(day.Add(24*time.Hour)) {
		t.Fatalf("report to %v open until %v", res.Report.To, res.Report.OpenUntil)
	}
}

// TestRecomputeOfAnEmptyRange checks nothing and waits for nothing.
func TestRecomputeOfAnEmptyRange(t *testing.T) {
	f := newFakeTruth()
	f.notReady = 1 << 30
	env := truthEnv(t, f)
	env.ExecuteWorkflow(workflows.RecomputeWorkflow, workflows.RecomputeParams{Stream: "empty", From: day, To: day.Add(24 * time.Hour)})
	var res activities.RecomputeResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Report.Windows != 0 || len(f.calls()) != 0 || f.checks["empty"] != 0 {
		t.Fatalf("report %+v, %d recomputes, %d checks", res.Report, len(f.calls()), f.checks["empty"])
	}
}

// TestRecomputeGivesUpAtTheBound: a horizon that never comes fails the
// recompute with HorizonNotReached after HorizonWait, without recomputing.
func TestRecomputeGivesUpAtTheBound(t *testing.T) {
	f := newFakeTruth()
	f.notReady = 1 << 30
	env := truthEnv(t, f)
	env.ExecuteWorkflow(workflows.RecomputeWorkflow, workflows.RecomputeParams{
		Stream: "suhu", From: day, To: day.Add(time.Hour), HorizonWait: 10 * time.Minute, HorizonPoll: time.Minute,
	})
	err := env.GetWorkflowError()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != workflows.ErrTypeHorizon {
		t.Fatalf("error = %v, want %s", err, workflows.ErrTypeHorizon)
	}
	if len(f.calls()) != 0 {
		t.Fatal("recomputed without the horizon")
	}
}

// TestRecomputeCuratesAfterPublishing: a recompute that wrote truth rows
// curates exactly those files once it has published, in a CurateTables
// child it does not wait for; a dry run curates nothing.
func TestRecomputeCuratesAfterPublishing(t *testing.T) {
	for _, dry := range []bool{false, true} {
		f := newFakeTruth()
		env := truthEnv(t, f)
		var order []string
		env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
			order = append(order, info.ActivityType.Name)
		})
		var children []string
		env.SetOnChildWorkflowStartedListener(func(info *workflow.Info, _ workflow.Context, _ converter.EncodedValues) {
			children = append(children, info.WorkflowType.Name)
		})
		env.ExecuteWorkflow(workflows.RecomputeWorkflow, workflows.RecomputeParams{Stream: "payments", From: day, To: day.Add(time.Hour), DryRun: dry})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		want := [][]string{{"truth/stream=payments/window_date=2026-11-07/truth-x.parquet"}}
		if dry {
			want = nil
		}
		if !slices.EqualFunc(f.curated, want, slices.Equal) {
			t.Errorf("dry run %v: curated %v, want %v", dry, f.curated, want)
		}
		if i := slices.Index(order, "CurateWindows"); !dry && (i < 0 || i < slices.Index(order, "RecomputeWindows")) {
			t.Errorf("activities ran in order %v: curation must follow the publication", order)
		}
		// In its own workflow, so the recompute returns without waiting.
		if want := []string{workflows.CurateTablesWorkflow}; !dry && !slices.Equal(children, want) {
			t.Errorf("children %v, want %v", children, want)
		}
	}
}
