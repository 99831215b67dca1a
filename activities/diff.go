package activities

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"reckon/internal/event"
	"reckon/lake"
)

// defaultTolerance is the relative tolerance of diffSettings.Tolerance's
// zero value: sums of the same events added in another order (stream and
// batch fold in different orders) differ by rounding only.
const defaultTolerance = 1e-9

// diffSettings are what diffWindows needs besides the data.
type diffSettings struct {
	// Stream and Window name and size the stream's windows (the truth
	// rows' WindowEnd is WindowStart + Window).
	Stream string
	Window time.Duration
	// Tolerance is the relative tolerance within which a published sum,
	// minimum or maximum equals the truth's. Zero means defaultTolerance.
	Tolerance float64
	// Now stamps the truth rows and the corrections (EmittedAt).
	Now time.Time
}

// windowDiff is what diffWindows decided.
type windowDiff struct {
	// Report counts the windows checked, the stream's errors against the
	// truth, the matches and the corrections with their reasons. Stream,
	// From, To, DryRun and Superseded are left to the caller.
	Report TruthReport
	// Corrections are the panes to publish (version = the latest
	// published version + 1, timing correction), in key/window order.
	Corrections []candidate
	// TruthRows hold one truth-table row per window checked, in
	// key/window order; a correction's row is TruthRows[c.truthRow].
	TruthRows []lake.SummaryRow
}

// Reasons of the truth rows that are not corrections.
const (
	reasonMatched          = "matched"
	reasonMatchedCorrected = "matched (earlier correction)"
)

// diffWindows compares the truth of every window of t — its recomputed
// aggregate, and the number of its events that arrived after the
// stream's latest pane of it (beyond) — with what is published for it
// (the latest version by any producer and the stream's own latest). A
// window whose latest published pane equals the truth is matched; any
// other window with events or a pane gets a correction, version latest+1
// (1 where nothing was published), with the reason counted in
// Report.Reasons. It is pure: no Kafka, no lake, no Temporal, so the
// recompute's decisions are tested on plain tables.
func diffWindows(s diffSettings, t *windowTable) windowDiff {
	tol := s.Tolerance
	if tol == 0 {
		tol = defaultTolerance
	}
	order := t.order()
	nowUS := int64(0) // the zero time is stored as 0, as lake.SummaryRowOf does
	if !s.Now.IsZero() {
		nowUS = s.Now.UnixMicro()
	}

	var d windowDiff
	rep := &d.Report
	d.TruthRows = make([]lake.SummaryRow, 0, len(order))
	for _, ci := range order {
		c := &t.cells[ci]
		tr := c.truth
		if tr.Count == 0 && c.flags&hasPane == 0 {
			continue
		}
		start := time.Unix(0, c.start).UTC()
		row := lake.SummaryRow{
			Stream: s.Stream, Key: t.keys[c.key], WindowStart: start.UnixMicro(), WindowEnd: start.Add(s.Window).UnixMicro(),
			Count: tr.Count, Sum: tr.Sum, Min: tr.Min, Max: tr.Max,
			Timing: "truth", ComputedBy: event.ComputedByBatch, EmittedAt: nowUS, ProcessedAt: nowUS,
		}
		rep.Windows++
		rep.Events += tr.Count
		rep.EventsBeyondLateness += c.beyond
		var sc int64
		var ss float64
		if c.flags&hasStreamPane != 0 {
			sc, ss = c.stream.count, c.stream.sum
			if sameAgg(c.stream.agg(), tr, tol) {
				rep.StreamExact++
			}
		} else if tr.Count > 0 {
			rep.Missing++
		}
		ce, se := math.Abs(float64(sc-tr.Count)), math.Abs(ss-tr.Sum)
		rep.CountErrMax, rep.SumErrMax = math.Max(rep.CountErrMax, ce), math.Max(rep.SumErrMax, se)
		rep.CountErrTotal += ce
		rep.SumErrTotal += se

		if c.flags&hasPane != 0 && sameAgg(c.latest.agg(), tr, tol) {
			rep.Matched++
			row.Version, row.Reason = c.latest.version, reasonMatched
			if c.flags&latestByBatch != 0 {
				rep.AlreadyCorrected++
				row.Reason = reasonMatchedCorrected
			}
			d.TruthRows = append(d.TruthRows, row)
			continue
		}
		var latest paneFig
		if c.flags&hasPane != 0 {
			latest = c.latest
		}
		why := reason(&rep.Reasons, c, tr)
		p := event.Pane{
			Stream: s.Stream, Key: row.Key, WindowStart: start, WindowEnd: start.Add(s.Window),
			Count: tr.Count, Sum: tr.Sum, Min: tr.Min, Max: tr.Max,
			Version: latest.version + 1, Timing: event.TimingCorrection, ComputedBy: event.ComputedByBatch,
			EmittedAt: s.Now, ProcessedAt: s.Now, Reason: why,
		}
		row.Version, row.Reason = p.Version, "corrected: "+why
		was := event.Pane{Version: latest.version, Count: latest.count, Sum: latest.sum, Min: latest.min, Max: latest.max}
		d.Corrections = append(d.Corrections, candidate{pane: p, truthRow: len(d.TruthRows), was: was})
		d.TruthRows = append(d.TruthRows, row)
	}
	rep.means()
	rep.Corrected = int64(len(d.Corrections))
	return d
}

