package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"

	"reckon/activities"
	"reckon/internal/config"
	"reckon/internal/metrics"
	"reckon/lake"
	"reckon/zreport"
)

// batchMetrics are the batch worker's /metrics (deploy/README.md "What to
// alert on"): the figures activities report (activities.Metrics, fed by
// the worker interceptor) and those read at each scrape: archive lag per
// raw topic-partition from Kafka and the lake, the compaction backlog from
// the lake's file names, and Z-report keys by status from Temporal's
// visibility. Every batch worker reports the same scrape-time figures;
// aggregate them with max, not sum.
type batchMetrics struct {
	results *activities.Metrics

	archiveLag, archiveLagSeconds *metrics.Vec
	backlogFiles, backlogHours    *metrics.Vec
	zreportKeys, collectErrors    *metrics.Vec
	storageRetries, storageGaveUp *metrics.Vec
	cfg                           *config.Config
	adm                           *kadm.Client
	lk                            *lake.Lake
	tc                            client.Client
	log                           *slog.Logger
	now                           func() time.Time
	collectTimeout                time.Duration
}

// newBatchMetrics registers the batch families on r; adm, lk and tc are
// the process's clients, used at each scrape.
func newBatchMetrics(r *metrics.Registry, cfg *config.Config, adm *kadm.Client, lk *lake.Lake, tc client.Client,
	log *slog.Logger) *batchMetrics {
	b := cfg.Batch
	m := &batchMetrics{
		// A recompute checks its horizon every horizon_poll (targeted
		// corrections every second): a wait unconfirmed for two polls
		// and a minute has ended.
		results:    activities.NewMetrics(r, 2*b.HorizonPoll+time.Minute),
		archiveLag: r.Gauge("reckon_batch_archive_lag_offsets", "Raw topic-partition's last stable offset minus the lake's next offset to archive (transaction markers included).", "topic", "partition"),
		archiveLagSeconds: r.Gauge("reckon_batch_archive_lag_seconds",
			"Seconds since the ingest time up to which the lake holds everything of the raw topic-partition (its "+
				"archived_through).", "topic", "partition"),
		backlogFiles: r.Gauge("reckon_batch_compaction_backlog_files",
			"Raw files the compaction workflow would merge now: all files of ended UTC hours with archive files to compact, "+
				"the files of partitions of the current hour holding half of max_open_files.", "topic"),
		backlogHours: r.Gauge("reckon_batch_compaction_backlog_hour_partitions", "UTC hours left to compact.", "topic"),
		zreportKeys: r.Gauge("reckon_batch_zreport_keys",
			"Z-report keys (fiscal drive, shift) known to Temporal's visibility, by status (waiting, matched, mismatched, "+
				"incomplete).", "status"),
		collectErrors: r.Counter("reckon_batch_collect_errors_total",
			"Scrapes whose figures from a source (kafka, lake, temporal) could not be read; those series are absent from that "+
				"scrape.", "source"),
		storageRetries: r.Counter("reckon_lake_storage_retries_total",
			"Lake storage calls retried after a transient failure (docs/adr/0022-lake-fault-injection.md), by operation; a "+
				"series appears with the first retry.", "op"),
		storageGaveUp: r.Counter("reckon_lake_storage_gave_up_total", "Lake storage calls whose retries gave up (the activity attempt failed and Temporal retries it), by operation.", "op"),
		cfg:           cfg, adm: adm, lk: lk, tc: tc, log: log, now: time.Now,
		collectTimeout: 5 * time.Second,
	}
	r.OnScrape(m.collect)
	r.OnScrape(m.storageStats)
	return m
}

// storageStats copies the retry counters of the worker's lake
// ((*lake.Lake).StorageStats: every activity of the process uses it) into
// their families; an operation never retried has no series.
func (m *batchMetrics) storageStats(context.Context) {
	for _, s := range m.lk.StorageStats() {
		if s.Retries > 0 {
			m.storageRetries.With(s.Op).Set(float64(s.Retries))
		}
		if s.GaveUp > 0 {
			m.storageGaveUp.With(s.Op).Set(float64(s.GaveUp))
		}
	}
}

// interceptor feeds every successful activity execution to m.results.
func (m *batchMetrics) interceptor() interceptor.WorkerInterceptor {
	return &observeActivities{m: m.results}
}

type observeActivities struct {
	interceptor.WorkerInterceptorBase
	m *activities.Metrics
}

