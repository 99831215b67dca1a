package operator

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"reckon/internal/event"
)

// at is hh:mm:ss on t0's day.
func at(h, m, s int) time.Time { return time.Date(2026, 11, 7, h, m, s, 0, time.UTC) }

// TestHopSeedExample: the requirements' hopping example (R-WIN-5a),
// 5-minute windows advancing every minute — 12:00–12:05, 12:01–12:06,
// 12:02–12:07 — with out-of-orderness 0 and allowed lateness 1 minute. An
// event counts in each window starting in (et − 5m, et]; each window fires,
// takes late events and is purged on its own.
func TestHopSeedExample(t *testing.T) {
	o := mustNew(t, Options{Stream: "s", Window: 5 * time.Minute, Hop: time.Minute, AllowedLateness: time.Minute})
	var out Out
	type pane struct {
		start  time.Time
		count  int64
		sum    float64
		v      int64
		timing event.Timing
	}
	panes := func() []pane {
		var ps []pane
		for _, p := range out.Panes {
			if !p.WindowEnd.Equal(p.WindowStart.Add(5 * time.Minute)) {
				t.Fatalf("pane %+v: end is not start + 5m", p)
			}
			ps = append(ps, pane{p.WindowStart, p.Count, p.Sum, p.Version, p.Timing})
		}
		return ps
	}
	step := func(n int, et time.Time, v float64, want Verdict, wantPanes ...pane) {
		t.Helper()
		out.Reset()
		if got := process(t, o, rec(n, "k", et, et, v), &out); got != want {
			t.Fatalf("event %d at %s: verdict %v, want %v", n, et.Format("15:04:05"), got, want)
		}
		if got := panes(); !slices.Equal(got, wantPanes) {
			t.Fatalf("event %d at %s: panes\n %+v\nwant\n %+v", n, et.Format("15:04:05"), got, wantPanes)
		}
	}
	in := Accepted | InWindow
	// e1..e3 count in the five windows each covers; the watermark (the
	// event time) fires the windows ending by then.
	step(1, at(12, 0, 30), 1, in)
	step(2, at(12, 1, 30), 2, in, pane{at(11, 56, 0), 1, 1, 1, event.TimingOnTime})
	step(3, at(12, 2, 30), 4, in, pane{at(11, 57, 0), 2, 3, 1, event.TimingOnTime})
	// The watermark 12:06:10 fires 11:58–12:03 through 12:01–12:06, in
	// start order (each holding what it covers), and purges those ending by
	// 12:05:10 (lateness 1m).
	step(4, at(12, 6, 10), 8, in,
		pane{at(11, 58, 0), 3, 7, 1, event.TimingOnTime},
		pane{at(11, 59, 0), 3, 7, 1, event.TimingOnTime},
		pane{at(12, 0, 0), 3, 7, 1, event.TimingOnTime}, // 12:00–12:05
		pane{at(12, 1, 0), 2, 6, 1, event.TimingOnTime}, // 12:01–12:06
	)
	// 12:00:45 is covered by 11:56–12:01 … 12:00–12:05: all purged. Late.
	out.Reset()
	if v := process(t, o, rec(5, "k", at(12, 0, 45), at(12, 6, 11), 16), &out); v != Late || len(out.Late) != 1 || len(out.Panes) != 0 {
		t.Fatalf("event 5: verdict %v, out %+v; want late", v, out)
	}
	// 12:01:05: only 12:01–12:06 is held (fired): one late pane.
	step(6, at(12, 1, 5), 32, in, pane{at(12, 1, 0), 3, 38, 2, event.TimingLate})
	// 12:03:00: 12:01–12:06 late again; 12:02–12:07 and 12:03–12:08 open.
	step(7, at(12, 3, 0), 64, in, pane{at(12, 1, 0), 4, 102, 3, event.TimingLate})
	// 12:08:00 fires 12:02–12:07 (e3, e4, e7) and 12:03–12:08 (e4, e7).
	step(8, at(12, 8, 0), 128, in,
		pane{at(12, 2, 0), 3, 76, 1, event.TimingOnTime},
		pane{at(12, 3, 0), 2, 72, 1, event.TimingOnTime},
	)
	if s := o.Stats(); s.Late != 1 || s.Accepted != 7 || s.LatePanes != 2 || s.OnTimePanes != 8 {
		t.Errorf("stats %+v", s)
	}
}

// hopOptions is workloadOptions with 1-minute windows every 15 seconds.
var hopOptions = func() Options {
	o := workloadOptions
	o.Hop = 15 * time.Second
	return o
}()

