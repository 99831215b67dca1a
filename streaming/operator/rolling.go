package operator

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"reckon/internal/event"
)

// point is one feature-accepted event in a key's rolling buffer.
type point struct {
	et int64
	v  float64
}

// rollKey is one key's rolling buffer: pts[head:] sorted by event time,
// ties in arrival order. Pruning moves head; the dead prefix is reclaimed
// when an append would otherwise grow the array, so a steady key allocates
// nothing.
type rollKey struct {
	key  string
	pts  []point
	head int
	// dirty: changed since the last PublishTo (in Operator.dirty).
	dirty bool
}

func (k *rollKey) live() []point { return k.pts[k.head:] }

func (k *rollKey) insert(et int64, v float64) {
	if len(k.pts) == cap(k.pts) && k.head > 0 {
		n := copy(k.pts, k.pts[k.head:])
		k.pts = k.pts[:n]
		k.head = 0
	}
	n := len(k.pts)
	if n == k.head || k.pts[n-1].et <= et {
		k.pts = append(k.pts, point{et, v})
		return
	}
	i := k.head + after(k.live(), et)
	k.pts = slices.Insert(k.pts, i, point{et, v})
}

// prune drops points at or before h and returns how many remain.
func (k *rollKey) prune(h int64) int {
	k.head += after(k.live(), h)
	if k.head == len(k.pts) {
		k.pts, k.head = k.pts[:0], 0
	}
	return len(k.pts) - k.head
}

// after returns the index of the first point with et > t.
func after(pts []point, t int64) int {
	lo, hi := 0, len(pts)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if pts[m].et > t {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// rollWindow is the points in (at − size, at]: the one definition of a
// rolling feature's window, used by the operator and RollingTruth.
func rollWindow(pts []point, at, size int64) []point {
	return pts[after(pts, subSat(at, size)):after(pts, at)]
}

// rollAgg folds the points in (at − size, at] in event-time order.
func rollAgg(pts []point, at, size int64) event.Agg {
	var a event.Agg
	for _, p := range rollWindow(pts, at, size) {
		a.Add(p.v)
	}
	return a
}

// rollSum is the sum of w folded in order from zero: bit for bit the Sum
// rollAgg computes over w, without the minimum and maximum a feature does
// not carry (a hot key's window holds thousands of points, and the fold
// runs once per event).
func rollSum(w []point) float64 {
	s := 0.0
	for i := range w {
		s += w[i].v
	}
	return s
}

// feature inserts r into its key's buffer and emits its rolling feature.
func (o *Operator) feature(r *Record, et int64, out *Out) {
	k := o.keys[r.Key]
	if k == nil {
		k = &rollKey{key: strings.Clone(r.Key)}
		o.keys[k.key] = k
	}
	if h, ok := o.horizon(); ok {
		k.prune(h)
	}
	k.insert(et, r.Value)
	o.markDirty(k)
	w := rollWindow(k.live(), et, o.roll)
	o.n.features++
	f := Feature{Ref: r.Ref, ID: r.ID, Key: k.key, EventTime: ts(et), Count: int64(len(w)), Sum: rollSum(w), ArrivedAt: ts(r.Arrival.UnixNano())}
	if o.hasWM {
		f.Watermark, f.HasWatermark = ts(o.wm), true
	}
	out.Features = append(out.Features, f)
}

// RollingTruth is the batch side of the fraud-features comparison
// (docs/requirements.md R-ROLL-4): count and sum
// (as an Agg) over (at − size, at] of the given events of one key, folded in
// event-time order (ties in slice order) exactly as the operator folds a
// feature. The caller passes the events it wants counted: all valid unique
// events for the truth, the feature-accepted ones for the stream's view.
func RollingTruth(size time.Duration, at time.Time, records []Record) event.Agg {
	pts := make([]point, len(records))
	for i, r := range records {
		pts[i] = point{r.EventTime.UnixNano(), r.Value}
	}
	slices.SortStableFunc(pts, func(a, b point) int { return cmp.Compare(a.et, b.et) })
	return rollAgg(pts, at.UnixNano(), int64(size))
}
