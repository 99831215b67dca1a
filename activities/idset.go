package activities

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
)

// chunkDedup finds the repeated event ids (UUID bytes) of one recompute
// chunk: the dedup of operator.Truth (first wins) without its TTL ring.
// The ids of the chunk are collected in order (add) and decided together
// (repeats): a hash set of a whole chunk (~100 K ids, 2 MB and more)
// missed the cache on most inserts, where partitioning the ids by hash
// into sets of a few hundred keeps every probe in the first-level cache
// and the rest of the work sequential. The hash is keyed per value with
// random seeds: ids are producer-chosen. The zero value is ready to use.
type chunkDedup struct {
	seed   [2]uint64
	seeded bool
	ids    [][16]byte
	// Scratch of repeats, kept across chunks.
	starts []int32  // per partition, its first index in parts
	next   []int32  // per partition, where its next id goes
	parts  []idAt   // ids grouped by partition, each in chunk order
	table  []uint32 // one partition's set: index in the partition + 1
	dup    []bool   // by position in ids
}

// idAt is an id and its position in the chunk.
type idAt struct {
	id  [16]byte
	pos int32
}

// reset empties the chunk.
func (d *chunkDedup) reset() { d.ids = d.ids[:0] }

// add appends the chunk's next id.
func (d *chunkDedup) add(id [16]byte) { d.ids = append(d.ids, id) }

func (d *chunkDedup) hash(id *[16]byte) uint64 {
	if !d.seeded {
		ms := maphash.MakeSeed()
		d.seed = [2]uint64{maphash.Comparable(ms, 0) | 1, maphash.Comparable(ms, 1) | 1}
		d.seeded = true
	}
	hi, lo := bits.Mul64(binary.LittleEndian.Uint64(id[:8])^d.seed[0], binary.LittleEndian.Uint64(id[8:])^d.seed[1])
	return hi ^ lo
}

// partitionIDs is the mean number of ids per partition.
const partitionIDs = 256

// repeats reports, by position, whether the id added there equals one
// added before it. The slice is valid until the next reset.
func (d *chunkDedup) repeats() []bool {
	n := len(d.ids)
	d.dup = resized(d.dup, n)
	if n < 2 {
		return d.dup
	}
	// Partition by the hash's top bits (stable: chunk order within each).
	shift := uint(64)
	for np := 1; np*partitionIDs < n; np *= 2 {
		shift--
	}
	np := 1 << (64 - shift)
	if shift == 64 {
		np = 1
	}
	part := func(id *[16]byte) int {
		if shift == 64 {
			return 0
		}
		return int(d.hash(id) >> shift)
	}
	d.starts = resized(d.starts, np+1)
	for i := range d.ids {
		d.starts[part(&d.ids[i])+1]++
	}
	for p := 1; p <= np; p++ {
		d.starts[p] += d.starts[p-1]
	}
	if cap(d.parts) < n {
		d.parts = make([]idAt, n)
	}
	d.parts = d.parts[:n]
	d.next = append(d.next[:0], d.starts[:np]...)
	for i := range d.ids {
		p := part(&d.ids[i])
		d.parts[d.next[p]] = idAt{d.ids[i], int32(i)}
		d.next[p]++
	}
	// Each partition: a small open-addressing set, at most half full.
	for p := range np {
		g := d.parts[d.starts[p]:d.starts[p+1]]
		size := 16
		for size < 2*len(g) {
			size *= 2
		}
		if cap(d.table) < size {
			d.table = make([]uint32, size)
		}
		t := d.table[:size]
		clear(t)
		mask := uint64(size - 1)
		for j := range g {
			for k := d.hash(&g[j].id) & mask; ; k = (k + 1) & mask {
				if t[k] == 0 {
					t[k] = uint32(j + 1)
					break
				}
				if g[t[k]-1].id == g[j].id {
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
