package activities

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
)

// chunkDedup finds the repeated event ids (UUID bytes) of one recompute
// chunk: the dedup of operator.Truth (first wins) without its TTL ring.
// The ids of the chunk are collected in order (add) and decided together
// (repeats). One hash set of a whole chunk (~100 K ids: 2 MB and more)
// missed the cache on most inserts (~100 ns each on a loaded machine);
// partitioned by hash into sets of a few thousand ids, every probe stays
// in cache and the rest of the work is sequential (~15 ns an id). The
// hash is keyed with random seeds: ids are producer-chosen. The zero value
// is ready to use.
type chunkDedup struct {
	seed   [2]uint64
	seeded bool
	ids    []idAt // in chunk order
	// Scratch of repeats, kept across chunks.
	starts []int32  // per partition, its first index in parts
	next   []int32  // per partition, where its next id goes
	parts  []idAt   // ids grouped by partition, each in chunk order
	table  []uint32 // one partition's set: index in the partition + 1
	dup    []bool   // by position in the chunk
}

// idAt is an id, its hash and its position in the chunk.
type idAt struct {
	id  [16]byte
	h   uint64
	pos int32
}

// partitionIDs is the mean number of ids per partition: its set (8K
// slots of 4 bytes) and its ids stay in the second-level cache.
const partitionIDs = 4096

// reset empties the chunk.
func (d *chunkDedup) reset() { d.ids = d.ids[:0] }

// add appends the chunk's next id.
func (d *chunkDedup) add(id [16]byte) {
	if !d.seeded {
		ms := maphash.MakeSeed()
		d.seed = [2]uint64{maphash.Comparable(ms, 0) | 1, maphash.Comparable(ms, 1) | 1}
		d.seeded = true
	}
	hi, lo := bits.Mul64(binary.LittleEndian.Uint64(id[:8])^d.seed[0], binary.LittleEndian.Uint64(id[8:])^d.seed[1])
	d.ids = append(d.ids, idAt{id: id, h: hi ^ lo, pos: int32(len(d.ids))})
}

// repeats reports, by position, whether the id added there equals one
// added before it. The slice is valid until the next reset.
func (d *chunkDedup) repeats() []bool {
	n := len(d.ids)
	d.dup = resized(d.dup, n)
	// Partition by the hash's top bits, stably: chunk order within each.
	bitsN := 0
	for (1<<bitsN)*partitionIDs < n {
		bitsN++
	}
	np := 1 << bitsN
	part := func(h uint64) uint64 { return h >> (63 - bitsN) >> 1 } // bitsN = 0: 0
	d.starts = resized(d.starts, np+1)
	for i := range d.ids {
		d.starts[part(d.ids[i].h)+1]++
	}
	for p := 1; p <= np; p++ {
		d.starts[p] += d.starts[p-1]
	}
	d.next = append(d.next[:0], d.starts[:np]...)
	if cap(d.parts) < n {
		d.parts = make([]idAt, n)
	}
	d.parts = d.parts[:n]
	for i := range d.ids {
		p := part(d.ids[i].h)
		d.parts[d.next[p]] = d.ids[i]
		d.next[p]++
	}
	// Each partition: an open-addressing set by the hash's low bits, at
	// most half full.
	for p := range np {
		g := d.parts[d.starts[p]:d.starts[p+1]]
		size := 16
		for size < 2*len(g) {
			size *= 2
		}
		d.table = resized(d.table, size)
		mask := uint64(size - 1)
		for j := range g {
			for k := g[j].h & mask; ; k = (k + 1) & mask {
				if d.table[k] == 0 {
					d.table[k] = uint32(j + 1)
					break
				}
				if o := &g[d.table[k]-1]; o.h == g[j].h && o.id == g[j].id {
					d.dup[g[j].pos] = true // the first, earlier in the chunk, stays
					break
				}
			}
		}
	}
	return d.dup
}

// resized returns s with length n, zeroed, reusing its memory.
func resized[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}
