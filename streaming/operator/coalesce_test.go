package operator

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"reckon/internal/event"
)

// TestCoalesceLatePanes: with CoalesceLatePanes every late event still makes
// a pane version, but only FlushLate (or a purge) publishes, the latest per
// window. Against the per-event operator on the same records: every
// published pane equals the per-event pane of that version, versions rise,
// and the last pane of every window is the same — whatever the flush points,
// and across a snapshot taken with panes still held.
func TestCoalesceLatePanes(t *testing.T) {
	opts := Options{Window: time.Minute, OutOfOrderness: 2 * time.Second, AllowedLateness: 3 * time.Minute}
	per := mustNew(t, opts)
	opts.CoalesceLatePanes = true
	co := mustNew(t, opts)
	rng := rand.New(rand.NewPCG(7, 11))
	type pv struct {
		key   string
		start int64
		v     int64
	}
	type fig struct {
		count         int64
		sum, min, max float64
		timing        event.Timing
	}
	figOf := func(p event.Pane) fig { return fig{p.Count, p.Sum, p.Min, p.Max, p.Timing} }
	perPanes := map[pv]fig{}
	last := map[[2]string]event.Pane{}
	var perOut, coOut Out
	collectPer := func() {
		for _, p := range perOut.Panes {
			perPanes[pv{p.Key, p.WindowStart.UnixNano(), p.Version}] = figOf(p)
		}
		perOut.Reset()
	}
	coPublished, lateHeld := 0, 0
	checkCo := func() {
		for _, p := range coOut.Panes {
			k := [2]string{p.Key, p.WindowStart.String()}
			if prev, ok := last[k]; ok && p.Version <= prev.Version {
				t.Fatalf("%s: version %d after %d", k, p.Version, prev.Version)
			}
			if want, ok := perPanes[pv{p.Key, p.WindowStart.UnixNano(), p.Version}]; !ok || want != figOf(p) {
				t.Fatalf("%s v%d: %+v, per-event pane %+v (found %v)", k, p.Version, figOf(p), want, ok)
			}
			last[k] = p
			coPublished++
		}
		coOut.Reset()
	}
	et := 0
	for i := range 4000 {
		et += rng.IntN(3)
		e := et - rng.IntN(150) // some late, some beyond lateness
		r := rec(i, fmt.Sprint("k", rng.IntN(12)), sec(e), sec(et), float64(rng.IntN(100)))
		process(t, per, r, &perOut)
		collectPer()
		process(t, co, r, &coOut)
		lateHeld += len(co.lateDue)
		checkCo()
		switch rng.IntN(40) {
		case 0:
			co.FlushLate(&coOut)
			checkCo()
		case 1: // a snapshot with late panes held survives a restore
			snap := co.Snapshot()
			n, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := n.Restore(snap); err != nil {
				t.Fatal(err)
			}
			co = n
		}
	}
	co.FlushLate(&coOut)
	checkCo()
	perLast := map[[2]string]int64{}
	for k := range perPanes {
		kk := [2]string{k.key, time.Unix(0, k.start).UTC().String()}
		perLast[kk] = max(perLast[kk], k.v)
	}
	for k, v := range perLast {
		if last[k].Version != v {
			t.Errorf("%s: last published version %d, per-event %d", k, last[k].Version, v)
		}
	}
	if lateHeld == 0 || coPublished >= len(perPanes) {
		t.Fatalf("nothing coalesced: %d panes published of %d (held %d)", coPublished, len(perPanes), lateHeld)
	}
	t.Logf("%d windows; %d panes one per late event, %d coalesced", len(perLast), len(perPanes), coPublished)
}
