package operator

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"math/bits"
	"unsafe"
)

// dedup remembers event ids for a TTL of processing time, bounded in size.
//
// Entries live in a FIFO ring in insertion order; since the processing clock
// never goes back, that is also expiry order, so both expiry and eviction
// pop from the head. The TTL runs from first sight: a duplicate does not
// extend it (the redelivery bound is measured from the original delivery).
//
// The index is an open-addressing table with linear probing and
// backward-shift deletion, not a Go map: a set that is full and evicts on
// every insert is pure churn, and Go's maps degrade under churn (measured:
// ~700 ns per insert+delete at 1M entries, against ~100 ns here). A slot
// holds the low 32 bits of the id's hash and the ring position + 1 (0 is
// empty); the table is kept at most half full.
//
// At a million ids the table (16 MB) is far out of cache, and each insert
// into a full set touches two random slots: the new id's and the evicted
// id's. Both are prefetched: the evicted one is known an insert ahead (the
// ring's head), and Operator.Process starts loading the new one's before
// its window lookup. Alternatives measured and dropped (2026-11-29, this
// machine): lazy deletion with a sweeping cleaner (no index access on
// eviction, but the sweep cost as much as the miss it saved) and
// transparent huge pages for the table (slower).
type dedup struct {
	ttl int64 // nanoseconds; math.MaxInt64 never expires
	max int

	ring []dedupEntry // circular; n entries from head
	head int
	n    int

	seed  [4]uint64 // per-set random hash keys: ids are producer-chosen
	slots []uint64
	mask  uint32

	evicted, expired uint64
}

type dedupEntry struct {
	id EventID
	at int64 // processing time first seen
}

// maxDedupEntries keeps ring positions within a slot's 32 bits.
const maxDedupEntries = math.MaxUint32 - 1

func (d *dedup) init(ttl int64, max int) {
	d.ttl, d.max = ttl, min(max, maxDedupEntries)
	ms := maphash.MakeSeed()
	for i := range d.seed {
		d.seed[i] = maphash.Comparable(ms, i) | 1
	}
	d.ring, d.head, d.n = nil, 0, 0
	d.resize(16)
}

// hash is two rounds of the folded 64×64→128 multiply (wyhash's mixer)
// over the id's halves with random keys: a few ns, where maphash costs ~15.
func (d *dedup) hash(id EventID) uint32 {
	x := mum(binary.LittleEndian.Uint64(id[:8])^d.seed[0], binary.LittleEndian.Uint64(id[8:])^d.seed[1])
	return uint32(mum(x^d.seed[2], d.seed[3]))
}

func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// find returns the slot holding id, or -1.
func (d *dedup) find(id *EventID, h uint32) int {
	for i := h & d.mask; ; i = (i + 1) & d.mask {
		s := d.slots[i]
		if s == 0 {
			return -1
		}
		if uint32(s>>32) == h && d.ring[uint32(s)-1].id == *id {
			return int(i)
		}
	}
}

func (d *dedup) place(h uint32, pos int) {
	i := h & d.mask
	for d.slots[i] != 0 {
		i = (i + 1) & d.mask
	}
	d.slots[i] = uint64(h)<<32 | uint64(pos+1)
}

// remove empties slot i, shifting later entries of the probe run back so
// lookups never need tombstones.
func (d *dedup) remove(i uint32) {
	for j := (i + 1) & d.mask; d.slots[j] != 0; j = (j + 1) & d.mask {
		home := uint32(d.slots[j]>>32) & d.mask
		if (j-home)&d.mask >= (j-i)&d.mask {
			d.slots[i] = d.slots[j]
			i = j
		}
	}
	d.slots[i] = 0
}

// add records id at now and reports whether it was new.
func (d *dedup) add(id EventID, now int64) bool { return d.addHashed(&id, d.hash(id), now) }

// prefetch starts loading the index slot where a lookup of an id with hash
// h begins, so the caller can do other work while it arrives. A table that
// fits a core's cache gains nothing from it, so then it does nothing.
func (d *dedup) prefetch(h uint32) {
	if len(d.slots) > prefetchMinSlots {
		prefetch(unsafe.Pointer(&d.slots[h&d.mask]))
	}
}

// prefetchMinSlots is the table size (2 MiB) above which prefetch acts.
const prefetchMinSlots = 1 << 18

// addHashed is add for an id whose hash the caller has computed.
func (d *dedup) addHashed(id *EventID, h uint32, now int64) bool {
	if d.find(id, h) >= 0 {
		return false
	}
	for d.n >= d.max {
		d.pop()
		d.evicted++
	}
	if d.n == len(d.ring) {
		d.grow()
	}
	pos := d.head + d.n
	if pos >= len(d.ring) {
		pos -= len(d.ring)
	}
	d.ring[pos] = dedupEntry{*id, now}
	d.n++
	d.place(h, pos)
	if d.n >= d.max && len(d.slots) > prefetchMinSlots {
		// The next insert evicts the head, whose slot is as far out of
		// cache as any: fetch it now, so the eviction does not wait for it.
		d.prefetch(d.hash(d.ring[d.head].id))
	}
	return true
}

// grow doubles the ring (up to max), which moves every entry, so the index
// is rebuilt; amortised O(1) per entry, and never once the set is full.
func (d *dedup) grow() {
	ring := make([]dedupEntry, min(max(16, 2*len(d.ring)), d.max))
	d.copyTo(ring)
	d.ring, d.head = ring, 0
	d.resize(len(ring))
	for pos := range d.n {
		d.place(d.hash(d.ring[pos].id), pos)
	}
}

// resize empties the index and sizes it for capacity entries at load ≤ ½.
func (d *dedup) resize(capacity int) {
	size := 1 << bits.Len(uint(2*capacity-1))
	d.slots = make([]uint64, size)
	d.mask = uint32(size - 1)
}

// copyTo copies the entries in FIFO order into dst (len(dst) ≥ d.n).
func (d *dedup) copyTo(dst []dedupEntry) {
	k := copy(dst, d.ring[d.head:min(d.head+d.n, len(d.ring))])
	copy(dst[k:d.n], d.ring[:d.n-k])
}

func (d *dedup) pop() {
	e := &d.ring[d.head]
	if i := d.find(&e.id, d.hash(e.id)); i >= 0 {
		d.remove(uint32(i))
	}
	*e = dedupEntry{}
	d.head++
	if d.head == len(d.ring) {
		d.head = 0
	}
	d.n--
}

// expire forgets entries first seen at or before now − ttl.
func (d *dedup) expire(now int64) {
	if d.ttl == math.MaxInt64 {
		return
	}
	lim := subSat(now, d.ttl)
	for d.n > 0 && d.ring[d.head].at <= lim {
		d.pop()
		d.expired++
	}
}

// entries returns the entries in FIFO order (for snapshots and tests).
func (d *dedup) entries() []dedupEntry {
	out := make([]dedupEntry, d.n)
	d.copyTo(out)
	return out
}
