package operator

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestLookupEqualsRollingTruth (docs/requirements.md R-LOOK-2): random
// traffic with out-of-order, late and duplicate events over a few keys,
// published to a Lookup at random "commits", snapshotted and restored into
// a new operator at random points. At every commit the Lookup answers, for
// every key and random instants, exactly RollingTruth over the events the
// operator accepted for features up to that commit; records processed
// after it (an open transaction an abort could take back) are not counted
// until the next publish.
func TestLookupEqualsRollingTruth(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { lookupVsTruth(t, seed) })
	}
}

func lookupVsTruth(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	opts := Options{Stream: "p", Window: 5 * time.Minute, Rolling: time.Duration(30+rng.IntN(120)) * time.Second,
		OutOfOrderness: 5 * time.Second, AllowedLateness: time.Duration(rng.IntN(90)) * time.Second,
		DedupTTL: time.Hour, DedupMaxEntries: 100000}
	o := mustNew(t, opts)
	l := NewLookup()
	keys := []string{"Putri", "Budi", "Sari", "Agus", "Dewi"}
	accepted := map[string][]Record{} // committed: published
	var pending []Record              // accepted since the last publish
	var sent []Record                 // for duplicates
	var out Out
	et := t0
	n := 0
	checks, late, dups, restores := 0, 0, 0, 0
	for step := range 1500 {
		var r Record
		switch c := rng.Float64(); {
		case c < 0.05 && len(sent) > 0: // a redelivery: same id, same event
			r = sent[rng.IntN(len(sent))]
		case c < 0.15: // late: far behind
			n++
			r = rec(n, keys[rng.IntN(len(keys))], et.Add(-time.Duration(rng.IntN(300))*time.Second), et, float64(rng.IntN(1000)))
		default: // mostly in order, some out of order
			et = et.Add(time.Duration(rng.IntN(4000)) * time.Millisecond)
			n++
			r = rec(n, keys[rng.IntN(len(keys))], et.Add(-time.Duration(rng.IntN(8))*time.Second), et, float64(rng.IntN(1000)))
		}
		sent = append(sent, r)
		v := process(t, o, r, &out)
		out.Reset()
		switch {
		case v.Has(Duplicate):
			dups++
		case v.Has(InFeatures):
			pending = append(pending, r)
		default:
			late++
		}
		if rng.IntN(10) > 0 {
			continue
		}
		// Before the publish: the lookup still answers the last commit.
		checks += checkLookup(t, l, accepted, keys, opts.Rolling, et, rng)
		for _, p := range pending {
			accepted[p.Key] = append(accepted[p.Key], p)
		}
		pending = pending[:0]
		if rng.IntN(8) == 0 { // a restore: the new operator's first publish is a full copy
			o2 := mustNew(t, opts)
			if err := o2.Restore(o.Snapshot()); err != nil {
				t.Fatalf("step %d: restore: %v", step, err)
			}
			o = o2
			restores++
		}
		o.PublishTo(l)
		checks += checkLookup(t, l, accepted, keys, opts.Rolling, et, rng)
	}
	if late == 0 || dups == 0 || restores == 0 || checks < 100 {
		t.Fatalf("traffic too tame: %d late, %d duplicates, %d restores, %d checks", late, dups, restores, checks)
	}
}

// checkLookup compares l with RollingTruth over accepted for every key at
// random instants around now; it returns how many it compared.
func checkLookup(t *testing.T, l *Lookup, accepted map[string][]Record, keys []string, size time.Duration, now time.Time,
	rng *rand.Rand) int {
	t.Helper()
	n := 0
	for _, k := range append(keys, "nobody") {
		for range 3 {
			at := now.Add(time.Duration(rng.IntN(120_000)-60_000) * time.Millisecond)
			got, err := l.At(k, at)
			if errors.Is(err, ErrBeforeLive) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			want := RollingTruth(size, at, accepted[k])
			if got.Agg.Count != want.Count || got.Agg.Sum != want.Sum {
				t.Fatalf("key %s at %v: lookup %d/%g, RollingTruth over the committed events %d/%g",
					k, at, got.Agg.Count, got.Agg.Sum, want.Count, want.Sum)
			}
			if k == "nobody" && got.Known {
				t.Fatal("a key never seen is known")
			}
			n++
		}
	}
	return n
}

