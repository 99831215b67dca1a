package workflows_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/client"

	"reckon/activities"
	"reckon/workflows"
)

// TestReconcileScheduledRunReconcilesYesterday: a run started by the
// schedule (workflow ID with the nominal time appended) reconciles the day
// before its nominal date — also when it runs late (catch-up) — for every
// configured stream, and writes the summed report.
func TestReconcileScheduledRunReconcilesYesterday(t *testing.T) {
	f := newFakeTruth()
	env := truthEnv(t, f)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "reckon-reconcile-2026-11-08T02:00:00Z"})
	env.SetStartTime(time.Date(2026, 11, 10, 9, 0, 0, 0, time.UTC)) // two days late
	env.ExecuteWorkflow(workflows.ReconcileWorkflow, workflows.ReconcileParams{Timezone: "UTC", DaysBack: 1})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var rep activities.Report
	if err := env.GetWorkflowResult(&rep); err != nil {
		t.Fatal(err)
	}
	if rep.Name != "2026-11-07" || rep.Kind != "reconcile" || len(rep.Parts) != 2 || rep.Path != "reports/reconcile/2026-11-07.json" {
		t.Fatalf("report %+v", rep)
	}
	if rep.Total.Windows != 20 || rep.Total.Corrected != 4 || rep.Total.CountErrMean != 0.3 || rep.Total.CountErrMax != 2 {
		t.Fatalf("total %+v", rep.Total)
	}
	var streams []string
	for _, c := range f.calls() {
		if !c.From.Equal(day) || !c.To.Equal(day.Add(24*time.Hour)) || c.Trigger != activities.TriggerReconcile {
			t.Errorf("recompute %+v, want the UTC day 2026-11-07", c)
		}
		streams = append(streams, c.Stream)
	}
	slices.Sort(streams)
	if strings.Join(streams, ",") != "payments,suhu" {
		t.Fatalf("streams %v", streams)
	}
}

// TestReconcileTimezoneAndExplicitDate: the date comes from the nominal
// time in the configured zone; an explicit date wins.
func TestReconcileTimezoneAndExplicitDate(t *testing.T) {
	f := newFakeTruth()
	env := truthEnv(t, f)
	// 02:00 in Jakarta on the 8th is 19:00 UTC on the 7th: yesterday there is the 7th.
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "reckon-reconcile-2026-11-07T19:00:00Z"})
	env.ExecuteWorkflow(workflows.ReconcileWorkflow, workflows.ReconcileParams{Timezone: "Asia/Jakarta", DaysBack: 1, Streams: []string{"suhu"}})
	var rep activities.Report
	if err := env.GetWorkflowResult(&rep); err != nil {
		t.Fatal(err)
	}
	if rep.Name != "2026-11-07" || len(rep.Parts) != 1 {
		t.Fatalf("report %+v", rep)
	}

	env = truthEnv(t, newFakeTruth())
	env.ExecuteWorkflow(workflows.ReconcileWorkflow, workflows.ReconcileParams{Date: "2026-02-28", Streams: []string{"suhu"}, DryRun: true})
	rep = activities.Report{}
	if err := env.GetWorkflowResult(&rep); err != nil {
		t.Fatal(err)
	}
	if rep.Name != "2026-02-28" || !rep.DryRun || rep.Path != "" {
		t.Fatalf("report %+v", rep)
	}
}

// TestReconcileReportsAFailedStream: one stream failing does not lose the
// other's report; the run says which failed.
func TestReconcileReportsAFailedStream(t *testing.T) {
	f := newFakeTruth()
	f.fail["payments 2026-11-07"] = true
	env := truthEnv(t, f)
	env.ExecuteWorkflow(workflows.ReconcileWorkflow, workflows.ReconcileParams{Date: "2026-11-07"})
	var rep activities.Report
	if err := env.GetWorkflowResult(&rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Parts) != 1 || rep.Parts[0].Stream != "suhu" || len(rep.Failed) != 1 || !strings.HasPrefix(rep.Failed[0], "payments 2026-11-07") {
		t.Fatalf("report parts %d failed %v", len(rep.Parts), rep.Failed)
	}
}

// TestReconcileDetailsFollowEachChild: the parent's current details (what
// the UI and `reckon reconcile --wait` show) say which stream's recompute
// finished as soon as it finishes, while another still waits, not only
// when all are done.
func TestReconcileDetailsFollowEachChild(t *testing.T) {
	env := truthEnv(t, newFakeTruth())
	var mu sync.Mutex // protects checks
	checks := map[string]int{}
	env.OnActivity("CheckHorizon", mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.HorizonInput) (activities.HorizonResult, error) {
		mu.Lock()
		defer mu.Unlock()
		checks[in.Stream]++
		if in.Stream == "suhu" && checks[in.Stream] <= 10 { // suhu's horizon comes ten polls later
			return activities.HorizonResult{Waiting: "suhu: watermark behind", Causes: []string{activities.HorizonWatermark}}, nil
		}
		return activities.HorizonResult{Ready: true}, nil
	})
	details := func() string {
		v, err := env.QueryWorkflow("__temporal_workflow_metadata")
		if err != nil {
			t.Errorf("metadata query: %v", err)
			return ""
		}
		var md sdkpb.WorkflowMetadata
		if err := v.Get(&md); err != nil {
			t.Errorf("metadata: %v", err)
		}
		return md.GetCurrentDetails()
	}
	var midway string
	env.RegisterDelayedCallback(func() { midway = details() }, 5*time.Minute)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.ReconcileWorkflowID("2026-11-07")})
	env.ExecuteWorkflow(workflows.ReconcileWorkflow, workflows.ReconcileParams{Date: "2026-11-07", HorizonPoll: time.Minute, HorizonWait: time.Hour})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	want := "**reconcile 2026-11-07**: 1 of 2 streams done\n\n" +
		"- suhu: recomputing — `reconcile/2026-11-07/suhu` says what it waits for\n- payments: corrected"
	if midway != want {
		t.Errorf("details while suhu waits: %q, want %q", midway, want)
	}
	if end := details(); !strings.HasPrefix(end, "**reconcile 2026-11-07** corrected") {
		t.Errorf("details at the end: %q", end)
	}
}
