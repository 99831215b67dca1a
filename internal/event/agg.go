package event

// Agg is the aggregate of one (stream, key, window): count, sum, min, max.
// It is the one aggregation used by the stream operator, the lake query and
// the batch recompute, so the fast and the true answers cannot drift apart
// by construction. The zero value is the empty aggregate.
type Agg struct {
	Count int64
	Sum   float64
	Min   float64 // meaningful only when Count > 0
	Max   float64 // meaningful only when Count > 0
}

// Add folds one value in.
func (a *Agg) Add(v float64) {
	if a.Count == 0 || v < a.Min {
		a.Min = v
	}
	if a.Count == 0 || v > a.Max {
		a.Max = v
	}
	a.Count++
	a.Sum += v
}

// Merge folds another aggregate in.
func (a *Agg) Merge(b Agg) {
	if b.Count == 0 {
		return
	}
	if a.Count == 0 || b.Min < a.Min {
		a.Min = b.Min
	}
	if a.Count == 0 || b.Max > a.Max {
		a.Max = b.Max
	}
	a.Count += b.Count
	a.Sum += b.Sum
}