// TestLookupConcurrent reads a Lookup from several goroutines while it is
// published into (run with -race): every answer is one of the committed
// states, never a torn one, and readers never see a count go down for an
// instant whose window only gains events in this traffic.
func TestLookupConcurrent(t *testing.T) {
	o := mustNew(t, Options{Stream: "p", Rolling: time.Hour, OutOfOrderness: time.Second, AllowedLateness: time.Hour,
		DedupTTL: time.Hour, DedupMaxEntries: 100000})
	l := NewLookup()
	o.PublishTo(l)
	at := t0.Add(30 * time.Minute)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := int64(0)
			for {
				select {
				case <-stop:
					return
				default:
				}
				r, err := l.At(fmt.Sprint("k", g%2), at)
				if err != nil {
					errs <- err
					return
				}
				// Every event has value 1: sum and count move together.
				if r.Agg.Count < last || r.Agg.Sum != float64(r.Agg.Count) {
					errs <- fmt.Errorf("reader %d: %d/%g after count %d", g, r.Agg.Count, r.Agg.Sum, last)
					return
				}
				last = r.Agg.Count
			}
		}()
	}
	var out Out
	for i := range 20000 {
		process(t, o, rec(i+1, fmt.Sprint("k", i%3), t0.Add(time.Duration(i)*time.Millisecond), t0, 1), &out)
		out.Reset()
		if i%100 == 99 {
			o.PublishTo(l)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if r, _ := l.At("k0", at); r.Agg.Count != 6667 || !r.Known {
		t.Fatalf("k0 after all publishes: %+v, want 6667 events", r)
	}
}

// BenchmarkLookupAt measures one feature lookup in process (Lookup.At, the
// read the HTTP handler makes): 10,000 keys with 60 s rolling buffers of
// payments-like traffic (a handful of events each), a random key per
// lookup, its window ending at the watermark. Each lookup is timed on its
// own: p50-ns and p99-ns are the distribution, ns/op includes the timer.
func BenchmarkLookupAt(b *testing.B) {
	o := mustNew(b, Options{Stream: "p", Rolling: time.Minute, OutOfOrderness: 5 * time.Second,
		DedupTTL: time.Hour, DedupMaxEntries: 1 << 20})
	var out Out
	const keys, events = 10_000, 200_000
	for i := range events {
		et := t0.Add(time.Duration(i) * time.Millisecond) // 1,000 events/s of event time
		process(b, o, rec(i+1, fmt.Sprint("user", (i*7919)%keys), et, et, float64(1000+i%5000)), &out)
		out.Reset()
	}
	l := NewLookup()
	o.PublishTo(l)
	at := t0.Add(events * time.Millisecond)
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprint("user", i)
	}
	lat := make([]int64, 0, b.N)
	rng := rand.New(rand.NewPCG(1, 1))
	counted := int64(0)
	b.ResetTimer()
	for range b.N {
		k := names[rng.IntN(keys)]
		t := time.Now()
		r, err := l.At(k, at)
		lat = append(lat, int64(time.Since(t)))
		if err != nil {
			b.Fatal(err)
		}
		counted += r.Agg.Count
	}
	b.StopTimer()
	if counted == 0 {
		b.Fatal("every lookup empty")
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2]), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100]), "p99-ns")
	b.ReportMetric(float64(counted)/float64(b.N), "events/lookup")
}

// BenchmarkLookupPublish measures PublishTo, the run loop's step after each
// commit, on a partition with 1,000,000 rolling keys: full is the copy
// after a restore (every key), commit the copy of the 2,000 keys one
// transaction touched, sweep a commit after the horizon swept keys (the
// copy's keys scanned outside the lock, the swept ones deleted under it).
// Readers wait only for the swap or the map updates under the lock: the
// copies, and the new map after a big sweep, are made before it.
func BenchmarkLookupPublish(b *testing.B) {
	const keys = 1_000_000
	opts := Options{Stream: "p", Rolling: time.Minute, OutOfOrderness: time.Second, DedupTTL: time.Hour,
		DedupMaxEntries: 4 << 20}
	build := func() (*Operator, int) {
		o := mustNew(b, opts)
		var out Out
		for i := range keys {
			et := t0.Add(time.Duration(i) * 50 * time.Microsecond) // 1M keys in 50 s of event time
			process(b, o, rec(i+1, fmt.Sprint("user", i), et, et, 1), &out)
			out.Reset()
		}
		return o, keys
	}
	o, n := build()
	b.Run("full", func(b *testing.B) {
		b.StopTimer()
		for range b.N {
			l := NewLookup()
			o2 := mustNew(b, opts)
			if err := o2.Restore(o.Snapshot()); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			o2.PublishTo(l)
			b.StopTimer()
			if l.Keys() != n {
				b.Fatalf("%d keys copied of %d", l.Keys(), n)
			}
		}
	})
	l := NewLookup()
	o.PublishTo(l)
	var out Out
	next := n
	b.Run("commit", func(b *testing.B) {
		b.StopTimer()
		for range b.N {
			for j := range 2000 {
				et := t0.Add(50*time.Second + time.Duration(next)*time.Microsecond)
				process(b, o, rec(next+1, fmt.Sprint("user", (next*7919+j)%keys), et, et, 1), &out)
				out.Reset()
				next++
			}
			b.StartTimer()
			o.PublishTo(l)
			b.StopTimer()
		}
	})
	b.Run("sweep", func(b *testing.B) {
		b.StopTimer()
		for range b.N {
			// Two minutes later: the horizon passes most keys' only event.
			et := t0.Add(3*time.Minute + time.Duration(next)*time.Microsecond)
			process(b, o, rec(next+1, "late-comer", et, et, 1), &out)
			out.Reset()
			next++
			before := l.Keys()
			b.StartTimer()
			o.PublishTo(l)
			b.StopTimer()
			b.ReportMetric(float64(before-l.Keys()), "keys-dropped")
		}
	})
}

