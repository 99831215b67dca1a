package operator

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"reckon/internal/event"
)

// TestTruth: the recompute's answer is independent of arrival order, counts
// every unique event (late ones included) once, and equals a naive fold.
func TestTruth(t *testing.T) {
	var recs []Record
	for _, s := range workload(11, 2000) {
		if !s.tick {
			recs = append(recs, s.r)
		}
	}
	type wk struct {
		key   string
		start int64
	}
	naive := map[wk]*event.Agg{}
	seen := map[EventID]bool{}
	for _, r := range recs {
		if seen[r.ID] {
			continue
		}
		seen[r.ID] = true
		k := wk{r.Key, floorTo(r.EventTime.UnixNano(), int64(time.Minute))}
		if naive[k] == nil {
			naive[k] = &event.Agg{}
		}
		naive[k].Add(r.Value)
	}
	got, err := Truth(time.Minute, slices.Values(recs))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(naive) {
		t.Fatalf("%d windows, want %d", len(got), len(naive))
	}
	for _, w := range got {
		if a := naive[wk{w.Key, w.Start.UnixNano()}]; a == nil || *a != w.Agg || w.Version != 0 {
			t.Errorf("window %+v, want %+v", w, a)
		}
	}
	// Reversed order, first occurrence of each id kept first: same truth.
	var uniq []Record
	seen = map[EventID]bool{}
	for _, r := range recs {
		if !seen[r.ID] {
			seen[r.ID] = true
			uniq = append(uniq, r)
		}
	}
	rand.New(rand.NewPCG(1, 1)).Shuffle(len(uniq), func(i, j int) { uniq[i], uniq[j] = uniq[j], uniq[i] })
	again, _ := Truth(time.Minute, slices.Values(uniq))
	for i := range again {
		if again[i].Key != got[i].Key || !again[i].Start.Equal(got[i].Start) || again[i].Agg.Count != got[i].Agg.Count ||
			again[i].Agg.Min != got[i].Agg.Min || again[i].Agg.Max != got[i].Agg.Max {
			t.Fatalf("order changed the truth: %+v vs %+v", again[i], got[i])
		}
	}
}

// TestStreamEqualsTruthWhenNothingIsLate: with enough lateness the stream's
// last pane per window is the truth — the one code path.
func TestStreamEqualsTruthWhenNothingIsLate(t *testing.T) {
	steps := workload(13, 1500)
	opts := workloadOptions
	opts.AllowedLateness = time.Hour
	opts.DedupTTL, opts.DedupMaxEntries = Forever, 0
	o := mustNew(t, opts)
	last, recs := lastPanes(t, o, steps)
	if o.Stats().Late != 0 {
		t.Fatalf("late events with 1h lateness: %+v", o.Stats())
	}
	truth, _ := Truth(time.Minute, slices.Values(recs))
	if len(truth) != len(last) {
		t.Fatalf("%d truth windows, %d stream windows", len(truth), len(last))
	}
	for _, w := range truth {
		p := last[event.WindowKey("s", w.Key, w.Start)]
		if p.Count != w.Agg.Count || p.Sum != w.Agg.Sum || p.Min != w.Agg.Min || p.Max != w.Agg.Max {
			t.Errorf("window %s %v: stream %+v, truth %+v", w.Key, w.Start, p, w.Agg)
		}
	}
}

// TestRollSumEqualsRollAgg: the operator's feature (len and rollSum of the
// window) is bit for bit the count and sum RollingTruth folds, on windows
// of random values whose float sums depend on the order of addition.
func TestRollSumEqualsRollAgg(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 200 {
		pts := make([]point, n)
		for i := range pts {
			pts[i] = point{int64(i / 3), (r.Float64() - 0.3) * math.Pow(10, float64(r.IntN(12)-4))}
		}
		for range 5 {
			at, size := r.Int64N(int64(n/3+2)), r.Int64N(int64(n/3+2))+1
			a := rollAgg(pts, at, size)
			w := rollWindow(pts, at, size)
			if s := rollSum(w); int64(len(w)) != a.Count || math.Float64bits(s) != math.Float64bits(a.Sum) {
				t.Fatalf("%d points, window (%d, %d]: count %d sum %v, rollAgg %d %v", n, at-size, at, len(w), s, a.Count, a.Sum)
			}
		}
	}
}

// lastPanes runs steps through o, then EmitEarly, and returns the last
// pane of every window by record key and the records processed.
func lastPanes(t *testing.T, o *Operator, steps []step) (map[string]event.Pane, []Record) {
	t.Helper()
	last := map[string]event.Pane{}
	var recs []Record
	var out Out
	for _, s := range steps {
		out.Reset()
		if s.tick {
			o.Tick(s.at, &out)
		} else {
			process(t, o, s.r, &out)
			recs = append(recs, s.r)
		}
		for _, p := range out.Panes {
			last[p.RecordKey()] = p
		}
	}
	out.Reset()
	o.EmitEarly(&out)
	for _, p := range out.Panes {
		last[p.RecordKey()] = p
	}
	return last, recs
}