// InterceptActivity implements interceptor.WorkerInterceptor.
func (o *observeActivities) InterceptActivity(_ context.Context,
	next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &observeActivity{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, m: o.m}
}

type observeActivity struct {
	interceptor.ActivityInboundInterceptorBase
	m *activities.Metrics
}

// ExecuteActivity implements interceptor.ActivityInboundInterceptor.
func (a *observeActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	out, err := a.Next.ExecuteActivity(ctx, in)
	if err == nil && len(in.Args) > 0 {
		a.m.Observe(activity.GetInfo(ctx).WorkflowExecution.ID, in.Args[0], out)
	}
	return out, err
}

// collect sets the scrape-time figures. A source that cannot be read
// leaves its series absent, not stale, and counts an error.
func (m *batchMetrics) collect(ctx context.Context) {
	for _, c := range []struct {
		source string
		fn     func(context.Context) error
		vecs   []*metrics.Vec
	}{
		{"kafka", m.archiveLags, []*metrics.Vec{m.archiveLag, m.archiveLagSeconds}},
		{"lake", m.compactionBacklog, []*metrics.Vec{m.backlogFiles, m.backlogHours}},
		{"temporal", m.zreportStatuses, []*metrics.Vec{m.zreportKeys}},
	} {
		cctx, cancel := context.WithTimeout(ctx, m.collectTimeout)
		err := c.fn(cctx)
		cancel()
		if err != nil {
			for _, v := range c.vecs {
				v.Reset()
			}
			m.collectErrors.With(c.source).Add(1)
			if ctx.Err() == nil {
				m.log.Warn("metrics: cannot read figures", "source", c.source, "err", err)
			}
		}
	}
}

// archiveLags sets the archive lag of every partition of the raw topics.
func (m *batchMetrics) archiveLags(ctx context.Context) error {
	topics := rawTopics(m.cfg)
	ends, err := m.adm.ListCommittedOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("last stable offsets: %w", err)
	}
	now := m.now()
	type tp struct {
		topic string
		part  int32
	}
	lags, secs := map[tp]float64{}, map[tp]float64{}
	for _, t := range topics {
		ps, err := m.lk.TopicProgress(ctx, t)
		if err != nil {
			return err
		}
		done := map[int32]lake.Progress{}
		for _, p := range ps {
			done[p.Partition] = p
		}
		for _, e := range ends[t] {
			p, ok := done[e.Partition]
			lags[tp{t, e.Partition}] = float64(max(e.Offset-p.NextOffset, 0))
			if ok && !p.ArchivedThrough.IsZero() {
				secs[tp{t, e.Partition}] = max(now.Sub(p.ArchivedThrough), 0).Seconds()
			}
		}
	}
	m.archiveLag.Reset()
	m.archiveLagSeconds.Reset()
	for k, v := range lags {
		m.archiveLag.With(k.topic, strconv.Itoa(int(k.part))).Set(v)
	}
	for k, v := range secs {
		m.archiveLagSeconds.With(k.topic, strconv.Itoa(int(k.part))).Set(v)
	}
	return nil
}

// compactionBacklog sets the files and hours awaiting compaction per raw
// topic with a table in the lake.
func (m *batchMetrics) compactionBacklog(ctx context.Context) error {
	now := m.now()
	cc := m.cfg.Lake.Compaction
	var errs []error
	for _, t := range rawTopics(m.cfg) {
		b, err := m.lk.CompactionBacklog(ctx, t, now,
			lake.CompactOptions{MaxOpenFiles: cc.MaxOpenFiles, LateDelay: cc.LateDelay})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m.backlogFiles.With(t).Set(float64(b.Files))
		m.backlogHours.With(t).Set(float64(b.Hours))
	}
	return errors.Join(errs...)
}

// zreportStatuses counts the Z-report entity workflows by status.
func (m *batchMetrics) zreportStatuses(ctx context.Context) error {
	for _, s := range []zreport.Status{zreport.StatusWaiting, zreport.StatusMatched, zreport.StatusMismatched,
		zreport.StatusIncomplete} {
		q, err := zreportListQuery(string(s), "", "")
		if err != nil {
			return err
		}
		resp, err := m.tc.CountWorkflow(ctx,
			&workflowservice.CountWorkflowExecutionsRequest{Namespace: m.cfg.Temporal.Namespace, Query: q})
		if err != nil {
			return fmt.Errorf("count %s z-reports: %w", s, err)
		}
		m.zreportKeys.With(string(s)).Set(float64(resp.GetCount()))
	}
	return nil
}
