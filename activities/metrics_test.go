package activities_test

import (
	"strings"
	"testing"
	"time"

	"reckon/activities"
	"reckon/internal/metrics"
)

func scrape(t *testing.T, r *metrics.Registry) string {
	t.Helper()
	r.Collect(t.Context())
	var b strings.Builder
	r.WriteText(&b)
	return b.String()
}

func TestMetricsFromResults(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	r := metrics.NewRegistry()
	m := activities.NewMetrics(r, time.Minute)
	m.Now = func() time.Time { return now }

	hin := activities.HorizonInput{Stream: "payments", To: now.Add(-time.Hour)}
	waiting := activities.HorizonResult{Waiting: "a\nb\nc", Causes: []string{activities.HorizonArchive, activities.HorizonWatermark, activities.HorizonArchive}}
	m.Observe("reconcile/2026-12-01/payments", hin, waiting)
	m.Observe("correct/payments/1", hin, activities.HorizonResult{Waiting: "x", Causes: []string{activities.HorizonArchive}})
	m.Observe("ignored", "not an input", waiting)
	out := scrape(t, r)
	for _, line := range []string{
		`reckon_batch_horizon_checks_total{stream="payments",result="waiting"} 2`,
		`reckon_batch_horizon_waiting{stream="payments",cause="archive_behind"} 2`,
		`reckon_batch_horizon_waiting{stream="payments",cause="watermark_behind"} 1`,
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("no %s in\n%s", line, out)
		}
	}

	// Ready ends one wait; the other stops checking and expires.
	m.Observe("reconcile/2026-12-01/payments", hin, activities.HorizonResult{Ready: true})
	out = scrape(t, r)
	for _, line := range []string{
		`reckon_batch_horizon_checks_total{stream="payments",result="final"} 1`,
		`reckon_batch_horizon_waiting{stream="payments",cause="archive_behind"} 1`,
		`reckon_batch_horizon_waiting{stream="payments",cause="watermark_behind"} 0`,
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("after ready: no %s in\n%s", line, out)
		}
	}
	now = now.Add(2 * time.Minute)
	if out = scrape(t, r); !strings.Contains(out, `reckon_batch_horizon_waiting{stream="payments",cause="archive_behind"} 0`+"\n") {
		t.Errorf("a wait that stopped checking did not expire:\n%s", out)
	}

	// Recomputes: counted by trigger; only publishing ones settle truth.
	rin := activities.RecomputeInput{Stream: "payments", From: now.Add(-2 * time.Hour), To: now.Add(-time.Hour), Trigger: activities.TriggerReconcile}
	res := activities.RecomputeResult{Report: activities.TruthReport{Windows: 10, Corrected: 3, Reasons: activities.ReasonCounts{Duplicates: 2, BeyondLateness: 1, Missing: 1}}}
	m.Observe("reconcile/2026-12-01/payments", rin, res)
	dry := rin
	dry.DryRun, dry.Trigger = true, activities.TriggerReplay
	m.Observe("replay/x/payments", dry, res)
	out = scrape(t, r)
	for _, line := range []string{
		`reckon_batch_recomputes_total{stream="payments",trigger="reconcile",dry_run="false"} 1`,
		`reckon_batch_recomputes_total{stream="payments",trigger="replay",dry_run="true"} 1`,
		`reckon_batch_windows_checked_total{stream="payments",trigger="reconcile"} 10`,
		`reckon_batch_corrections_total{stream="payments",trigger="reconcile"} 3`,
		`reckon_batch_correction_reasons_total{stream="payments",trigger="reconcile",reason="duplicates"} 2`,
		`reckon_batch_correction_reasons_total{stream="payments",trigger="reconcile",reason="missing"} 1`,
		`reckon_batch_time_to_truth_seconds_bucket{stream="payments",trigger="reconcile",le="1800"} 0`,
		`reckon_batch_time_to_truth_seconds_bucket{stream="payments",trigger="reconcile",le="3600"} 1`,
		`reckon_batch_time_to_truth_seconds_count{stream="payments",trigger="reconcile"} 1`,
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("no %s in\n%s", line, out)
		}
	}
	for _, absent := range []string{`reason="other"`, `reason="retracted"`, `trigger="replay"} `, `reckon_batch_corrections_total{stream="payments",trigger="replay"}`,
		`reckon_batch_features_checked_total{`} {
		if strings.Contains(out, absent) {
			t.Errorf("%s: a series for what did not happen:\n%s", absent, out)
		}
	}

	// Features: checked by status, errors summed, the latest maximum.
	for _, f := range []activities.FeatureReport{
		{Checked: 14, Exact: 11, Differs: 2, NotServed: 1, CountErrMax: 1, SumErrMax: 350_000, CountErrTotal: 2, SumErrTotal: 500_000},
		{Checked: 3, Exact: 2, Differs: 1, CountErrMax: 2, SumErrMax: 7, CountErrTotal: 2, SumErrTotal: 7},
	} {
		fres := res
		fres.Report.Features = &f
		m.Observe("finalize/payments", activities.RecomputeInput{Stream: "payments", From: rin.From, To: rin.To,
			Trigger: activities.TriggerFinalize}, fres)
	}
	out = scrape(t, r)
	for _, line := range []string{
		`reckon_batch_features_checked_total{stream="payments",trigger="finalize",status="exact"} 13`,
		`reckon_batch_features_checked_total{stream="payments",trigger="finalize",status="differs"} 3`,
		`reckon_batch_features_checked_total{stream="payments",trigger="finalize",status="not_served"} 1`,
		`reckon_batch_feature_abs_error_total{stream="payments",trigger="finalize",figure="count"} 4`,
		`reckon_batch_feature_abs_error_total{stream="payments",trigger="finalize",figure="sum"} 500007`,
		`reckon_batch_feature_abs_error_max{stream="payments",figure="count"} 2`,
		`reckon_batch_feature_abs_error_max{stream="payments",figure="sum"} 7`,
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("no %s in\n%s", line, out)
		}
	}
}
