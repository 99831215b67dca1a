package workers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"reckon/activities"
	"reckon/internal/event"
	"reckon/lake"
)

// TestFinalUnderSteadyTraffic is the lambda's promise under live traffic
// (issue 24, docs/adr/0034-finalizer.md), on the real Temporal dev server,
// kfake, the stream worker as a process of its own and `reckon batch` with
// the default finalizer: clean payments flow at a steady rate throughout;
// the finalizer makes windows final as their horizon passes (time to
// final from the batch's histogram); `reckon reconcile --date <today>
// --wait` completes while the traffic flows, within a bound of the
// horizon; then every window up to where it checked is final or corrected
// in the curated windows table, and no (key, window) has a version
// published twice.
//
//	go test ./workers -run TestFinalUnderSteadyTraffic -v -args -e2e
func TestFinalUnderSteadyTraffic(t *testing.T) {
	if !*e2e {
		t.Skip("run with -e2e")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	st := finalizeStack(t, ctx)
	const rate = 200
	st.streamProcess(t)
	url := st.batchProcess(t, ctx)
	stopTraffic := st.backgroundTraffic(t, ctx, rate)
	began := time.Now()
	pay, _ := st.cfg.StreamByName("payments")

	// The finalizer alone: windows become final while the traffic flows.
	fin := fmt.Sprintf(`{stream="payments",trigger=%q}`, activities.TriggerFinalize)
	var m map[string]float64
	waitFor(t, 3*time.Minute, "the finalizer to make 8 steps of windows final", func() (bool, string) {
		m = scrapeMetrics(t, ctx, url)
		n := m["reckon_batch_time_to_final_seconds_count"+fin]
		return n >= 8, fmt.Sprintf("time to final observed %v times; %s", n, seriesOf(m, "reckon_batch_recomputes"))
	})
	// Dirty traffic beside it (duplicates the stream's short dedup
	// memory counts twice, late and too-late events, poison): the
	// finalizer alone, with the targeted corrections, brings every one of
	// its windows to the truth — before any reconciliation.
	tr := st.liveTraffic(t, ctx, 7, 600, 60)
	var lastEnd time.Time
	for _, w := range tr.man.Truth {
		if we, err := time.Parse(time.RFC3339Nano, w.WindowEnd); err == nil && we.After(lastEnd) {
			lastEnd = we
		}
	}
	st.waitPurgedThrough(t, ctx, "payments", lastEnd)
	waitFor(t, 3*time.Minute, "every window of the dirty traffic at its truth without a reconciliation", func() (bool, string) {
		st.obs.catchUp(t, ctx)
		highest := map[string]event.Pane{}
		for _, p := range st.obs.snapshot() {
			k := p.pane.Key + "|" + p.pane.WindowStart.UTC().Format(time.RFC3339)
			if p.pane.Stream == "payments" && p.pane.Version > highest[k].Version {
				highest[k] = p.pane
			}
		}
		var wrong []string
		for _, w := range tr.man.Truth {
			ws, _ := time.Parse(time.RFC3339Nano, w.WindowStart)
			k := w.Key + "|" + ws.UTC().Format(time.RFC3339)
			if p := highest[k]; p.Count != w.Count || p.Sum != w.Sum || p.Min != w.Min || p.Max != w.Max {
				wrong = append(wrong, fmt.Sprintf("%s: v%d %d/%g (%s), truth %d/%g", k, p.Version, p.Count, p.Sum,
					p.ComputedBy, w.Count, w.Sum))
			}
		}
		return len(wrong) == 0, fmt.Sprintf("%d of %d windows off the truth, e.g. %v; %s", len(wrong), len(tr.man.Truth),
			wrong[:min(len(wrong), 3)], st.finalizeStatus(ctx, "payments"))
	})
	m = scrapeMetrics(t, ctx, url)
	t.Logf("the dirty traffic's %d windows are at their truth; corrections by the finalizer %v, by targeted corrections %v",
		len(tr.man.Truth), m[`reckon_batch_corrections_total{stream="payments",trigger="finalize"}`],
		m[`reckon_batch_corrections_total{stream="payments",trigger="correction"}`])
	if m[`reckon_batch_corrections_total{stream="payments",trigger="finalize"}`] == 0 {
		t.Errorf("the finalizer published no correction, yet the stream counted redeliveries twice")
	}
	p50, p99 := histogramQuantile(m, "reckon_batch_time_to_final_seconds", fin, 0.5),
		histogramQuantile(m, "reckon_batch_time_to_final_seconds", fin, 0.99)
	t.Logf("time to final under %d events/s (finalizer, every %v, horizon poll %v): n=%v p50≤%vs p99≤%vs (histogram bucket bounds)",
		rate, st.cfg.Batch.FinalizeEvery, st.cfg.Batch.HorizonPoll, m["reckon_batch_time_to_final_seconds_count"+fin], p50, p99)

	// A reconciliation of today completes while the traffic flows.
	day := time.Now().UTC().Format(time.DateOnly)
	args := []string{"reconcile", "--date", day, "--wait"}
	for _, s := range st.sets {
		args = append(args, "--set", s)
	}
	asked := time.Now()
	var out, errOut bytes.Buffer
	rctx, rcancel := context.WithTimeout(ctx, 2*time.Minute) // bound: a few archive steps and horizon polls
	code := Main(rctx, args, nil, &out, &errOut, nil)
	rcancel()
	took := time.Since(asked)
	if code != 0 {
		t.Fatalf("reckon reconcile --date %s --wait under traffic: exit %d after %v: %s\n%s", day, code, took, errOut.String(), out.String())
	}
	b, err := st.lk.ReadReport(ctx, "reconcile", day)
	var rep activities.Report
	if err == nil {
		err = json.Unmarshal(b, &rep)
	}
	if err != nil {
		t.Fatal(err)
	}
	var checkedTo time.Time
	for _, p := range rep.Parts {
		if p.Stream == "payments" {
			checkedTo = p.To
		}
	}
	t.Logf("reconcile of today under traffic took %v; checked payments up to %s (%v behind the clock); %d windows, "+
		"%d corrected (the finalizer had left them), %d already corrected",
		took.Round(10*time.Millisecond), checkedTo.Format(time.TimeOnly), time.Since(checkedTo).Round(time.Second),
		rep.Total.Windows, rep.Total.Corrected, rep.Total.AlreadyCorrected)
	if !strings.Contains(out.String(), "payments: checked windows up to") || checkedTo.Before(began) {
		t.Errorf("the reconcile of today checked payments up to %s, before the traffic began at %s:\n%s",
			checkedTo.Format(time.TimeOnly), began.Format(time.TimeOnly), out.String())
	}
	sent := stopTraffic()

	// Every window up to where the reconcile checked is final or
	// corrected in the curated table.
	waitFor(t, time.Minute, "the curated windows up to the checked end to be final or corrected", func() (bool, string) {
		rows, err := st.lk.ReadWindows(ctx, pay.Name, checkedTo.Truncate(24*time.Hour), checkedTo)
		if err != nil {
			return false, err.Error()
		}
		byStatus := map[string]int{}
		var open []string
		for _, r := range rows {
			byStatus[r.Status]++
			if r.Status != lake.StatusFinal && r.Status != lake.StatusCorrected {
				open = append(open, fmt.Sprintf("%s@%s", r.Key, time.UnixMicro(r.WindowStart).UTC().Format(time.TimeOnly)))
			}
		}
		return len(rows) > 0 && len(open) == 0, fmt.Sprintf("%d windows %v; not final: %v", len(rows), byStatus, open[:min(len(open), 5)])
	})
	// No version published twice for a window.
	versions := map[string]map[int64]string{}
	for _, p := range st.obs.snapshot() {
		k := p.pane.Key + "|" + p.pane.WindowStart.UTC().Format(time.RFC3339)
		if versions[k] == nil {
			versions[k] = map[int64]string{}
		}
		if by, dup := versions[k][p.pane.Version]; dup && by != paneWho(p.pane) {
			t.Errorf("%s: version %d published twice (%s, then %s)", k, p.pane.Version, by, paneWho(p.pane))
		}
		versions[k][p.pane.Version] = paneWho(p.pane)
	}
	t.Logf("%d events at %d/s; %d windows seen on the summaries topic", sent, rate, len(versions))
}

func paneWho(p event.Pane) string { return p.ComputedBy + " " + string(p.Timing) }

// histogramQuantile is the upper bound of the bucket holding quantile q of
// histogram name{labels} in a scrape (an upper bound of the quantile, as
// Prometheus' histogram_quantile interpolates within it); +Inf if beyond
// the last finite bucket.
func histogramQuantile(m map[string]float64, name, labels string, q float64) float64 {
	total := m[name+"_count"+labels]
	inner := strings.TrimSuffix(strings.TrimPrefix(labels, "{"), "}")
	type bucket struct{ le, n float64 }
	var bs []bucket
	for k, v := range m {
		rest, ok := strings.CutPrefix(k, name+"_bucket{"+inner+`,le="`)
		if !ok {
			continue
		}
		le, err := strconv.ParseFloat(strings.TrimSuffix(rest, `"}`), 64)
		if err != nil {
			le = math.Inf(1)
		}
		bs = append(bs, bucket{le, v})
	}
	slices.SortFunc(bs, func(a, b bucket) int {
		switch {
		case a.le < b.le:
			return -1
		case a.le > b.le:
			return 1
		}
		return 0
	})
	for _, b := range bs {
		if b.n >= q*total {
			return b.le
		}
	}
	return math.Inf(1)
}
