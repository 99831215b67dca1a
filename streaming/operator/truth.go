package operator

import (
	"iter"
	"math"
	"time"
)

// TruthOptions are the options under which the operator computes the truth
// for the batch recompute: unbounded lateness (nothing is late, nothing is
// purged) and a dedup set that forgets nothing, so every valid unique event
// counts exactly once whatever the order of the records.
func TruthOptions(window time.Duration) Options {
	return Options{Window: window, AllowedLateness: Forever, DedupTTL: Forever, DedupMaxEntries: math.MaxInt}
}

// Truth folds records through the operator's own window code under
// TruthOptions and returns the final aggregate of every (key, window),
// sorted by key then window start. Duplicate ids count once (first wins).
// Records whose time or value the operator cannot represent are reported by
// the error, which wraps ErrRecord; the rest still count.
func Truth(window time.Duration, records iter.Seq[Record]) ([]WindowAgg, error) {
	return HoppingTruth(window, 0, records)
}

// HoppingTruth is Truth for hopping windows of size window starting every
// hop (Options.Hop; 0 or window: tumbling): every window covering an event
// counts it.
func HoppingTruth(window, hop time.Duration, records iter.Seq[Record]) ([]WindowAgg, error) {
	opts := TruthOptions(window)
	opts.Hop = hop
	o, err := New(opts)
	if err != nil {
		return nil, err
	}
	if window <= 0 {
		return nil, nil
	}
	var out Out
	var first error
	for r := range records {
		if _, err := o.Process(r, &out); err != nil && first == nil {
			first = err
		}
		out.Reset()
	}
	ws := o.Windows()
	for i := range ws {
		ws[i].Version = 0 // panes of this run are not published
	}
	return ws, first
}
