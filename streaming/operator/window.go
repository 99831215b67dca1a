package operator

import (
	"encoding/binary"
	"math/bits"
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
	idx   []uint64 // key → index in wins, see find
	mask  uint32   // len(idx) − 1
	wins  []window // insertion order; emissions sort by key
}

// The bucket's index is an open-addressing table with linear probing, not
// a Go map: the window lookup is on every event's path, and at ten thousand
// keys a map touches more cache lines (control word, slot, key) than the
// one slot here, whose window the event updates anyway. A slot holds the
// low 32 bits of the key's seeded hash (Operator.keyHash) and the window's
// index + 1; 0 is empty. Windows only leave a bucket with the whole bucket,
// so there is no deletion. The table is kept at most half full.

// find returns the index of key's window, or -1.
func (b *bucket) find(key string, h uint32) int32 {
	for i := h & b.mask; len(b.idx) > 0; i = (i + 1) & b.mask {
		s := b.idx[i]
		if s == 0 {
			break
		}
		if uint32(s>>32) == h && b.wins[uint32(s)-1].key == key {
			return int32(uint32(s) - 1)
		}
	}
	return -1
}

// add appends w, whose key b does not hold, and indexes it.
func (b *bucket) add(w window) int32 {
	i := int32(len(b.wins))
	b.wins = append(b.wins, w)
	if 2*len(b.wins) > len(b.idx) {
		b.resize(max(16, 2*len(b.idx)))
		return i // resize indexed every window, the new one too
	}
	b.place(w.hash, i)
	return i
}

func (b *bucket) place(h uint32, i int32) {
	j := h & b.mask
	for b.idx[j] != 0 {
		j = (j + 1) & b.mask
	}
	b.idx[j] = uint64(h)<<32 | uint64(i+1)
}

// resize rebuilds the index with size slots (a power of two) from wins.
func (b *bucket) resize(size int) {
	size = 1 << bits.Len(uint(size-1))
	if cap(b.idx) >= size {
		b.idx = b.idx[:size]
		clear(b.idx)
	} else {
		b.idx = make([]uint64, size)
	}
	b.mask = uint32(size - 1)
	for i := range b.wins {
		b.place(b.wins[i].hash, int32(i))
	}
}

type window struct {
	key     string // owned copy; emitted panes share it
	agg     event.Agg
	version int64  // panes emitted so far
	hash    uint32 // Operator.keyHash(key), for rebuilding the index
	// dirty: changed since its last pane. While the bucket is not fired,
	// an early pane is due; once fired (CoalesceLatePanes), a held late
	// pane is, and the window is in Operator.lateDue.
	dirty bool
}

// lateRef is a fired window with a held late pane.
type lateRef struct {
	b *bucket
	i int32
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
		b = &bucket{}
	}
	b.start, b.end = start, end
	// A window whose end the watermark already passed while it held no
	// events never fired on time; the event creating it is late-accepted.
	b.fired = o.hasWM && end <= o.wm
	o.buckets = slices.Insert(o.buckets, i, b)
	return b
}

// recycle keeps a purged bucket's index and slice for reuse, so a steady
// stream allocates no window state.
func (o *Operator) recycle(b *bucket) {
	clear(b.idx)
	clear(b.wins)
	b.wins = b.wins[:0]
	if len(o.spare) < 4 {
		o.spare = append(o.spare, b)
	}
}

// windowRef is a window found by peekWindow: b is nil when no bucket
// starts there, i is -1 when b holds no window for the key; h is the key's
// hash.
type windowRef struct {
	b *bucket
	i int32
	h uint32
}

// peekWindow finds key's window starting at start, creating nothing.
func (o *Operator) peekWindow(key string, h uint32, start int64) windowRef {
	for j := len(o.buckets) - 1; j >= 0; j-- {
		b := o.buckets[j]
		if b.start == start {
			return windowRef{b, b.find(key, h), h}
		}
		if b.start < start {
			break
		}
	}
	return windowRef{nil, -1, h}
}

// fold adds v to key's window [start, end), found earlier by peekWindow
// as ref (nothing may have changed the buckets since); in a fired window it
// emits the late pane at once.
func (o *Operator) fold(key string, start, end int64, v float64, ref windowRef, out *Out) {
	b, i := ref.b, ref.i
	if b == nil {
		b = o.bucketFor(start, end)
	}
	if i < 0 {
		i = b.add(window{key: strings.Clone(key), hash: ref.h})
	}
	w := &b.wins[i]
	w.agg.Add(v)
	if b.fired {
		if !o.opts.CoalesceLatePanes {
			o.emitPane(b, w, event.TimingLate, out)
			return
		}
		// The late pane is made now (its version counted, so versions do
		// not depend on where transactions end) and held: FlushLate
		// publishes the window's latest one.
		w.version++
		if !w.dirty {
			w.dirty = true
			o.lateDue = append(o.lateDue, lateRef{b, i})
		}
		return
	}
	w.dirty = true
}

