package workers

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"reckon/internal/event"
	"reckon/lake"
)

// checkCuratedAgrees waits (bounded) until the lake's curated windows and
// corrections tables of stream agree with every pane committed on the
// summaries topic (the observer has caught up with it): per window its
// latest version (highest version, then emitted_at) with the status of its
// definition (docs/lake.md: corrected, final when the truth table holds a
// row, provisional), and per correction the version it replaced. The
// tables are kept by the PaneArchive and Recompute workflows' curation
// steps running in the stack.
func checkCuratedAgrees(t *testing.T, ctx context.Context, lk *lake.Lake, obs *paneObserver, stream string) {
	t.Helper()
	obs.catchUp(t, ctx)
	byWin := map[string][]event.Pane{}
	var days []time.Time
	for _, p := range obs.snapshot() {
		if p.pane.Stream != stream {
			continue
		}
		k := p.pane.Key + "|" + p.pane.WindowStart.UTC().Format(time.RFC3339)
		byWin[k] = append(byWin[k], p.pane)
		if d := p.pane.WindowStart.UTC().Truncate(24 * time.Hour); !slices.ContainsFunc(days, d.Equal) {
			days = append(days, d)
		}
	}
	if len(byWin) == 0 {
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
		checked := map[string]bool{}
		for _, r := range truth {
			checked[r.Key+"|"+r.WindowStart.UTC().Format(time.RFC3339)] = true
		}
		ws, err := lk.ReadWindows(ctx, stream, from, to)
		if err != nil {
			return false, err.Error()
		}
		cs, err := lk.ReadCorrections(ctx, stream, from, to)
		if err != nil {
			return false, err.Error()
		}
		got := map[string]lake.WindowRow{}
		for _, w := range ws {
			got[w.Key+"|"+time.UnixMicro(w.WindowStart).UTC().Format(time.RFC3339)] = w
		}
		gotC := map[string]lake.CorrectionRow{}
		for _, c := range cs {
			gotC[fmt.Sprintf("%s|%s|v%d", c.Key, time.UnixMicro(c.WindowStart).UTC().Format(time.RFC3339), c.Version)] = c
		}
		wantC := 0
		for k, vs := range byWin {
			slices.SortFunc(vs, func(a, b event.Pane) int {
				if a.Version != b.Version {
					return int(a.Version - b.Version)
				}
				return a.EmittedAt.Compare(b.EmittedAt)
			})
			l := vs[len(vs)-1]
			status := lake.StatusProvisional
			switch {
			case l.ComputedBy == event.ComputedByBatch:
				status = lake.StatusCorrected
			case checked[k]:
				status = lake.StatusFinal
			}
			w, ok := got[k]
			if !ok {
				return false, k + ": no row in the windows table"
			}
			if w.Version != l.Version || w.Count != l.Count || w.Sum != l.Sum || w.Min != l.Min || w.Max != l.Max || w.ComputedBy != l.ComputedBy ||
				w.Reason != l.Reason || w.UpdatedAt != l.EmittedAt.UnixMicro() || w.Status != status {
				return false, fmt.Sprintf("%s: windows table v%d %d/%g %s %s, topic v%d %d/%g %s %s", k, w.Version, w.Count, w.Sum, w.ComputedBy, w.Status,
					l.Version, l.Count, l.Sum, l.ComputedBy, status)
			}
			for i, c := range vs {
				if c.ComputedBy != event.ComputedByBatch {
					continue
				}
				wantC++
				ck := fmt.Sprintf("%s|v%d", k, c.Version)
				g, ok := gotC[ck]
				if !ok {
					return false, ck + ": no row in the corrections table"
				}
				if g.Count != c.Count || g.Sum != c.Sum || g.Reason != c.Reason || (i == 0) != (g.PrevVersion == nil) ||
					i > 0 && (*g.PrevVersion != vs[i-1].Version || *g.PrevCount != vs[i-1].Count || *g.PrevSum != vs[i-1].Sum) {
					return false, fmt.Sprintf("%s: corrections table %+v, topic %+v", ck, g, c)
				}
			}
		}
		if len(got) != len(byWin) || len(gotC) != wantC {
			return false, fmt.Sprintf("windows table %d rows, topic %d windows; corrections table %d rows, topic %d corrections", len(got), len(byWin), len(gotC), wantC)
		}
		windows, corrections = len(got), len(gotC)
		return true, ""
	})
	t.Logf("curated tables agree with the summaries topic: %d windows, %d corrections of %s", windows, corrections, stream)
}
