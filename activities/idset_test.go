package activities

import (
	"math/rand/v2"
	"testing"
)

// TestChunkDedup: repeats marks exactly the ids seen earlier in the
// chunk, against a map, for chunks from empty to many partitions.
func TestChunkDedup(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var d chunkDedup
	for _, n := range []int{0, 1, 2, 255, 256, 257, 5000, 70_000} {
		d.reset()
		var ids [][16]byte
		for i := range n {
			var id [16]byte
			if i > 0 && rng.IntN(10) == 0 {
				id = ids[rng.IntN(len(ids))] // a repeat
			} else {
				for j := range id {
					id[j] = byte(rng.Uint32())
				}
			}
			if i%1000 == 7 {
				id = [16]byte{} // the zero id is an id too
			}
			ids = append(ids, id)
			d.add(id)
		}
		got := d.repeats()
		seen := map[[16]byte]bool{}
		dups := 0
		for i, id := range ids {
			if got[i] != seen[id] {
				t.Fatalf("n=%d: id %d repeat %v, want %v", n, i, got[i], seen[id])
			}
			if seen[id] {
				dups++
			}
			seen[id] = true
		}
		if n >= 5000 && dups < n/20 {
			t.Fatalf("n=%d: only %d repeats", n, dups)
		}
	}
}

func BenchmarkChunkDedup(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([][16]byte, 83_000)
	for i := range ids {
		for j := range 16 {
			ids[i][j] = byte(rng.Uint32())
		}
	}
	var d chunkDedup
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d.reset()
		for _, id := range ids {
			d.add(id)
		}
		d.repeats()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ids)), "ns/id")
}
