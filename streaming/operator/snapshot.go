package operator

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"strings"
)

// ErrSnapshot wraps every reason Restore refuses a snapshot.
var ErrSnapshot = errors.New("operator: bad snapshot")

// Snapshot format: a compact binary encoding, chosen over JSON because the
// dedup set dominates (up to DedupMaxEntries ids per partition: 16 raw bytes
// plus a 1–3 byte time delta each, against ~60 bytes as JSON text) and
// because float64 bits must round-trip exactly. It is deterministic: the
// same logical state gives the same bytes (windows and rolling keys are
// written in key order, dead rolling points are left out, dedup entries in
// FIFO order), so a restored run and an uninterrupted one can be compared
// byte for byte.
//
//	"RKOP" version=1
//	options: window rolling ooo lateness idle emit ttl max   (varints)
//	flags(hasWM hasProc hasNextEmit hasAnchor noMaxET hopping) [hop] wm maxET proc lastRecord wmAtRecord nextEmit
//	counters (11 uvarints)
//	buckets: n { start fired nwins { key version dirty count sum min max } }
//	rolling: n { key npts et0 (Δet)… value… }
//	dedup:   n { id[16] } at0 (Δat)…
//	[refreshed: n { id[16] et }]   (flag refreshed, lookup.go)
//	crc32-IEEE of everything before, little endian
//
// hasAnchor and noMaxET were added within version 1: a snapshot written
// before them has neither bit, and there the anchor and maxET are valid
// iff hasWM, as the decoder assumes. hopping (and the hop varint after the
// flags) was added within version 1 too: a tumbling operator writes neither,
// so its snapshots are the bytes they always were; a hopping one's windows
// start at multiples of the hop (docs/adr/0041-hopping-windows.md).
const (
	snapMagic   = "RKOP"
	snapVersion = 1
)