// TestRefresh (R-LOOK-5): a too-late event folded back counts in lookups
// and in the features of later events, once per event id, across a
// snapshot and restore; one whose event time the rolling horizon passed
// is refused.
func TestRefresh(t *testing.T) {
	// Rolling 10 minutes, lateness 30 s: an event a minute late is too
	// late for features but still inside the live rolling window.
	opts := Options{Stream: "p", Rolling: 10 * time.Minute, OutOfOrderness: time.Second, AllowedLateness: 30 * time.Second,
		DedupTTL: time.Hour, DedupMaxEntries: 1000}
	o := mustNew(t, opts)
	var out Out
	process(t, o, rec(1, "Budi", sec(0), sec(0), 100), &out)
	process(t, o, rec(2, "Budi", sec(120), sec(120), 200), &out)
	late := rec(3, "Budi", sec(60), sec(121), 50) // wm 119 − 30 s: too late
	if v := process(t, o, late, &out); v.Has(InFeatures) || len(out.Late) != 1 {
		t.Fatalf("the event a minute late: verdict %v, %d late outputs", v, len(out.Late))
	}
	out.Reset()
	l := NewLookup()
	o.PublishTo(l)
	if r, _ := l.At("Budi", sec(121)); r.Agg.Count != 2 {
		t.Fatalf("before the refresh: %d events", r.Agg.Count)
	}
	if v := o.Refresh(late.ID, late.Key, late.EventTime, late.Value); v != RefreshApplied {
		t.Fatalf("refresh: %v", v)
	}
	if v := o.Refresh(late.ID, late.Key, late.EventTime, late.Value); v != RefreshDuplicate {
		t.Fatalf("the same id again: %v", v)
	}
	o.PublishTo(l)
	if r, _ := l.At("Budi", sec(121)); r.Agg.Count != 3 || r.Agg.Sum != 350 {
		t.Fatalf("after the refresh: %d/%g", r.Agg.Count, r.Agg.Sum)
	}
	// A restored operator remembers the id; the next feature counts it.
	o2 := mustNew(t, opts)
	if err := o2.Restore(o.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if v := o2.Refresh(late.ID, late.Key, late.EventTime, late.Value); v != RefreshDuplicate {
		t.Fatalf("after a restore, the same id: %v", v)
	}
	process(t, o2, rec(4, "Budi", sec(130), sec(130), 1), &out)
	f := out.Features[len(out.Features)-1]
	want := RollingTruth(opts.Rolling, sec(130), []Record{rec(1, "Budi", sec(0), sec(0), 100),
		rec(2, "Budi", sec(120), sec(120), 200), late, rec(4, "Budi", sec(130), sec(130), 1)})
	if f.Count != want.Count || f.Sum != want.Sum {
		t.Fatalf("the next feature: %d/%g, RollingTruth with the refreshed event %d/%g", f.Count, f.Sum, want.Count, want.Sum)
	}
	// Far past: the horizon (wm − 30 s − 10 min) passed it.
	if v := o2.Refresh(testID(99), "Budi", sec(-3600), 1); v != RefreshOutside {
		t.Fatalf("an event an hour old: %v", v)
	}
	if !bytes.Equal(o2.Snapshot(), mustRestore(t, opts, o2.Snapshot()).Snapshot()) {
		t.Fatal("snapshot with refreshed ids does not round-trip")
	}
}

func mustRestore(t *testing.T, opts Options, snap []byte) *Operator {
	t.Helper()
	o := mustNew(t, opts)
	if err := o.Restore(snap); err != nil {
		t.Fatal(err)
	}
	return o
}
