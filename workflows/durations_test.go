package workflows_test

import (
	"testing"

	"reckon/internal/testing/durationjson"
	"reckon/workflows"
)

// TestWorkflowPayloadDurationsReadable: every duration of the workflows'
// inputs and carried states is written as a string ("1m30s"), for the
// Temporal UI, and reads back from that and from the nanoseconds recorded
// histories hold (the replay tests replay those histories).
func TestWorkflowPayloadDurationsReadable(t *testing.T) {
	durationjson.Check(t,
		&workflows.RecomputeParams{}, &workflows.ReconcileParams{}, &workflows.ReplayParams{},
		&workflows.CorrectParams{}, &workflows.LateWatchState{}, &workflows.CompactionState{},
		&workflows.PaneArchiveState{}, &workflows.FeatureArchiveState{}, &workflows.ArchiveState{},
		&workflows.ZReportInput{}, &workflows.FinalizeState{},
	)
}
