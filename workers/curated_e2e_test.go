package workers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"reckon/internal/event"
	"reckon/lake"
	"reckon/verify/curatedcheck"
)

// checkCuratedAgrees waits (bounded) until the lake's curated windows and
// corrections tables of stream agree with every pane committed on the
// summaries topic (the observer has caught up with it) and the truth table,
// as their definitions say (curatedcheck: per window its latest version
// with its status, per correction the version it replaced). The tables are
// kept by the PaneArchive and Recompute workflows' curation steps running
// in the stack. Only keys keep accepts are compared (traffic still flowing
// on other keys is not yet settled).
func checkCuratedAgrees(t *testing.T, ctx context.Context, lk *lake.Lake, obs *paneObserver, stream string,
	keep func(key string) bool) {
	t.Helper()
	obs.catchUp(t, ctx)
	var published []event.Pane
	var days []time.Time
	for _, p := range obs.snapshot() {
		if p.pane.Stream != stream || !keep(p.pane.Key) {
			continue
		}
		published = append(published, p.pane)
		if d := p.pane.WindowStart.UTC().Truncate(24 * time.Hour); !slices.ContainsFunc(days, d.Equal) {
			days = append(days, d)
		}
	}
	if len(published) == 0 {
		t.Fatalf("no %s panes on the summaries topic", stream)
	}
	slices.SortFunc(days, time.Time.Compare)
	from, to := days[0], days[len(days)-1].Add(24*time.Hour)
	var windows, corrections int
	waitFor(t, time.Minute, "the curated tables to agree with the summaries topic", func() (bool, string) {
		truth, err := lk.ReadTruth(ctx, stream, from, to)
		if err != nil {
			return false, err.Error()
		}
		ws, err := lk.ReadWindows(ctx, stream, from, to)
		if err != nil {
			return false, err.Error()
		}
		cs, err := lk.ReadCorrections(ctx, stream, from, to)
		if err != nil {
			return false, err.Error()
		}
		truth = slices.DeleteFunc(truth, func(p event.Pane) bool { return !keep(p.Key) })
		ws = slices.DeleteFunc(ws, func(w lake.WindowRow) bool { return !keep(w.Key) })
		cs = slices.DeleteFunc(cs, func(c lake.CorrectionRow) bool { return !keep(c.Key) })
		if d := curatedcheck.Diff(ws, cs, published, truth); len(d) > 0 {
			return false, fmt.Sprintf("%d differences, the first: %s", len(d), strings.Join(d[:min(len(d), 5)], "; "))
		}
		windows, corrections = len(ws), len(cs)
		return true, ""
	})
	t.Logf("curated tables agree with the summaries topic: %d windows, %d corrections of %s", windows, corrections, stream)
}
