package workers

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"reckon/activities"
	"reckon/internal/config"
	"reckon/internal/kafkaconn"
	"reckon/internal/metrics"
	"reckon/internal/temporalconn"
	"reckon/lake"
	"reckon/workflows"
)

func runBatch(ctx context.Context, cx *cmdContext) error {
	noStart := cx.fs.Bool("no-start", false, "only run the worker; do not start the archive and compaction workflows")
	if err := cx.parse(); err != nil {
		return err
	}
	cfg := cx.cfg
	// The activities dial Kafka per call (kafkaconn.Opts): a TLS or
	// password file they cannot read must stop the worker here, not fail
	// every activity attempt.
	if err := kafkaconn.Check(cfg.Kafka); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(cx.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c, err := temporalconn.Dial(ctx, cfg.Temporal, log, 2*time.Minute)
	if err != nil {
		return err
	}
	defer c.Close()
	lk, err := openConfiguredLake(cfg, "")
	if err != nil {
		return err
	}

	// The batch figures on /metrics: from activity results (interceptor)
	// and read at each scrape with the process's own admin client.
	madm, closeMAdm, err := kafkaconn.NewAdmin(cfg.Kafka, "batch-metrics")
	if err != nil {
		return err
	}
	defer closeMAdm()
	reg := metrics.NewRegistry()
	bm := newBatchMetrics(reg, cfg, madm, lk, c, log)
	go func() {
		err := metrics.Serve(ctx, cfg.Metrics.Addr, reg, func(addr string) {
			log.Info("metrics", "url", "http://"+addr+"/metrics")
		})
		if err != nil {
			log.Warn("metrics endpoint off", "err", err)
		}
	}()
	opts := batchWorkerOptions()
	opts.Interceptors = append(opts.Interceptors, bm.interceptor())
	w := worker.New(c, cfg.Temporal.TaskQueue, opts)
	// The activities' Kafka clients live as long as the process; these
	// defers run after the worker's stop below, when no activity runs.
	closeArchiveKafka, err := registerBatch(w, cfg, lk)
	if err != nil {
		return err
	}
	defer closeArchiveKafka()
	closeTruthKafka, err := registerTruth(w, cfg, lk, log)
	if err != nil {
		return err
	}
	defer closeTruthKafka()
	runBridge, closeBridge, err := zreportBatchOn(cfg, c, w, lk)
	if err != nil {
		return err
	}
	defer closeBridge()
	if err := w.Start(); err != nil {
		return fmt.Errorf("batch: worker: %w", err)
	}
	defer w.Stop()
	log.Info("batch worker polling", "task_queue", cfg.Temporal.TaskQueue, "lake", cfg.Lake.Root)

	if !*noStart {
		if err := startArchives(ctx, cfg, c, log); err != nil {
			return err
		}
		if err := startCompactions(ctx, cfg, c, log); err != nil {
			return err
		}
		// Pane history, targeted corrections of too-late events and the
		// daily reconciliation schedule (idempotent).
		if err := startTruth(ctx, cfg, c, log); err != nil {
			return err
		}
	}
	// The Z-report parts bridge runs for the life of the process; if it
	// fails the process exits and its supervisor restarts it.
	bridgeErr := make(chan error, 1)
	go func() { bridgeErr <- runBridge(ctx) }()
	select {
	case <-ctx.Done():
		// The bridge returns once ctx ends; only then may its client
		// close (closeBridge): closing it mid-poll waits for a rebalance
		// the poll blocks, until the supervisor's kill.
		<-bridgeErr
	case err := <-bridgeErr:
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("batch: z-report bridge: %w", err)
		}
	}
	log.Info("batch worker stopping")
	return nil
}

// registerBatch registers every batch workflow and activity on w. The
// activities share one Kafka read side for the life of the worker: call
// the returned func to close it once the worker has stopped.
func registerBatch(w worker.Registry, cfg *config.Config, lk *lake.Lake) (closeKafka func(), err error) {
	kc, err := activities.NewKafka(cfg.Kafka, "archive")
	if err != nil {
		return nil, err
	}
	w.RegisterWorkflowWithOptions(workflows.Archive, workflow.RegisterOptions{Name: "Archive"})
	w.RegisterActivity(&activities.Archive{Cfg: cfg, Lake: lk, Kafka: kc, AfterWrite: archiveAfterWrite})
	return kc.Close, nil
}

// archiveAfterWrite is activities.Archive.AfterWrite for every batch
// worker of this process. It is nil: only this package's test binary sets
// it (TestMain, for a child process that runs as reckon), so no
// configuration or environment of the reckon binary can reach it.
var archiveAfterWrite func(ctx context.Context, in activities.ArchiveRangeInput, res activities.ArchiveRangeResult)

// rawTopics are the topics whose every record the lake must hold.
func rawTopics(cfg *config.Config) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range cfg.Streams {
		if !seen[s.Topic] {
			seen[s.Topic] = true
			out = append(out, s.Topic)
		}
	}
	if t := cfg.Topics.ZReportParts; t != "" && !seen[t] {
		out = append(out, t)
	}
	return out
}

// startArchives starts one archive workflow per raw topic-partition,
// idempotently: a running one is kept (USE_EXISTING); a closed one is
// started again and resumes from the lake's progress file.
func startArchives(ctx context.Context, cfg *config.Config, c client.Client, log *slog.Logger) error {
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
	topics := rawTopics(cfg)
	md, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("batch: list topics: %w", err)
	}
	for _, t := range topics {
		d, ok := md[t]
		if !ok || d.Err != nil {
			log.Warn("raw topic not found; not archiving it (run `reckon topics apply`)", "topic", t)
			continue
		}
		for p := range d.Partitions {
			id := workflows.ArchiveWorkflowID(t, p)
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
				ID:                       id,
				TaskQueue:                cfg.Temporal.TaskQueue,
				WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
				WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
				StaticSummary:            fmt.Sprintf("archive %s partition %d to the lake", t, p),
			}, "Archive", workflows.ArchiveState{Topic: t, Partition: p, Cursor: -1})
			if err != nil {
				return fmt.Errorf("batch: start %s: %w", id, err)
			}
			log.Info("archive workflow running", "id", id, "run", run.GetRunID())
		}
	}
	return nil
}
