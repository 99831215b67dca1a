package streaming

import (
	"strconv"
	"time"

	"reckon/internal/event"
	"reckon/internal/metrics"
	"reckon/streaming/operator"
)

// workerMetrics are the figures operators alert on (deploy/README.md):
// consumer lag, watermark lag, DLQ growth, late rate.
type workerMetrics struct {
	records, accepted, duplicates, late, featureLate         *metrics.Vec
	deadLetters, unroutedRecs, panes, committedRecs, commits *metrics.Vec
	watermark, watermarkLag, consumerLag, dedup, win         *metrics.Vec
	checkpoints, produceFailures, progress, purgedThrough    *metrics.Vec
	sessionsLost                                             *metrics.Vec
}

func newWorkerMetrics(r *metrics.Registry) *workerMetrics {
	if r == nil {
		r = metrics.NewRegistry()
	}
	return &workerMetrics{
		records:  r.Counter("reckon_stream_records_total", "Valid records offered to a stream's operator.", "stream"),
		accepted: r.Counter("reckon_stream_accepted_total", "Records applied to windows and/or features.", "stream"),
		duplicates: r.Counter("reckon_stream_duplicates_total",
			"Records dropped as repeated event_id (counted, not applied).", "stream"),
		late: r.Counter("reckon_stream_late_total", "Records sent to the late side output.", "stream"),
		featureLate: r.Counter("reckon_stream_feature_late_total",
			"Records counted in a window but too late for rolling features (streams with rolling features only).", "stream"),
		deadLetters: r.Counter("reckon_stream_dead_letters_total", "Records sent to the DLQ, by stage (gate, process).",
			"topic", "stage"),
		unroutedRecs: r.Counter("reckon_stream_unrouted_total",
			"Valid records of a type no stream on the topic aggregates.", "topic"),
		panes: r.Counter("reckon_stream_panes_total", "Panes published, by timing.", "stream", "timing"),
		committedRecs: r.Counter("reckon_stream_output_records_total",
			"Records published in committed transactions (outputs and state)."),
		commits: r.Counter("reckon_stream_transactions_total", "Committed transactions."),
		watermark: r.Gauge("reckon_stream_watermark_seconds", "Partition watermark (Unix seconds).", "stream", "topic",
			"partition"),
		watermarkLag: r.Gauge("reckon_stream_watermark_lag_seconds", "Processing time minus watermark.", "stream", "topic",
			"partition"),
		consumerLag: r.Gauge("reckon_stream_consumer_lag_records", "High watermark minus next offset.", "topic",
			"partition"),
		dedup: r.Gauge("reckon_stream_dedup_entries", "Event ids remembered for dedup.", "stream", "topic",
			"partition"),
		win: r.Gauge("reckon_stream_windows", "Window states held.", "stream", "topic", "partition"),
		produceFailures: r.Counter("reckon_stream_produce_failures_total",
			"Output records the broker refused (their transaction is aborted and retried; alert on any)."),
		progress: r.Gauge("reckon_stream_progress_published_seconds",
			"When the partition's progress record was last committed (Unix seconds; time() minus it is the seconds since the "+
				"last progress).", "stream", "topic", "partition"),
		purgedThrough: r.Gauge("reckon_stream_purged_through_seconds", "Watermark minus allowed lateness: windows ending at or before it are final for the stream (Unix seconds).", "stream", "topic", "partition"),
		checkpoints: r.Counter("reckon_stream_checkpoints_total",
			"Full operator-state checkpoints written (replay log in between).", "topic"),
		sessionsLost: r.Counter("reckon_stream_sessions_lost_total",
			"Transaction sessions lost (broker unreachable or failing): "+
				"the worker waited for the broker and restored its partitions."),
	}
}

// verdict counts one record's verdict for stream; rolling says whether the
// stream computes rolling features. A stream without them has no feature a
// record could be too late for, so feature-late counts only where rolling
// is set, as the operator's own Stats.FeatureLate does.
func (m *workerMetrics) verdict(stream string, rolling bool, v operator.Verdict) {
	m.records.With(stream).Add(1)
	switch {
	case v.Has(operator.Duplicate):
		m.duplicates.With(stream).Add(1)
	case v.Has(operator.Late):
		m.late.With(stream).Add(1)
	case v.Has(operator.Accepted):
		m.accepted.With(stream).Add(1)
		if rolling && !v.Has(operator.InFeatures) {
			m.featureLate.With(stream).Add(1)
		}
	}
}

func (m *workerMetrics) produceFailed(n int)      { m.produceFailures.With().Add(float64(n)) }
func (m *workerMetrics) sessionLost()             { m.sessionsLost.With().Add(1) }
func (m *workerMetrics) checkpoint(topic string)  { m.checkpoints.With(topic).Add(1) }
func (m *workerMetrics) dead(topic, stage string) { m.deadLetters.With(topic, stage).Add(1) }
func (m *workerMetrics) unrouted(topic string)    { m.unroutedRecs.With(topic).Add(1) }
func (m *workerMetrics) pane(stream string, t event.Timing) {
	m.panes.With(stream, string(t)).Add(1)
}

func (m *workerMetrics) committed(n int) {
	m.commits.With().Add(1)
	m.committedRecs.With().Add(float64(n))
}

func (m *workerMetrics) lag(p *partition, hwm int64) {
	m.consumerLag.With(p.topic, strconv.Itoa(int(p.partition))).Set(float64(max(hwm-p.next, 0)))
}

func (m *workerMetrics) observe(p *partition) {
	part := strconv.Itoa(int(p.partition))
	for _, so := range p.ops {
		if wm, ok := so.op.Watermark(); ok {
			m.watermark.With(so.cfg.Name, p.topic, part).Set(float64(wm.UnixNano()) / float64(time.Second))
			m.watermarkLag.With(so.cfg.Name, p.topic, part).Set(so.op.WatermarkLag().Seconds())
		}
		st := so.op.Stats()
		m.dedup.With(so.cfg.Name, p.topic, part).Set(float64(st.DedupEntries))
		m.win.With(so.cfg.Name, p.topic, part).Set(float64(st.Windows))
	}
}

func (m *workerMetrics) progressPublished(p *partition, at time.Time) {
	part := strconv.Itoa(int(p.partition))
	for _, so := range p.ops {
		m.progress.With(so.cfg.Name, p.topic, part).Set(float64(at.UnixNano()) / float64(time.Second))
		if pt := so.op.Progress().PurgedThrough; !pt.IsZero() {
			m.purgedThrough.With(so.cfg.Name, p.topic, part).Set(float64(pt.UnixNano()) / float64(time.Second))
		}
	}
}

func (m *workerMetrics) forget(p *partition) {
	part := strconv.Itoa(int(p.partition))
	m.consumerLag.Delete(p.topic, part)
	for _, so := range p.ops {
		for _, v := range []*metrics.Vec{m.watermark, m.watermarkLag, m.dedup, m.win, m.progress, m.purgedThrough} {
			v.Delete(so.cfg.Name, p.topic, part)
		}
	}
}
