package workers

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"reckon/activities"
	"reckon/internal/config"
	"reckon/internal/kafkaconn"
	"reckon/lake"
	"reckon/streaming/progress"
	"reckon/workflows"
)

// registerTruth registers the recompute/reconcile/replay/correct/pane-archive
// workflows and activities on w. The activities share one Kafka read side
// for the life of the worker, apart from the archive's (registerBatch), so
// a raw partition's large reads never queue ahead of theirs on a broker's
// fetch connection, and one view of the stream's progress topic (the
// horizon's evidence, docs/adr/0015): call the returned func to close both
// once the worker has stopped.
func registerTruth(w worker.Registry, cfg *config.Config, lk *lake.Lake, log *slog.Logger) (closeAll func(),
	err error) {
	kc, err := activities.NewKafka(cfg.Kafka, "truth")
	if err != nil {
		return nil, err
	}
	pv, err := newProgressView(cfg, log)
	if err != nil {
		kc.Close()
		return nil, err
	}
	for _, wf := range []struct {
		fn   any
		name string
	}{
		{workflows.Recompute, workflows.RecomputeWorkflow},
		{workflows.Reconcile, workflows.ReconcileWorkflow},
		{workflows.Replay, workflows.ReplayWorkflow},
		{workflows.Correct, workflows.CorrectWorkflow},
		{workflows.LateWatch, workflows.LateWatchWorkflow},
		{workflows.PaneArchive, workflows.PaneArchiveWorkflow},
		{workflows.FeatureArchive, workflows.FeatureArchiveWorkflow},
		{workflows.CurateTables, workflows.CurateTablesWorkflow},
		{workflows.Finalize, workflows.FinalizeWorkflow},
	} {
		w.RegisterWorkflowWithOptions(wf.fn, workflow.RegisterOptions{Name: wf.name})
	}
	w.RegisterActivity(batchTruthActivities(cfg, lk, kc, pv))
	registerCompaction(w, cfg, lk, pv)
	return func() { pv.Close(); kc.Close() }, nil
}

func batchTruthActivities(cfg *config.Config, lk *lake.Lake, kc *activities.Kafka,
	pv *progress.View) *activities.BatchTruth {
	return &activities.BatchTruth{Cfg: cfg, Lake: lk, Kafka: kc, Progress: pv,
		SignalLate: func(ctx context.Context, stream string, items []activities.LateItem) error {
			_, err := activity.GetClient(ctx).SignalWithStartWorkflow(ctx, workflows.CorrectWorkflowID(stream),
				workflows.CorrectSignalLate, items,
				client.StartWorkflowOptions{
					TaskQueue:             cfg.Temporal.TaskQueue,
					WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
					StaticSummary:         fmt.Sprintf("targeted corrections of stream %s (too-late events, debounced)", stream),
				},
				workflows.CorrectWorkflow, correctParams(cfg, stream))
			return err
		}}
}

// correctParams starts a stream's correction workflow from cfg.
func correctParams(cfg *config.Config, stream string) workflows.CorrectParams {
	b := cfg.Batch
	return workflows.CorrectParams{
		Stream: stream, Debounce: b.CorrectDebounce, MaxDelay: b.CorrectMaxDelay,
		HorizonWait: min(b.HorizonWait, 15*time.Minute), HorizonPoll: time.Second,
	}
}

// startTruth idempotently starts the long-running parts (pane archive per
// summaries partition, features archive per features partition,
// targeted-correction consumer/workflow, a finalizer per stream) and
// applies the reconcile schedule.
func startTruth(ctx context.Context, cfg *config.Config, c client.Client, log *slog.Logger) error {
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := kafkaconn.WaitReady(wctx, cfg.Kafka); err != nil {
		return err
	}
	adm, closeAdm, err := kafkaconn.NewAdmin(cfg.Kafka, "batch")
	if err != nil {
		return err
	}
	defer closeAdm()
	md, err := adm.ListTopics(ctx, cfg.Topics.Summaries, cfg.Topics.Late, cfg.Topics.Features)
	if err != nil {
		return fmt.Errorf("truth: list topics: %w", err)
	}
	start := func(id, summary, wf string, arg any) error {
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID:                       id,
			TaskQueue:                cfg.Temporal.TaskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			StaticSummary:            summary,
		}, wf, arg)
		if err != nil {
			return fmt.Errorf("truth: start %s: %w", id, err)
		}
		log.Info("workflow running", "id", id, "run", run.GetRunID())
		return nil
	}
	for _, t := range []string{cfg.Topics.Summaries, cfg.Topics.Late, cfg.Topics.Features} {
		d, ok := md[t]
		if !ok || d.Err != nil {
			log.Warn("topic not found; not watching it (run `reckon topics apply`)", "topic", t)
			continue
		}
		for _, p := range d.Partitions.Numbers() {
			switch t {
			case cfg.Topics.Summaries:
				err = start(workflows.PaneArchiveWorkflowID(t, p),
					fmt.Sprintf("archive panes of %s partition %d to the lake", t, p),
					workflows.PaneArchiveWorkflow, workflows.PaneArchiveState{Topic: t, Partition: p, Cursor: -1,
						Idle: cfg.Batch.PaneArchiveIdle})
			case cfg.Topics.Features:
				err = start(workflows.FeatureArchiveWorkflowID(t, p),
					fmt.Sprintf("archive the served features of %s partition %d", t, p), workflows.FeatureArchiveWorkflow,
					workflows.FeatureArchiveState{Topic: t, Partition: p, Cursor: -1, Idle: cfg.Batch.PaneArchiveIdle})
			default:
				err = start(workflows.LateWatchWorkflowID(t, p),
					fmt.Sprintf("watch %s partition %d for too-late events → targeted corrections", t, p),
					workflows.LateWatchWorkflow, workflows.LateWatchState{Topic: t, Partition: p, Cursor: -1,
						Wait: cfg.Batch.LateWait})
			}
			if err != nil {
				return err
			}
		}
	}
	if cfg.Batch.FinalizeEvery > 0 {
		for _, s := range cfg.Streams {
			err := start(workflows.FinalizeWorkflowID(s.Name),
				fmt.Sprintf("make the windows of stream %s final as soon as their horizon passes", s.Name),
				workflows.FinalizeWorkflow, workflows.FinalizeState{Stream: s.Name, Window: s.Window,
					Every: cfg.Batch.FinalizeEvery, HorizonPoll: cfg.Batch.HorizonPoll})
			if err != nil {
				return err
			}
		}
	}
	what, err := applySchedule(ctx, cfg, c)
	if err != nil {
		return err
	}
	log.Info("reconcile schedule "+what, "id", cfg.Batch.ScheduleID, "at", cfg.Batch.ReconcileAt, "timezone",
		cfg.Batch.Timezone)
	return nil
}

// reconcileParams are the reconciliation settings from cfg.
func reconcileParams(cfg *config.Config) workflows.ReconcileParams {
	b := cfg.Batch
	return workflows.ReconcileParams{Timezone: b.Timezone, DaysBack: b.DaysBack, HorizonWait: b.HorizonWait,
		HorizonPoll: b.HorizonPoll}
}

// newProgressView follows the stream's progress topic with the config's
// Kafka settings (the horizon's evidence, docs/adr/0015).
func newProgressView(cfg *config.Config, log *slog.Logger) (*progress.View, error) {
	opts, err := kafkaconn.Options(cfg.Kafka, "stream-progress")
	if err != nil {
		return nil, err
	}
	return progress.NewView(progress.Options{Topic: cfg.Topics.StreamProgress, Kafka: opts}, log)
}