// TestHopStreamEqualsTruth: a hopping operator resumed from its snapshot at
// any cut point produces what an uninterrupted one does (outputs and final
// state); with enough lateness its last pane per window is HoppingTruth's
// aggregate — the one code path for stream and batch.
func TestHopStreamEqualsTruth(t *testing.T) {
	steps := workload(7, 3000)
	whole := mustNew(t, hopOptions)
	want := run(t, whole, steps)
	final := whole.Snapshot()
	if s := whole.Stats(); s.Late == 0 || s.LatePanes == 0 || s.EarlyPanes == 0 || s.OnTimePanes == 0 {
		t.Fatalf("workload does not exercise every path: %+v", s)
	}
	for _, cut := range []int{0, 17, 500, 1234, 2999, len(steps)} {
		a := mustNew(t, hopOptions)
		got := run(t, a, steps[:cut])
		snap := a.Snapshot()
		b := mustNew(t, hopOptions)
		if err := b.Restore(snap); err != nil {
			t.Fatalf("cut %d: Restore: %v", cut, err)
		}
		if !bytes.Equal(b.Snapshot(), snap) {
			t.Fatalf("cut %d: snapshot of restored state differs", cut)
		}
		got = append(got, run(t, b, steps[cut:])...)
		if d := firstDiff(got, want); d != "" {
			t.Fatalf("cut %d: outputs differ from the uninterrupted run: %s", cut, d)
		}
		if !bytes.Equal(b.Snapshot(), final) {
			t.Errorf("cut %d: final state differs", cut)
		}
	}

	// Nothing late: the last pane of every window is the truth, and every
	// window holding an event has the size/hop = 4 windows around it.
	opts := hopOptions
	opts.AllowedLateness, opts.DedupTTL, opts.DedupMaxEntries = time.Hour, Forever, 0
	last, recs := lastPanes(t, mustNew(t, opts), steps)
	truth, err := HoppingTruth(opts.Window, opts.Hop, slices.Values(recs))
	if err != nil {
		t.Fatal(err)
	}
	if len(truth) != len(last) || len(truth) < 1000 {
		t.Fatalf("%d truth windows, %d stream windows", len(truth), len(last))
	}
	// The reference: a naive fold of each unique event into every start s
	// with s ≤ et < s + window, s a multiple of the hop.
	naive := map[string]*event.Agg{}
	seen := map[EventID]bool{}
	for _, r := range recs {
		if seen[r.ID] {
			continue
		}
		seen[r.ID] = true
		et := r.EventTime.UnixNano()
		for s := floorTo(et-int64(opts.Window)+1, int64(opts.Hop)); s <= et; s += int64(opts.Hop) {
			if s+int64(opts.Window) <= et || s > et {
				continue
			}
			k := fmt.Sprintf("%s@%d", r.Key, s)
			if naive[k] == nil {
				naive[k] = &event.Agg{}
			}
			naive[k].Add(r.Value)
		}
	}
	if len(naive) != len(truth) {
		t.Fatalf("%d naive windows, %d truth", len(naive), len(truth))
	}
	for _, w := range truth {
		p := last[event.WindowKey("s", w.Key, w.Start)]
		if p.Count != w.Agg.Count || p.Sum != w.Agg.Sum || p.Min != w.Agg.Min || p.Max != w.Agg.Max {
			t.Errorf("window %s %v: stream %+v, truth %+v", w.Key, w.Start, p, w.Agg)
		}
		if n := naive[fmt.Sprintf("%s@%d", w.Key, w.Start.UnixNano())]; n == nil || n.Count != w.Agg.Count {
			t.Errorf("window %s %v: truth %+v, naive %+v", w.Key, w.Start, w.Agg, n)
		}
	}
}

// TestHopSnapshots: a tumbling operator's snapshot is the bytes it was
// before hopping windows existed (testdata, written by that code); a
// hopping snapshot restores only into an operator with the same hop.
func TestHopSnapshots(t *testing.T) {
	a := mustNew(t, workloadOptions)
	run(t, a, workload(5, 300))
	h, err := os.ReadFile("testdata/tumbling-workload5.snap.hex")
	if err != nil {
		t.Fatal(err)
	}
	want, err := hex.DecodeString(strings.TrimSpace(string(h)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Snapshot(), want) {
		t.Error("a tumbling snapshot changed its bytes")
	}
	same := workloadOptions
	same.Hop = same.Window // equal to the window: tumbling
	if err := mustNew(t, same).Restore(want); err != nil {
		t.Errorf("hop = window refuses a tumbling snapshot: %v", err)
	}

	hop := mustNew(t, hopOptions)
	run(t, hop, workload(5, 300))
	snap := hop.Snapshot()
	other := hopOptions
	other.Hop = 20 * time.Second
	for _, opts := range []Options{other, workloadOptions} {
		if err := mustNew(t, opts).Restore(snap); !errors.Is(err, ErrSnapshot) || !strings.Contains(err.Error(), "hop") {
			t.Errorf("hop %v restores a hop 15s snapshot: %v", opts.Hop, err)
		}
	}
	if err := mustNew(t, hopOptions).Restore(want); !errors.Is(err, ErrSnapshot) || !strings.Contains(err.Error(), "hop") {
		t.Errorf("a hopping operator restores a tumbling snapshot: %v", err)
	}
	if err := mustNew(t, hopOptions).Restore(snap); err != nil {
		t.Error(err)
	}
}

// TestHopOptionsValidate names each bad hop.
func TestHopOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		window, hop time.Duration
		want        string
	}{
		{time.Minute, -time.Second, "hop -1s is negative"},
		{time.Minute, 2 * time.Minute, "longer than the window"},
		{time.Minute, 7 * time.Second, "does not divide the window"},
		{0, time.Second, "without a window"},
	} {
		err := Options{Window: c.window, Hop: c.hop}.Validate()
		if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("window %v hop %v: %v, want %q", c.window, c.hop, err, c.want)
		}
	}
	for _, hop := range []time.Duration{0, time.Minute, 15 * time.Second} {
		if err := (Options{Window: time.Minute, Hop: hop}).Validate(); err != nil {
			t.Errorf("hop %v: %v", hop, err)
		}
	}
}
