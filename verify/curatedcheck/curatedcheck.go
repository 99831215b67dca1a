// Package curatedcheck checks the lake's curated windows and corrections
// tables of one stream against their definitions (docs/lake.md,
// docs/adr/0019-curated-tables.md), computed straight from every pane
// version published on the summaries topic and the windows the truth table
// holds a row for:
//
//   - per window, the latest version (highest version, then latest
//     emitted_at) with its status: corrected when a batch correction,
//     final when the truth table holds a row for the window, provisional
//     otherwise; updated_at is its emitted_at;
//   - per batch correction, the correction beside the version it replaced
//     (none for the window's first version).
//
// It is for tests of what keeps the tables (the curation activity, the
// workflows in a running stack); it reads nothing itself.
package curatedcheck

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"reckon/internal/event"
	"reckon/lake"
)

// Tables returns the windows and corrections tables that published (every
// pane version of one stream) and truth (the truth table's rows of that
// stream) define, each sorted by key, window start (then version).
func Tables(published, truth []event.Pane) ([]lake.WindowRow, []lake.CorrectionRow) {
	checked := map[window]bool{}
	for _, p := range truth {
		checked[windowOf(lake.SummaryRowOf(p))] = true
	}
	byWin := map[window][]lake.SummaryRow{}
	for _, p := range published {
		r := lake.SummaryRowOf(p)
		byWin[windowOf(r)] = append(byWin[windowOf(r)], r)
	}
	var ws []lake.WindowRow
	var cs []lake.CorrectionRow
	for k, vs := range byWin {
		slices.SortFunc(vs, func(a, b lake.SummaryRow) int {
			return cmp.Or(cmp.Compare(a.Version, b.Version), cmp.Compare(a.EmittedAt, b.EmittedAt))
		})
		l := vs[len(vs)-1]
		status := lake.StatusProvisional
		switch {
		case l.ComputedBy == event.ComputedByBatch:
			status = lake.StatusCorrected
		case checked[k]:
			status = lake.StatusFinal
		}
		ws = append(ws, lake.WindowRow{SummaryRow: l, Status: status, UpdatedAt: l.EmittedAt})
		for i, v := range vs {
			if v.ComputedBy != event.ComputedByBatch {
				continue
			}
			c := lake.CorrectionRow{Stream: v.Stream, Key: v.Key, WindowStart: v.WindowStart, WindowEnd: v.WindowEnd, Version: v.Version,
				Reason: v.Reason, EmittedAt: v.EmittedAt, Count: v.Count, Sum: v.Sum, Min: v.Min, Max: v.Max}
			if i > 0 {
				p := vs[i-1]
				c.PrevVersion, c.PrevCount, c.PrevSum, c.PrevMin, c.PrevMax = &p.Version, &p.Count, &p.Sum, &p.Min, &p.Max
				c.PrevComputedBy, c.PrevEmittedAt = &p.ComputedBy, &p.EmittedAt
			}
			cs = append(cs, c)
		}
	}
	slices.SortFunc(ws, func(a, b lake.WindowRow) int { return compareWindows(windowOf(a.SummaryRow), windowOf(b.SummaryRow)) })
	slices.SortFunc(cs, func(a, b lake.CorrectionRow) int {
		return cmp.Or(compareWindows(window{a.Key, a.WindowStart}, window{b.Key, b.WindowStart}), cmp.Compare(a.Version, b.Version))
	})
	return ws, cs
}

// Diff compares windows and corrections, as read from the lake (in any
// order), with the tables published and truth define (Tables): one line per
// difference, none when they agree.
func Diff(windows []lake.WindowRow, corrections []lake.CorrectionRow, published, truth []event.Pane) []string {
	wantW, wantC := Tables(published, truth)
	var diffs []string
	diff := func(table string, got, want map[string]string) {
		for _, k := range slices.Sorted(maps.Keys(want)) {
			switch g, ok := got[k]; {
			case !ok:
				diffs = append(diffs, fmt.Sprintf("%s %s: no row in the lake, want %s", table, k, want[k]))
			case g != want[k]:
				diffs = append(diffs, fmt.Sprintf("%s %s: lake %s, want %s", table, k, g, want[k]))
			}
		}
		for _, k := range slices.Sorted(maps.Keys(got)) {
			if _, ok := want[k]; !ok {
				diffs = append(diffs, fmt.Sprintf("%s %s: lake %s, not in the definition", table, k, got[k]))
			}
		}
	}
	describe := func(ws []lake.WindowRow, cs []lake.CorrectionRow, table string) (map[string]string, map[string]string) {
		dw, dc := map[string]string{}, map[string]string{}
		for _, w := range ws {
			k := window{w.Key, w.WindowStart}.String()
			if _, dup := dw[k]; dup {
				diffs = append(diffs, fmt.Sprintf("windows %s: twice in the %s", k, table))
			}
			dw[k] = DescribeWindow(w)
		}
		for _, c := range cs {
			k := fmt.Sprintf("%s v%d", window{c.Key, c.WindowStart}, c.Version)
			if _, dup := dc[k]; dup {
				diffs = append(diffs, fmt.Sprintf("corrections %s: twice in the %s", k, table))
			}
			dc[k] = DescribeCorrection(c)
		}
		return dw, dc
	}
	gotW, gotC := describe(windows, corrections, "lake")
	wW, wC := describe(wantW, wantC, "definition")
	diff("windows", gotW, wW)
	diff("corrections", gotC, wC)
	return diffs
}

// DescribeWindow is every column of a windows row, for messages.
func DescribeWindow(w lake.WindowRow) string {
	return fmt.Sprintf("%s v%d %d/%g/%g/%g %s %s end %s watermark %d emitted %d %q %s updated %d", w.Stream, w.Version, w.Count, w.Sum, w.Min, w.Max,
		w.Timing, w.ComputedBy, micros(w.WindowEnd), w.Watermark, w.EmittedAt, w.Reason, w.Status, w.UpdatedAt)
}

// DescribeCorrection is every column of a corrections row, for messages.
func DescribeCorrection(c lake.CorrectionRow) string {
	s := fmt.Sprintf("%s v%d %q %d/%g/%g/%g end %s emitted %d", c.Stream, c.Version, c.Reason, c.Count, c.Sum, c.Min, c.Max, micros(c.WindowEnd), c.EmittedAt)
	if c.PrevVersion == nil || c.PrevCount == nil || c.PrevSum == nil || c.PrevMin == nil || c.PrevMax == nil || c.PrevComputedBy == nil || c.PrevEmittedAt == nil {
		return s + fmt.Sprintf(" was nothing (prev columns set: %t %t %t %t %t %t %t)", c.PrevVersion != nil, c.PrevCount != nil, c.PrevSum != nil,
			c.PrevMin != nil, c.PrevMax != nil, c.PrevComputedBy != nil, c.PrevEmittedAt != nil)
	}
	return s + fmt.Sprintf(" was v%d %d/%g/%g/%g by %s emitted %d", *c.PrevVersion, *c.PrevCount, *c.PrevSum, *c.PrevMin, *c.PrevMax, *c.PrevComputedBy, *c.PrevEmittedAt)
}

// window is a window of the stream: its key and window start (µs).
type window struct {
	key   string
	start int64
}

func windowOf(r lake.SummaryRow) window { return window{r.Key, r.WindowStart} }

func (w window) String() string { return w.key + "|" + micros(w.start) }

func compareWindows(a, b window) int {
	return cmp.Or(strings.Compare(a.key, b.key), cmp.Compare(a.start, b.start))
}

func micros(us int64) string { return time.UnixMicro(us).UTC().Format(time.RFC3339Nano) }
