package workers

import (
	"context"
	"fmt"
	"log/slog"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"reckon/activities"
	"reckon/internal/config"
	"reckon/lake"
	"reckon/workflows"
)

// registerCompaction registers the raw table's compaction workflow and
// its activity on w (docs/adr/0018-continuous-compaction.md). pv is the
// worker's view of the stream's progress, nil to judge closed hours by the
// archive's progress alone.
func registerCompaction(w worker.Registry, cfg *config.Config, lk *lake.Lake, pv activities.ProgressReader) {
	w.RegisterWorkflowWithOptions(workflows.Compaction, workflow.RegisterOptions{Name: workflows.CompactionWorkflow})
	w.RegisterActivity(&activities.Compaction{Cfg: cfg, Lake: lk, Progress: pv})
}

// startCompactions starts one compaction workflow per raw topic,
// idempotently like the archive workflows: a running one is kept
// (USE_EXISTING); a closed one starts again and resumes from the lake.
func startCompactions(ctx context.Context, cfg *config.Config, c client.Client, log *slog.Logger) error {
	for _, t := range rawTopics(cfg) {
		id := workflows.CompactionWorkflowID(t)
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID:                       id,
			TaskQueue:                cfg.Temporal.TaskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			StaticSummary: fmt.Sprintf("compact %s's raw lake table: closed hours deduplicated into large files, "+
				"open hours kept under %d files per partition", t, cfg.Lake.Compaction.MaxOpenFiles),
		}, workflows.CompactionWorkflow, workflows.CompactionState{Topic: t, Poll: cfg.Lake.Compaction.Poll})
		if err != nil {
			return fmt.Errorf("batch: start %s: %w", id, err)
		}
		log.Info("compaction workflow running", "id", id, "run", run.GetRunID())
	}
	return nil
}
