package activities

import (
	"context"
	"slices"
	"sync"
	"time"

	"reckon/internal/metrics"
)

// Metrics are the batch worker's figures read from activity results: the
// horizon's checks and what keeps recomputes waiting, recomputes and
// corrections by trigger and reason, and the time to truth. The worker
// feeds it every successful activity execution (Observe, from a worker
// interceptor), so the activities themselves carry no metrics code. What
// each figure means and when to alert: deploy/README.md "What to alert on".
// Series appear with the first result that has them, so no series stands
// for something a stream's configuration cannot produce. Safe for
// concurrent use.
type Metrics struct {
	// Now is the clock; default time.Now.
	Now func() time.Time

	horizonChecks, horizonWaiting              *metrics.Vec
	recomputes, checked, corrections, reasons  *metrics.Vec
	featuresChecked, featureErr, featureErrMax *metrics.Vec
	timeToTruth, timeToFinal                   *metrics.HistVec
	stale                                      time.Duration

	mu      sync.Mutex // protects waiting
	waiting map[string]horizonWait
}

// horizonWait is the latest waiting horizon check of one recompute.
type horizonWait struct {
	stream string
	causes []string // distinct
	at     time.Time
}

// timeToTruthBounds are the time-to-truth buckets, in seconds: from a
// targeted correction's seconds to a replay's days.
var timeToTruthBounds = []float64{10, 30, 60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 24 * 3600, 48 * 3600, 7 * 24 * 3600}

// timeToFinalBounds are the time-to-final buckets, in seconds: the goal
// (docs/adr/0015) is 30 s at p99.
var timeToFinalBounds = []float64{1, 2, 5, 10, 15, 20, 30, 45, 60, 120, 300, 900, 3600}

// NewMetrics registers the families on r. A recompute whose last horizon
// check waited counts as waiting until a check says ready or, when it
// stopped checking (it timed out, failed or was cancelled), for stale
// after that check: more than the longest horizon poll.
func NewMetrics(r *metrics.Registry, stale time.Duration) *Metrics {
	m := &Metrics{
		horizonChecks:  r.Counter("reckon_batch_horizon_checks_total", "Horizon checks of recomputes, by result (final: the windows may be recomputed; waiting).", "stream", "result"),
		horizonWaiting: r.Gauge("reckon_batch_horizon_waiting", "Recomputes whose latest horizon check waits, by cause (no_progress, no_watermark, watermark_behind, archive_behind); one waiting for two causes counts under both.", "stream", "cause"),
		recomputes:     r.Counter("reckon_batch_recomputes_total", "Recomputes finished, by trigger (reconcile, replay, correction, manual, finalize) and dry run.", "stream", "trigger", "dry_run"),
		checked:        r.Counter("reckon_batch_windows_checked_total", "Windows compared with the truth by recomputes that publish (not dry runs), by trigger.", "stream", "trigger"),
		corrections:    r.Counter("reckon_batch_corrections_total", "Correction panes published, by trigger.", "stream", "trigger"),
		reasons:        r.Counter("reckon_batch_correction_reasons_total", "Why published corrections differed from the stream (beyond_lateness, duplicates, missing, retracted, other); a correction with two reasons counts under both.", "stream", "trigger", "reason"),
		timeToTruth:    r.Histogram("reckon_batch_time_to_truth_seconds", "Seconds from the end of the last window a publishing recompute covers to when it finished: how long after a window closed its figure was checked against the lake and, if wrong, corrected.", timeToTruthBounds, "stream", "trigger"),
		featuresChecked: r.Counter("reckon_batch_features_checked_total",
			"Events whose served rolling feature publishing recomputes compared with its truth, by trigger and status "+
				"(exact, differs, not_served: the stream served none).", "stream", "trigger", "status"),
		featureErr: r.Counter("reckon_batch_feature_abs_error_total",
			"Sum of the absolute errors of served rolling features against their truth, by trigger and figure (count, sum); "+
				"divided by the exact and differs checks, the mean error.", "stream", "trigger", "figure"),
		featureErrMax: r.Gauge("reckon_batch_feature_abs_error_max",
			"Largest absolute error of a served rolling feature found by the latest publishing recompute, "+
				"by figure (count, sum).",
			"stream", "figure"),
		timeToFinal: r.Histogram("reckon_batch_time_to_final_seconds",
			"Seconds from when the stream's progress passed a recompute's range (every partition purged through its end) "+
				"to when the recompute had settled the range's truth in the lake; observed by recomputes that waited for it.",
			timeToFinalBounds, "stream", "trigger"),
		stale:   stale,
		waiting: map[string]horizonWait{},
	}
	r.OnScrape(func(context.Context) { m.setWaiting() })
	return m
}

