package workflows

import (
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"reckon/activities"
)

// curateChangeID versions the curation steps of PaneArchive and Recompute:
// histories recorded before curation existed replay without them.
const curateChangeID = "curate-windows"

// curateFeaturesChangeID versions FeatureArchive's curation step (the
// feature_status table): histories recorded before it replay without it.
const curateFeaturesChangeID = "curate-features"

// curateWindows brings the curated windows and corrections tables up to
// date with lake files just written (activities.BatchTruth.CurateWindows,
// docs/adr/0019-curated-tables.md). A curation that keeps failing is
// logged, not fatal: the panes and truth rows are in the lake and `reckon
// lake curate` rebuilds a day.
func curateWindows(ctx workflow.Context, files []string) {
	var a *activities.BatchTruth
	cctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    2 * time.Minute,
		ScheduleToCloseTimeout: 10 * time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second},
	})
	if err := workflow.ExecuteActivity(cctx, a.CurateWindows, activities.CurateInput{Files: files}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("curating the windows and corrections tables failed", "files", len(files), "error", err)
	}
}

// CurateTables curates files (CurateWindows) on its own, so the workflow
// that wrote them need not wait: a Recompute starts it, abandoned, as its
// last step, ID "<recompute id>/curate".
func CurateTables(ctx workflow.Context, files []string) error {
	curateWindows(ctx, files)
	return nil
}

// startCurateTables starts CurateTables for files as an abandoned child
// and waits only until it has started.
func startCurateTables(ctx workflow.Context, files []string) {
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:        workflow.GetInfo(ctx).WorkflowExecution.ID + "/curate",
		StaticSummary:     "curate the windows and corrections tables with a recompute's truth rows",
		ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON,
	})
	f := workflow.ExecuteChildWorkflow(cctx, CurateTablesWorkflow, files)
	if err := f.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("starting the curation of a recompute's truth rows failed", "error", err)
	}
}
