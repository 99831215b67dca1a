package activities

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"reckon/internal/event"
)

// defaultTolerance is the relative tolerance of diffSettings.Tolerance's
// zero value: sums of the same events added in another order (stream and
// batch fold in different orders) differ by rounding only.
const defaultTolerance = 1e-9

// diffSettings are what diffWindows needs besides the data.
type diffSettings struct {
	// Stream and Window name and size the stream's windows (the panes'
	// WindowEnd is WindowStart + Window).
	Stream string
	Window time.Duration
	// Selected reports whether a window is checked (a targeted recompute
	// checks only its windows: other keys' windows in the range may still
	// be held by the stream). Nil checks every window.
	Selected func(winKey) bool
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
	TruthRows []event.Pane
}

// diffWindows compares the truth — the recomputed aggregate of every
// window with events, and per window the number of its events that
// arrived after the stream's latest pane of it (beyond) — with what is
// published for each window (pub: the latest version by any producer and
// the stream's own latest). A window whose latest published pane equals
// the truth is matched; any other window with events or a pane gets a
// correction, version latest+1 (1 where nothing was published), with the
// reason counted in Report.Reasons. It is pure: no Kafka, no lake, no
// Temporal, so the recompute's decisions are tested on plain maps.
func diffWindows(s diffSettings, truth map[winKey]event.Agg, beyond map[winKey]int64, pub map[winKey]*published) windowDiff {
	selected := s.Selected
	if selected == nil {
		selected = func(winKey) bool { return true }
	}
	tol := s.Tolerance
	if tol == 0 {
		tol = defaultTolerance
	}

	// Every window with events or a published pane, in key/window order.
	cells := map[winKey]bool{}
	for k := range truth {
		if selected(k) {
			cells[k] = true
		}
	}
	for k := range pub {
		if selected(k) {
			cells[k] = true
		}
	}
	order := make([]winKey, 0, len(cells))
	for k := range cells {
		order = append(order, k)
	}
	slices.SortFunc(order, func(a, b winKey) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmpInt(a.start, b.start)
	})

	var d windowDiff
	rep := &d.Report
	d.TruthRows = make([]event.Pane, 0, len(order))
	for _, k := range order {
		t := truth[k]
		pb := pub[k]
		if t.Count == 0 && pb == nil {
			continue
		}
		start := time.Unix(0, k.start).UTC()
		tp := event.Pane{
			Stream: s.Stream, Key: k.key, WindowStart: start, WindowEnd: start.Add(s.Window),
			Count: t.Count, Sum: t.Sum, Min: t.Min, Max: t.Max,
			Timing: "truth", ComputedBy: event.ComputedByBatch, EmittedAt: s.Now,
		}
		rep.Windows++
		rep.Events += t.Count
		rep.EventsBeyondLateness += beyond[k]
		var sc int64
		var ss float64
		if pb != nil && pb.stream != nil {
			sc, ss = pb.stream.Count, pb.stream.Sum
			if sameAgg(*pb.stream, t, tol) {
				rep.StreamExact++
			}
		} else if t.Count > 0 {
			rep.Missing++
		}
		ce, se := math.Abs(float64(sc-t.Count)), math.Abs(ss-t.Sum)
		rep.CountErrMax, rep.SumErrMax = math.Max(rep.CountErrMax, ce), math.Max(rep.SumErrMax, se)
		rep.CountErrTotal += ce
		rep.SumErrTotal += se

		if pb != nil && sameAgg(pb.latest, t, tol) {
			rep.Matched++
			tp.Version, tp.Reason = pb.latest.Version, "matched"
			if pb.latest.ComputedBy == event.ComputedByBatch {
				rep.AlreadyCorrected++
				tp.Reason = "matched (earlier correction)"
			}
			d.TruthRows = append(d.TruthRows, tp)
			continue
		}
		var latest event.Pane
		if pb != nil {
			latest = pb.latest
		}
		why := reason(&rep.Reasons, pb, t, beyond[k])
		c := tp
		c.Version, c.Timing, c.Reason = latest.Version+1, event.TimingCorrection, why
		tp.Version, tp.Reason = c.Version, "corrected: "+why
		d.Corrections = append(d.Corrections, candidate{k: k, pane: c, truthRow: len(d.TruthRows), was: latest})
		d.TruthRows = append(d.TruthRows, tp)
	}
	rep.means()
	rep.Corrected = int64(len(d.Corrections))
	return d
}

// reason says why the published pane differs from the truth and counts it
// in rc.
func reason(rc *ReasonCounts, pb *published, t event.Agg, beyond int64) string {
	switch {
	case pb == nil:
		rc.Missing++
		return fmt.Sprintf("missing: no pane was published for %d events", t.Count)
	case t.Count == 0:
		rc.Retracted++
		return "retracted: no valid event of this window in the lake"
	}
	var parts []string
	if beyond > 0 {
		rc.BeyondLateness++
		parts = append(parts, fmt.Sprintf("late events beyond lateness: %d", beyond))
	}
	if s := pb.latest.Count - t.Count; s > 0 {
		rc.Duplicates++
		parts = append(parts, fmt.Sprintf("duplicates counted: %d", s))
	}
	if len(parts) == 0 {
		rc.Other++
		return fmt.Sprintf("values differ (count %d→%d, sum %g→%g)", pb.latest.Count, t.Count, pb.latest.Sum, t.Sum)
	}
	return strings.Join(parts, "; ")
}

// sameAgg compares a pane with the truth: equal counts, sums equal within
// the relative tolerance tol (addition order differs between stream and
// batch), and equal min/max when there are events.
func sameAgg(p event.Pane, t event.Agg, tol float64) bool {
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
