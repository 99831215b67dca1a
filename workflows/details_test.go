package workflows_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/testsuite"

	"reckon/activities"
	"reckon/workflows"
)

// metadataDetails reads a workflow's current details as the Temporal UI
// does: with the __temporal_workflow_metadata query.
func metadataDetails(t *testing.T, env *testsuite.TestWorkflowEnvironment) string {
	t.Helper()
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

// TestRecomputeDetailsRenderAsMarkdown: a waiting recompute's details put
// each waiting partition on a list item of its own (markdown runs single
// newlines together); a corrected one says why it ran and lists each
// correction in a table, numbers grouped.
func TestRecomputeDetailsRenderAsMarkdown(t *testing.T) {
	env := truthEnv(t, newFakeTruth())
	waits := []string{
		"payments-kejadian/0: archived to offset 11402, the range needs 11410",
		"payments-kejadian/1: no watermark yet (no payment.kejadian event processed; last progress 3s ago)",
		"payments-kejadian/2 archived to 927, need 1099511627777",
	}
	checks := 0
	env.OnActivity("CheckHorizon", mock.Anything, mock.Anything).Return(
		func(context.Context, activities.HorizonInput) (activities.HorizonResult, error) {
			if checks++; checks <= 3 {
				// Lines as the horizon check joins them: by "\n", a
				// targeted check's by "; ".
				return activities.HorizonResult{Waiting: waits[0] + "\n" + waits[1] + "; " + waits[2],
					Causes: []string{activities.HorizonArchive, activities.HorizonNoWatermark}}, nil
			}
			return activities.HorizonResult{Ready: true}, nil
		})
	from := day.Add(10 * time.Hour)
	changes := []activities.WindowChange{
		{Key: "toko_7", WindowStart: from, PublishedVersion: 1, PublishedCount: 2, PublishedSum: 2974500, TruthCount: 3,
			TruthSum: 3974500.25, Version: 2, Reason: "late events"},
		{Key: "toko-9", WindowStart: from, TruthCount: 1, TruthSum: 10, Version: 1, Reason: "missing in the stream"},
	}
	env.OnActivity("RecomputeWindows", mock.Anything, mock.Anything).Return(activities.RecomputeResult{
		Report:  activities.TruthReport{Stream: "payments", From: from, To: from.Add(time.Minute), Windows: 2, Corrected: 2},
		Changes: changes,
	}, nil)
	var waiting string
	env.RegisterDelayedCallback(func() { waiting = metadataDetails(t, env) }, 30*time.Second)
	env.ExecuteWorkflow(workflows.RecomputeWorkflow, workflows.RecomputeParams{
		Stream: "payments", From: from, To: from.Add(time.Minute), Trigger: activities.TriggerCorrection,
		Windows:     []activities.WindowRef{{Key: "toko_7", Start: from}, {Key: "toko-9", Start: from}},
		HorizonWait: time.Hour, HorizonPoll: 10 * time.Second,
	})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(waiting, "\n")
	if !strings.Contains(lines[0], "waiting for the horizon") {
		t.Errorf("waiting details' first line: %q", lines[0])
	}
	for _, w := range waits {
		if !slices.Contains(lines, "- "+w) {
			t.Errorf("waiting details lack the list item %q:\n%s", "- "+w, waiting)
		}
	}
	end := metadataDetails(t, env)
	lines = strings.Split(end, "\n")
	if !strings.Contains(lines[0], "corrected · trigger: correction (too-late events arrived") {
		t.Errorf("corrected details' first line: %q", lines[0])
	}
	for _, want := range []string{
		"**corrections** — version, events, sum",
		"| key | window | published | truth | reason |",
		"| toko\\_7 | 10:00:00 | v1, 2, 2,974,500 | v2, 3, 3,974,500.25 | late events |",
		"| toko-9 | 10:00:00 | none | v1, 1, 10 | missing in the stream |",
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("corrected details lack the line %q:\n%s", want, end)
		}
	}
}
