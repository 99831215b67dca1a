package activities

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
)

// eventIDSet is the set of event ids (UUID bytes) of one recompute chunk:
// the dedup of operator.Truth without its TTL ring. The zero value is an
// empty set.
//
// The ids sit in a dense slice in insertion order; the index is an open
// addressing table (linear probing, at most half full) of 32-bit slots
// holding a fingerprint of the id's hash, with the id's position in a
// parallel slice that is read only when a fingerprint matches. A chunk's
// ~100 K ids need a 512 KB table, which stays in cache where a table of
// the ids themselves (2 MB and more) missed it on most inserts. The hash
// is keyed per set with random seeds: ids are producer-chosen.
type eventIDSet struct {
	ids [][16]byte
	// slots hold a fingerprint of the id's hash (high 32 bits, never 0)
	// and the id's index in ids (low 32 bits); 0 is empty.
	slots []uint64
	seed  [2]uint64
}

// reset empties the set, keeping its memory.
func (s *eventIDSet) reset() {
	if s.slots == nil {
		ms := maphash.MakeSeed()
		s.seed = [2]uint64{maphash.Comparable(ms, 0) | 1, maphash.Comparable(ms, 1) | 1}
		s.slots = make([]uint64, 1<<12)
	}
	clear(s.slots)
	s.ids = s.ids[:0]
}

func (s *eventIDSet) hash(id *[16]byte) uint64 {
	hi, lo := bits.Mul64(binary.LittleEndian.Uint64(id[:8])^s.seed[0], binary.LittleEndian.Uint64(id[8:])^s.seed[1])
	return hi ^ lo
}

// add inserts id and reports whether it was new.
func (s *eventIDSet) add(id [16]byte) bool {
	if s.slots == nil {
		s.reset()
	}
	if 2*(len(s.ids)+1) > len(s.slots) {
		s.grow()
	}
	h := s.hash(&id)
	f := (h | 1<<32) &^ (1<<32 - 1) // the fingerprint: high bits, never 0
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		v := s.slots[i]
		if v == 0 {
			s.slots[i] = f | uint64(len(s.ids))
			s.ids = append(s.ids, id)
			return true
		}
		if v&^(1<<32-1) == f && s.ids[uint32(v)] == id {
			return false
		}
	}
}

// grow doubles the table and places every id again.
func (s *eventIDSet) grow() {
	s.slots = make([]uint64, 2*len(s.slots))
	mask := uint64(len(s.slots) - 1)
	for p := range s.ids {
		h := s.hash(&s.ids[p])
		i := h & mask
		for s.slots[i] != 0 {
			i = (i + 1) & mask
		}
		s.slots[i] = (h|1<<32)&^(1<<32-1) | uint64(p)
	}
}