// order returns the indexes of t's cells by key, then window start: a
// counting sort by the keys' rank (stable, so each key's cells keep the
// order they were created in, which is usually by start already), then a
// sort of any key's cells that are not.
func (t *windowTable) order() []int32 {
	byName := make([]int32, len(t.keys))
	for i := range byName {
		byName[i] = int32(i)
	}
	slices.SortFunc(byName, func(a, b int32) int { return strings.Compare(t.keys[a], t.keys[b]) })
	rank := make([]int32, len(t.keys))
	for r, k := range byName {
		rank[k] = int32(r)
	}
	at := make([]int32, len(t.keys)+1) // first position of each rank
	for i := range t.cells {
		at[rank[t.cells[i].key]+1]++
	}
	for r := 1; r < len(at); r++ {
		at[r] += at[r-1]
	}
	seg := slices.Clone(at)
	out := make([]int32, len(t.cells))
	for i := range t.cells {
		r := rank[t.cells[i].key]
		out[at[r]] = int32(i)
		at[r]++
	}
	for r := 0; r+1 < len(seg); r++ {
		part := out[seg[r]:seg[r+1]]
		for j := 1; j < len(part); j++ {
			if t.cells[part[j-1]].start > t.cells[part[j]].start {
				slices.SortFunc(part, func(a, b int32) int { return cmpInt(t.cells[a].start, t.cells[b].start) })
				break
			}
		}
	}
	return out
}

// reason says why the published pane differs from the truth and counts it
// in rc.
func reason(rc *ReasonCounts, c *cell, t event.Agg) string {
	switch {
	case c.flags&hasPane == 0:
		rc.Missing++
		return fmt.Sprintf("missing: no pane was published for %d events", t.Count)
	case t.Count == 0:
		rc.Retracted++
		return "retracted: no valid event of this window in the lake"
	}
	var parts []string
	if c.beyond > 0 {
		rc.BeyondLateness++
		parts = append(parts, fmt.Sprintf("late events beyond lateness: %d", c.beyond))
	}
	if s := c.latest.count - t.Count; s > 0 {
		rc.Duplicates++
		parts = append(parts, fmt.Sprintf("duplicates counted: %d", s))
	}
	if len(parts) == 0 {
		rc.Other++
		return fmt.Sprintf("values differ (count %d→%d, sum %g→%g)", c.latest.count, t.Count, c.latest.sum, t.Sum)
	}
	return strings.Join(parts, "; ")
}

// sameAgg compares a published pane's figures p with the truth t: equal
// counts, sums equal within the relative tolerance tol (addition order
// differs between stream and batch), and equal min/max when there are
// events.
func sameAgg(p, t event.Agg, tol float64) bool {
	if p.Count != t.Count || !near(p.Sum, t.Sum, tol) {
		return false
	}
	return t.Count == 0 || (near(p.Min, t.Min, tol) && near(p.Max, t.Max, tol))
}

// near reports whether a and b differ by at most tol relative to the
// larger magnitude (absolutely, below 1).
func near(a, b, tol float64) bool {
	return math.Abs(a-b) <= tol*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}
