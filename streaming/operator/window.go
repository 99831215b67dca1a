package operator

import (
	"slices"
	"strings"

	"reckon/internal/event"
)

// bucket holds every key's window with one start. Tumbling windows are
// epoch-aligned, so all keys share window boundaries: firing and purging
// work per bucket, and the operator keeps only a handful of buckets (about
// (size + lateness + out-of-orderness) / size) however many keys there are.
type bucket struct {
	start, end int64
	// fired is set when the watermark passed end: on-time panes went out for
	// every window then present, and any later-accepted event emits a late
	// pane at once.
	fired bool
	idx   map[string]int32 // key → index in wins
	wins  []window         // insertion order; emissions sort by key
}

type window struct {
	key     string // owned copy; emitted panes share it
	agg     event.Agg
	version int64 // panes emitted so far
	dirty   bool  // changed since its last pane (only while not fired)
}

// firstUnfired is the index of the first bucket not yet fired.
func (o *Operator) firstUnfired() int {
	lo, hi := 0, len(o.buckets)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if o.buckets[m].fired {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// bucketFor finds or creates the bucket starting at start. New events almost
// always hit the newest bucket, so the search runs from the back.
func (o *Operator) bucketFor(start, end int64) *bucket {
	i := len(o.buckets)
	for i > 0 && o.buckets[i-1].start > start {
		i--
	}
	if i > 0 && o.buckets[i-1].start == start {
		return o.buckets[i-1]
	}
	var b *bucket
	if n := len(o.spare); n > 0 {
		b = o.spare[n-1]
		o.spare[n-1] = nil
		o.spare = o.spare[:n-1]
	} else {
		b = &bucket{idx: map[string]int32{}}
	}
	b.start, b.end = start, end
	// A window whose end the watermark already passed while it held no
	// events never fired on time; the event creating it is late-accepted.
	b.fired = o.hasWM && end <= o.wm
	o.buckets = slices.Insert(o.buckets, i, b)
	return b
}

// recycle keeps a purged bucket's map and slice for reuse, so a steady
// stream allocates no window state.
func (o *Operator) recycle(b *bucket) {
	clear(b.idx)
	clear(b.wins)
	b.wins = b.wins[:0]
	if len(o.spare) < 4 {
		o.spare = append(o.spare, b)
	}
}

// fold adds v to key's window [start, end); in a fired window it emits the
// late pane at once.
func (o *Operator) fold(key string, start, end int64, v float64, out *Out) {
	b := o.bucketFor(start, end)
	i, ok := b.idx[key]
	if !ok {
		i = int32(len(b.wins))
		b.wins = append(b.wins, window{key: strings.Clone(key)})
		b.idx[b.wins[i].key] = i
	}
	w := &b.wins[i]
	w.agg.Add(v)
	if b.fired {
		o.emitPane(b, w, event.TimingLate, out)
		return
	}
	w.dirty = true
}

// fire emits a pane of timing t for every window of b, in key order.
func (o *Operator) fire(b *bucket, t event.Timing, out *Out) {
	o.order = o.order[:0]
	for i := range b.wins {
		o.order = append(o.order, int32(i))
	}
	o.emitOrdered(b, t, out)
}

func (o *Operator) emitOrdered(b *bucket, t event.Timing, out *Out) {
	slices.SortFunc(o.order, func(x, y int32) int { return strings.Compare(b.wins[x].key, b.wins[y].key) })
	for _, i := range o.order {
		o.emitPane(b, &b.wins[i], t, out)
	}
}

// EmitEarly emits an early pane for every open (not yet fired) window that
// changed since its last pane, ordered by window start then key. Tick calls
// it every EmitInterval; `reckon simulate` calls it once at end of input.
func (o *Operator) EmitEarly(out *Out) {
	for _, b := range o.buckets[o.firstUnfired():] {
		o.order = o.order[:0]
		for i := range b.wins {
			if b.wins[i].dirty {
				o.order = append(o.order, int32(i))
			}
		}
		o.emitOrdered(b, event.TimingEarly, out)
	}
}

func (o *Operator) emitPane(b *bucket, w *window, t event.Timing, out *Out) {
	w.version++
	w.dirty = false
	switch t {
	case event.TimingEarly:
		o.n.earlyPanes++
	case event.TimingOnTime:
		o.n.onTimePanes++
	case event.TimingLate:
		o.n.latePanes++
	}
	out.Panes = append(out.Panes, event.Pane{
		Stream: o.opts.Stream, Key: w.key, WindowStart: ts(b.start), WindowEnd: ts(b.end),
		Count: w.agg.Count, Sum: w.agg.Sum, Min: w.agg.Min, Max: w.agg.Max,
		Version: w.version, Timing: t, ComputedBy: event.ComputedByStream,
		Watermark: ts(o.wm), EmittedAt: ts(o.proc),
	})
}
