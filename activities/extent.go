package activities

import (
	"context"
	"time"

	"reckon/lake"
)

// ExtentInput asks how far a stream's range holds anything to check.
type ExtentInput struct {
	Stream   string
	From, To time.Time
}

// RecomputeExtent returns the end of the last window in [From, To) that
// has events in the lake or a published pane (From when none has); for
// hopping windows the window boundary after the last window start that
// has (docs/adr/0041), counting the events after To that windows
// starting before To cover: the
// part of a range a recompute must wait for and check. A range whose end
// lies in the future (today) is thereby checked as far as it has data, and
// a stream whose traffic stopped early need not wait for the day's end.
// Windows beyond it that get events later are the next run's (or, if too
// late, a targeted correction's).
func (a *BatchTruth) RecomputeExtent(ctx context.Context, in ExtentInput) (time.Time, error) {
	st, ok := a.Cfg.StreamByName(in.Stream)
	if !ok {
		return time.Time{}, badInput("unknown stream %q", in.Stream)
	}
	if err := a.checkRange(st, in.From, in.To); err != nil {
		return time.Time{}, err
	}
	from, to := in.From.UTC(), in.To.UTC()
	end := from
	win := int64(st.Window)
	// The events the range's windows cover: hopping ones reach past To.
	scanTo := windowsEnd(st, to)
	// The lake: the last event hour directory holding rows of the range.
	hours, err := a.Lake.RawHours(ctx, st.Topic, from, scanTo)
	if err != nil {
		return time.Time{}, err
	}
	for i := len(hours) - 1; i >= 0; i-- {
		h := hours[i]
		qf, qt := maxTime(h, from), minTime(h.Add(time.Hour), scanTo)
		var last int64
		found := false
		if _, err := a.Lake.Scan(ctx, lake.Query{Topic: st.Topic, From: qf, To: qt, EventTypes: st.EventTypes}, lake.ColOccurredAt, func(r *lake.RawRow) error {
			if o := r.OccurredTime().UnixNano(); !found || o > last {
				last, found = o, true
			}
			return nil
		}); err != nil {
			return time.Time{}, err
		}
		if found {
			end = time.Unix(0, floorNanos(last, win)+win).UTC()
			break
		}
	}
	// Published panes: a window the stream published must be checked even
	// if the lake does not hold its events yet (they are archived by the
	// time the horizon passes).
	pub := newWindowTable(from, to, st.Step())
	if err := a.loadPublished(ctx, pub, st.Name, from, to); err != nil {
		return time.Time{}, err
	}
	for _, c := range pub.cells {
		if e := time.Unix(0, floorNanos(c.start, win)+win).UTC(); e.After(end) {
			end = e
		}
	}
	return minTime(end, to), nil
}