func (m *Metrics) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Observe records one successful activity execution of workflow
// workflowID: its first argument and its result. Results of other
// activities are ignored.
func (m *Metrics) Observe(workflowID string, arg, result any) {
	switch res := result.(type) {
	case HorizonResult:
		in, ok := arg.(HorizonInput)
		if !ok {
			return
		}
		m.horizon(workflowID, in, res)
	case RecomputeResult:
		in, ok := arg.(RecomputeInput)
		if !ok {
			return
		}
		m.recompute(in, res)
	}
}

func (m *Metrics) horizon(workflowID string, in HorizonInput, res HorizonResult) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if res.Ready {
		m.horizonChecks.With(in.Stream, "final").Add(1)
		delete(m.waiting, workflowID)
		return
	}
	m.horizonChecks.With(in.Stream, "waiting").Add(1)
	causes := slices.Clone(res.Causes)
	slices.Sort(causes)
	causes = slices.Compact(causes)
	for _, c := range causes {
		m.horizonWaiting.With(in.Stream, c) // the series exists from the first wait; the scrape sets it
	}
	m.waiting[workflowID] = horizonWait{stream: in.Stream, causes: causes, at: m.now()}
}

// setWaiting sets the waiting gauge from the recomputes' latest checks.
func (m *Metrics) setWaiting() {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	counts := map[[2]string]int{}
	for id, w := range m.waiting {
		if now.Sub(w.at) > m.stale {
			delete(m.waiting, id)
			continue
		}
		for _, c := range w.causes {
			counts[[2]string{w.stream, c}]++
		}
	}
	// A series once seen stays, at 0 when nothing waits for its cause.
	m.horizonWaiting.Each(func(v *metrics.Value, labels []string) {
		v.Set(float64(counts[[2]string{labels[0], labels[1]}]))
	})
	for k, n := range counts {
		m.horizonWaiting.With(k[0], k[1]).Set(float64(n))
	}
}

func (m *Metrics) recompute(in RecomputeInput, res RecomputeResult) {
	trigger := in.Trigger
	if trigger == "" {
		trigger = TriggerManual
	}
	dry := "false"
	if in.DryRun {
		dry = "true"
	}
	m.recomputes.With(in.Stream, trigger, dry).Add(1)
	if in.DryRun {
		return // nothing was published: no truth was settled
	}
	r := res.Report
	m.checked.With(in.Stream, trigger).Add(float64(r.Windows))
	m.corrections.With(in.Stream, trigger).Add(float64(r.Corrected))
	for _, rc := range []struct {
		reason string
		n      int64
	}{
		{"beyond_lateness", r.Reasons.BeyondLateness}, {"duplicates", r.Reasons.Duplicates},
		{"missing", r.Reasons.Missing}, {"retracted", r.Reasons.Retracted}, {"other", r.Reasons.Other},
	} {
		if rc.n > 0 {
			m.reasons.With(in.Stream, trigger, rc.reason).Add(float64(rc.n))
		}
	}
	if f := r.Features; f != nil {
		for _, st := range []struct {
			status string
			n      int64
		}{{"exact", f.Exact}, {"differs", f.Differs}, {"not_served", f.NotServed}} {
			m.featuresChecked.With(in.Stream, trigger, st.status).Add(float64(st.n))
		}
		m.featureErr.With(in.Stream, trigger, "count").Add(f.CountErrTotal)
		m.featureErr.With(in.Stream, trigger, "sum").Add(f.SumErrTotal)
		m.featureErrMax.With(in.Stream, "count").Set(f.CountErrMax)
		m.featureErrMax.With(in.Stream, "sum").Set(f.SumErrMax)
	}
	m.timeToTruth.With(in.Stream, trigger).Observe(max(m.now().Sub(in.To), 0).Seconds())
	if !in.HorizonPassedAt.IsZero() {
		m.timeToFinal.With(in.Stream, trigger).Observe(max(m.now().Sub(in.HorizonPassedAt), 0).Seconds())
	}
}