// FlushLate emits the late panes held by CoalesceLatePanes, one per window
// with its current figures and version, in the order the windows first
// changed.
func (o *Operator) FlushLate(out *Out) {
	for _, r := range o.lateDue {
		o.publishPane(r.b, &r.b.wins[r.i], event.TimingLate, out)
	}
	clear(o.lateDue)
	o.lateDue = o.lateDue[:0]
}

// fire emits a pane of timing t for every window of b, in key order.
func (o *Operator) fire(b *bucket, t event.Timing, out *Out) {
	o.order = o.order[:0]
	for i := range b.wins {
		o.order = append(o.order, keyIndex{key: b.wins[i].key, i: int32(i)})
	}
	o.emitOrdered(b, t, out)
}

// keyIndex is a window's key beside its index, so that sorting works on one
// contiguous slice instead of reaching into the windows; pre caches eight
// bytes of the key for sortKeys.
type keyIndex struct {
	pre uint64
	key string
	i   int32
}

func (o *Operator) emitOrdered(b *bucket, t event.Timing, out *Out) {
	o.orderTmp = sortKeys(o.order, o.orderTmp)
	for _, k := range o.order {
		o.emitPane(b, &b.wins[k.i], t, out)
	}
	clear(o.order) // drop the key references
}

// sortKeys sorts ks by key, using tmp (returned, possibly grown) as
// scratch. A bucket fires with as many windows as keys, often tens of
// thousands, every window period: a comparison sort spent ~10% of the
// operator's time there. Large sets are radix sorted on the eight bytes
// after the keys' common prefix (big endian, zero padded), then runs that
// tie on those bytes are sorted by the whole key.
func sortKeys(ks, tmp []keyIndex) []keyIndex {
	if len(ks) < 256 {
		slices.SortFunc(ks, func(x, y keyIndex) int { return strings.Compare(x.key, y.key) })
		return tmp
	}
	cp := len(ks[0].key)
	for _, k := range ks[1:] {
		n := min(cp, len(k.key))
		j := 0
		for j < n && k.key[j] == ks[0].key[j] {
			j++
		}
		cp = j
	}
	var count [8][256]int
	for i := range ks {
		var b [8]byte
		copy(b[:], ks[i].key[cp:])
		ks[i].pre = binary.BigEndian.Uint64(b[:])
		for d := range 8 {
			count[d][byte(ks[i].pre>>(8*d))]++
		}
	}
	tmp = slices.Grow(tmp[:0], len(ks))[:len(ks)]
	src, dst := ks, tmp
	for d := range 8 { // least significant byte first; each pass is stable
		c := &count[d]
		if c[byte(src[0].pre>>(8*d))] == len(src) {
			continue // every key has the same byte here
		}
		sum := 0
		for v := range c {
			c[v], sum = sum, sum+c[v]
		}
		for _, k := range src {
			v := byte(k.pre >> (8 * d))
			dst[c[v]] = k
			c[v]++
		}
		src, dst = dst, src
	}
	if &src[0] != &ks[0] {
		copy(ks, src)
	}
	clear(tmp) // drop the key references
	for i := 0; i < len(ks); {
		j := i + 1
		for j < len(ks) && ks[j].pre == ks[i].pre {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(ks[i:j], func(x, y keyIndex) int { return strings.Compare(x.key, y.key) })
		}
		i = j
	}
	return tmp
}

// EmitEarly emits an early pane for every open (not yet fired) window that
// changed since its last pane, ordered by window start then key. Tick calls
// it every EmitInterval; `reckon simulate` calls it once at end of input.
func (o *Operator) EmitEarly(out *Out) {
	for _, b := range o.buckets[o.firstUnfired():] {
		o.order = o.order[:0]
		for i := range b.wins {
			if b.wins[i].dirty {
				o.order = append(o.order, keyIndex{key: b.wins[i].key, i: int32(i)})
			}
		}
		o.emitOrdered(b, event.TimingEarly, out)
	}
}

// emitPane makes the window's next pane and publishes it.
func (o *Operator) emitPane(b *bucket, w *window, t event.Timing, out *Out) {
	w.version++
	o.publishPane(b, w, t, out)
}

// publishPane appends the window's current pane (figures and version) to out.
func (o *Operator) publishPane(b *bucket, w *window, t event.Timing, out *Out) {
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
		Watermark: ts(o.wm), ProcessedAt: ts(o.proc),
	})
}
