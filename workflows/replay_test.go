package workflows_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"reckon/activities"
	"reckon/workflows"
)

// TestReplayFansOutWithABoundedWindow: one child per (stream, day), never
// more than Concurrency at once, ending with the summed report; the
// progress query reports while it runs.
func TestReplayFansOutWithABoundedWindow(t *testing.T) {
	f := newFakeTruth()
	f.hold = 20 * time.Millisecond
	env := truthEnv(t, f)
	var seen []workflows.ReplayProgress
	for i := 1; i <= 3; i++ {
		env.RegisterDelayedCallback(func() {
			v, err := env.QueryWorkflow(workflows.ReplayQueryProgress)
			if err != nil {
				t.Error(err)
				return
			}
			var p workflows.ReplayProgress
			if err := v.Get(&p); err != nil {
				t.Error(err)
			}
			seen = append(seen, p)
		}, time.Duration(i)*time.Second)
	}
	env.ExecuteWorkflow(workflows.ReplayWorkflow, workflows.ReplayParams{From: "2026-11-05", To: "2026-11-07", Concurrency: 2, HorizonPoll: time.Second})
	var rep activities.Report
	if err := env.GetWorkflowResult(&rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Parts) != 6 || rep.Total.Corrected != 12 || rep.Total.Windows != 60 || rep.Name != "2026-11-05_2026-11-07" || rep.Path == "" {
		t.Fatalf("report parts %d total %+v name %s path %q", len(rep.Parts), rep.Total, rep.Name, rep.Path)
	}
	if f.maxRunning > 2 {
		t.Fatalf("%d recomputes ran at once, want at most 2", f.maxRunning)
	}
	calls := f.calls()
	if len(calls) != 6 {
		t.Fatalf("%d recomputes", len(calls))
	}
	// Days start in order (day-major): the window slides.
	if !calls[0].From.Equal(time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC)) || !calls[5].From.Equal(day) {
		t.Fatalf("first %v last %v", calls[0].From, calls[5].From)
	}
	for _, p := range seen {
		if p.Total != 6 || len(p.Running) > 2 {
			t.Errorf("progress %+v", p)
		}
	}
}

// TestReplayContinuesAsNewAfterDraining: past the history limit the replay
// stops starting children, waits for the running ones, and continues as
// new carrying its progress; the next run finishes the range.
func TestReplayContinuesAsNewAfterDraining(t *testing.T) {
	f := newFakeTruth()
	env := truthEnv(t, f)
	env.SetCurrentHistoryLength(100_000)
	in := workflows.ReplayParams{From: "2026-11-05", To: "2026-11-07", Streams: []string{"suhu"}, Concurrency: 2, HistoryLimit: 1000}
	env.ExecuteWorkflow(workflows.ReplayWorkflow, in)
	err := env.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		t.Fatalf("error = %v, want continue-as-new", err)
	}
	var next workflows.ReplayParams
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	st := next.State
	if st == nil || st.Next != 2 || st.Done != 2 || len(st.Report.Parts) != 2 || st.Runs != 1 {
		t.Fatalf("carried state %+v", st)
	}

	env = truthEnv(t, f)
	env.ExecuteWorkflow(workflows.ReplayWorkflow, next)
	var rep activities.Report
	if err := env.GetWorkflowResult(&rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Parts) != 3 || len(f.calls()) != 3 {
		t.Fatalf("parts %d, recomputes %d; want 3 each (no day twice)", len(rep.Parts), len(f.calls()))
	}
}

// TestReplayReprocessFailed: --reprocess failed skips (stream, day)s whose
// last child completed and re-runs the rest; a failing child is reported,
// not fatal.
func TestReplayReprocessFailed(t *testing.T) {
	f := newFakeTruth()
	f.statuses[workflows.ReplayChildID("suhu", "2026-11-06", false)] = "completed"
	f.statuses[workflows.ReplayChildID("suhu", "2026-11-07", false)] = "failed"
	f.fail["suhu 2026-11-07"] = true
	env := truthEnv(t, f)
	env.ExecuteWorkflow(workflows.ReplayWorkflow, workflows.ReplayParams{From: "2026-11-06", To: "2026-11-07", Streams: []string{"suhu"}, Reprocess: workflows.ReprocessFailed})
	var rep activities.Report
	if err := env.GetWorkflowResult(&rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Skipped) != 1 || rep.Skipped[0] != "suhu 2026-11-06" || len(rep.Failed) != 1 || !strings.HasPrefix(rep.Failed[0], "suhu 2026-11-07") || len(rep.Parts) != 0 {
		t.Fatalf("skipped %v failed %v parts %d", rep.Skipped, rep.Failed, len(rep.Parts))
	}
	if calls := f.calls(); len(calls) != 1 || !calls[0].From.Equal(day) {
		t.Fatalf("recomputes %+v", calls)
	}
}

// TestReplayRejectsBadInput: bad dates fail at once, without children.
func TestReplayRejectsBadInput(t *testing.T) {
	for _, in := range []workflows.ReplayParams{
		{From: "2026-11-07", To: "2026-11-06"},
		{From: "07.11.2026", To: "2026-11-08"},
		{From: "2026-11-07", To: "2026-11-07", Reprocess: "some"},
	} {
		f := newFakeTruth()
		env := truthEnv(t, f)
		env.ExecuteWorkflow(workflows.ReplayWorkflow, in)
		if env.GetWorkflowError() == nil || len(f.calls()) > 0 {
			t.Errorf("%+v accepted", in)
		}
	}
}

// TestTruthHistoriesReplay replays recorded histories of the batch-truth
// workflows (a reconciliation, its recompute, a targeted recompute, the
// correction workflow of a stream, a replay) with today's code: a change
// that would break running workflows fails here. Re-record after an
// intended change (guarded with workflow.GetVersion for running ones):
//
//	make e2e E2E_ARGS=-record-truth
func TestTruthHistoriesReplay(t *testing.T) {
	var files []string
	for _, g := range []string{"testdata/recompute*.json", "testdata/reconcile*.json", "testdata/replay*.json"} {
		m, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 3 {
		t.Fatalf("recorded histories missing in testdata/: %v", files)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			fh, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			hist, err := client.HistoryFromJSON(fh, client.HistoryJSONOptions{})
			if err != nil {
				t.Fatal(err)
			}
			r := workflows.NewTestReplayer(t)
			registerTruthWorkflows(r)
			opts := worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: originalID(hist), RunID: "replayed"}}
			if err := r.ReplayWorkflowHistoryWithOptions(nil, hist, opts); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// originalID recovers the workflow ID of a recorded run: histories do not
// hold it, but Reconcile and Correct name their children <id>/<suffix>.
func originalID(h *historypb.History) string {
	for _, e := range h.GetEvents() {
		if a := e.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a != nil {
			if i := strings.LastIndex(a.GetWorkflowId(), "/"); i > 0 && !strings.HasPrefix(a.GetWorkflowId(), "replay/") {
				return a.GetWorkflowId()[:i]
			}
		}
	}
	return "recorded"
}