// Snapshot returns the complete state of the operator: watermark and clocks,
// every held window with its version and fired flag, rolling buffers, the
// dedup set and the counters. Restore on a fresh operator with the same
// Window and Rolling resumes exactly where this one stands.
func (o *Operator) Snapshot() []byte {
	b := make([]byte, 0, 64+o.dd.n*19)
	b = append(b, snapMagic...)
	b = append(b, snapVersion)
	for _, d := range []int64{o.size, o.roll, o.ooo, o.lateness, o.idle, o.emit, o.dd.ttl, int64(o.dd.max)} {
		b = binary.AppendVarint(b, d)
	}
	var flags byte
	if o.hasWM {
		flags |= 1
	}
	if o.hasProc {
		flags |= 2
	}
	if o.hasNextEmit {
		flags |= 4
	}
	if o.hasAnchor {
		flags |= 8
	}
	if o.hasWM && !o.hasMaxET {
		flags |= 16
	}
	if o.hopping {
		flags |= 32
	}
	if len(o.refreshed) > 0 {
		flags |= 64
	}
	b = append(b, flags)
	if o.hopping {
		b = binary.AppendVarint(b, o.hop)
	}
	for _, t := range []int64{o.wm, o.maxET, o.proc, o.lastRecord, o.wmAtRecord, o.nextEmit} {
		b = binary.AppendVarint(b, t)
	}
	for _, c := range o.counterList() {
		b = binary.AppendUvarint(b, *c)
	}

	b = binary.AppendUvarint(b, uint64(len(o.buckets)))
	for _, bk := range o.buckets {
		b = binary.AppendVarint(b, bk.start)
		b = appendBool(b, bk.fired)
		b = binary.AppendUvarint(b, uint64(len(bk.wins)))
		ws := slices.Clone(bk.wins)
		slices.SortFunc(ws, func(x, y window) int { return strings.Compare(x.key, y.key) })
		for _, w := range ws {
			b = appendString(b, w.key)
			b = binary.AppendUvarint(b, uint64(w.version))
			b = appendBool(b, w.dirty)
			b = binary.AppendUvarint(b, uint64(w.agg.Count))
			b = appendFloat(b, w.agg.Sum)
			b = appendFloat(b, w.agg.Min)
			b = appendFloat(b, w.agg.Max)
		}
	}

	h, prunable := o.horizon()
	type keyPts struct {
		key string
		pts []point
	}
	var ks []keyPts
	for _, k := range o.keys {
		pts := k.live()
		if prunable {
			pts = pts[after(pts, h):]
		}
		if len(pts) > 0 {
			ks = append(ks, keyPts{k.key, pts})
		}
	}
	slices.SortFunc(ks, func(x, y keyPts) int { return strings.Compare(x.key, y.key) })
	b = binary.AppendUvarint(b, uint64(len(ks)))
	for _, k := range ks {
		b = appendString(b, k.key)
		b = binary.AppendUvarint(b, uint64(len(k.pts)))
		b = binary.AppendVarint(b, k.pts[0].et)
		for i := 1; i < len(k.pts); i++ {
			b = binary.AppendUvarint(b, uint64(k.pts[i].et-k.pts[i-1].et))
		}
		for _, p := range k.pts {
			b = appendFloat(b, p.v)
		}
	}

	es := o.dd.entries()
	b = binary.AppendUvarint(b, uint64(len(es)))
	for _, e := range es {
		b = append(b, e.id[:]...)
	}
	for i, e := range es {
		if i == 0 {
			b = binary.AppendVarint(b, e.at)
		} else {
			b = binary.AppendUvarint(b, uint64(e.at-es[i-1].at))
		}
	}
	if len(o.refreshed) > 0 {
		b = o.appendRefreshed(b)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

func (o *Operator) counterList() []*uint64 {
	return []*uint64{
		&o.n.records, &o.n.accepted, &o.n.duplicates, &o.n.late, &o.n.featureLate,
		&o.n.features, &o.n.earlyPanes, &o.n.onTimePanes, &o.n.latePanes,
		&o.dd.evicted, &o.dd.expired,
	}
}

// Restore replaces the operator's state with a snapshot. The snapshot's
// Window, Hop and Rolling must equal the operator's (they shape the state); the
// other options may differ and the operator's own apply from now on (a
// smaller DedupMaxEntries evicts the oldest ids at once). On error the
// state is unchanged.
func (o *Operator) Restore(snap []byte) error {
	n, err := decodeSnapshot(o.opts, snap)
	if err != nil {
		return err
	}
	*o = *n
	return nil
}

func decodeSnapshot(opts Options, snap []byte) (*Operator, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrSnapshot}, a...)...)
	}
	if len(snap) < len(snapMagic)+1+4 || string(snap[:len(snapMagic)]) != snapMagic {
		return nil, bad("not an operator snapshot")
	}
	body := snap[:len(snap)-4]
	if crc32.ChecksumIEEE(body) != binary.LittleEndian.Uint32(snap[len(snap)-4:]) {
		return nil, bad("checksum mismatch")
	}
	if v := body[len(snapMagic)]; v != snapVersion {
		return nil, bad("version %d, want %d", v, snapVersion)
	}
	o, err := New(opts)
	if err != nil {
		return nil, err
	}
	r := &reader{b: body[len(snapMagic)+1:]}
	var so [8]int64
	for i := range so {
		so[i] = r.varint()
	}
	if r.err == nil && (so[0] != o.size || so[1] != o.roll) {
		return nil, bad("window %v rolling %v, operator has window %v rolling %v",
			durString(so[0]), durString(so[1]), durString(o.size), durString(o.roll))
	}
	flags := r.byte()
	o.hasWM, o.hasProc, o.hasNextEmit = flags&1 != 0, flags&2 != 0, flags&4 != 0
	o.hasAnchor, o.hasMaxET = flags&8 != 0 || o.hasWM, o.hasWM && flags&16 == 0
	if r.err == nil && (flags&^127 != 0 || (flags&16 != 0 && !o.hasWM)) {
		return nil, bad("flags %#x", flags)
	}
	var hop int64 // the snapshot's: 0 for tumbling windows
	if flags&32 != 0 {
		hop = r.varint()
	}
	if want := o.hop; r.err == nil && ((flags&32 != 0) != o.hopping || (o.hopping && hop != want)) {
		if !o.hopping {
			want = 0
		}
		return nil, bad("hop %v, operator has hop %v (0: tumbling)", durString(hop), durString(want))
	}
	for _, t := range []*int64{&o.wm, &o.maxET, &o.proc, &o.lastRecord, &o.wmAtRecord, &o.nextEmit} {
		*t = r.varint()
	}
	for _, c := range o.counterList() {
		*c = r.uvarint()
	}

	nb := r.count(2)
	for range nb {
		if r.err != nil {
			break
		}
		start := r.varint()
		if o.size == 0 || floorTo(start, o.hop) != start {
			return nil, bad("window start %d not aligned to %v", start, durString(o.hop))
		}
		if k := len(o.buckets); k > 0 && o.buckets[k-1].start >= start {
			return nil, bad("window starts out of order")
		}
		bk := &bucket{start: start, end: addSat(start, o.size), fired: r.bool()}
		if r.err == nil && bk.fired != (o.hasWM && bk.end <= o.wm) {
			return nil, bad("window at %d: fired=%v contradicts the watermark", start, bk.fired)
		}
		nw := r.count(28)
		bk.wins = make([]window, 0, nw)
		for range nw {
			w := window{key: r.string(), version: int64(r.uvarint()), dirty: r.bool()}
			w.agg.Count = int64(r.uvarint())
			w.agg.Sum, w.agg.Min, w.agg.Max = r.float(), r.float(), r.float()
			if r.err != nil {
				return nil, bad("%v", r.err)
			}
			w.hash = o.keyHash(w.key)
			if bk.find(w.key, w.hash) >= 0 || w.agg.Count < 1 {
				return nil, bad("window %q at %d repeated or empty", w.key, start)
			}
			i := bk.add(w)
			if bk.fired && w.dirty {
				o.lateDue = append(o.lateDue, lateRef{bk, i}) // a held late pane
			}
		}
		o.buckets = append(o.buckets, bk)
	}

	nk := r.count(11)
	for range nk {
		if r.err != nil {
			break
		}
		k := &rollKey{key: r.string()}
		np := r.count(9)
		if r.err != nil {
			return nil, bad("%v", r.err)
		}
		if np == 0 || o.keys[k.key] != nil {
			return nil, bad("rolling key %q empty or repeated", k.key)
		}
		k.pts = make([]point, np)
		for i := range k.pts {
			if i == 0 {
				k.pts[i].et = r.varint()
			} else {
				d := r.uvarint()
				if d > math.MaxInt64 {
					return nil, bad("rolling time delta overflows")
				}
				k.pts[i].et = addSat(k.pts[i-1].et, int64(d))
			}
		}
		for i := range k.pts {
			k.pts[i].v = r.float()
		}
		o.keys[k.key] = k
	}

	ne := r.count(17)
	es := make([]dedupEntry, ne)
	for i := range es {
		copy(es[i].id[:], r.take(16))
	}
	for i := range es {
		if i == 0 {
			es[i].at = r.varint()
		} else {
			es[i].at = addSat(es[i-1].at, int64(min(r.uvarint(), math.MaxInt64)))
		}
	}
	if flags&64 != 0 {
		o.readRefreshed(r)
	}
	if r.err != nil {
		return nil, bad("%v", r.err)
	}
	if len(r.b) != 0 {
		return nil, bad("%d trailing bytes", len(r.b))
	}
	// add evicts (and counts) the oldest ids if this operator's bound is
	// smaller than the snapshot's.
	for _, e := range es {
		if !o.dd.add(e.id, e.at) {
			return nil, bad("dedup id %v repeated", e.id)
		}
	}
	return o, nil
}

func durString(ns int64) string {
	if ns == math.MaxInt64 {
		return "forever"
	}
	return fmt.Sprint(ns)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendFloat(b []byte, f float64) []byte {
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// reader decodes a snapshot body; the first error sticks and later reads
// return zero values.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("truncated or malformed %s", what)
	}
	r.b = nil
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) take(n int) []byte {
	if n > len(r.b) {
		r.fail("bytes")
		return make([]byte, n)
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) byte() byte { return r.take(1)[0] }

func (r *reader) bool() bool {
	switch r.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	r.fail("bool")
	return false
}

func (r *reader) float() float64 { return math.Float64frombits(binary.LittleEndian.Uint64(r.take(8))) }

func (r *reader) string() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("string")
		return ""
	}
	return string(r.take(int(n)))
}

// count reads an element count and rejects counts that cannot fit in the
// remaining bytes (each element takes at least minSize), so a corrupt
// snapshot cannot make Restore allocate unbounded memory.
func (r *reader) count(minSize int) int {
	n := r.uvarint()
	if n > uint64(len(r.b)/minSize) {
		r.fail("count")
		return 0
	}
	return int(n)
}
