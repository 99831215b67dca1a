package operator

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// step is one input of a workload: a record, or a Tick when tick is set.
type step struct {
	tick bool
	at   time.Time
	r    Record
}

// workload is a deterministic, nasty partition: 40 keys, event times
// drifting forward with jitter, stragglers far behind the watermark,
// redeliveries of earlier ids (some after long gaps), idle stretches and
// ticks.
func workload(seed uint64, n int) []step {
	rng := rand.New(rand.NewPCG(seed, 1))
	var steps []step
	var sent []Record
	proc := t0
	et := t0
	for i := range n {
		proc = proc.Add(time.Duration(rng.IntN(800)) * time.Millisecond)
		if rng.IntN(50) == 0 {
			proc = proc.Add(45 * time.Second) // idle stretch
		}
		if rng.IntN(400) == 0 {
			proc = proc.Add(10 * time.Minute) // outage: dedup entries expire
		}
		if rng.IntN(4) == 0 {
			steps = append(steps, step{tick: true, at: proc})
		}
		if len(sent) > 0 && rng.IntN(12) == 0 {
			r := sent[rng.IntN(len(sent))]
			r.Arrival = proc
			steps = append(steps, step{r: r})
			continue
		}
		et = et.Add(time.Duration(rng.IntN(900)) * time.Millisecond)
		e := et.Add(-time.Duration(rng.IntN(8000)) * time.Millisecond)
		if rng.IntN(15) == 0 {
			e = et.Add(-time.Duration(rng.IntN(150)) * time.Second) // straggler
		}
		r := Record{
			ID: testID(i), Key: fmt.Sprintf("k%02d", rng.IntN(40)), Value: float64(rng.IntN(2000)) / 8,
			EventTime: e, Arrival: proc, Ref: int64(i),
		}
		sent = append(sent, r)
		steps = append(steps, step{r: r})
	}
	return steps
}

var workloadOptions = Options{
	Stream: "s", Window: time.Minute, Rolling: 30 * time.Second, OutOfOrderness: 5 * time.Second,
	AllowedLateness: time.Minute, IdleTimeout: 20 * time.Second, EmitInterval: 10 * time.Second,
	DedupTTL: 3 * time.Minute, DedupMaxEntries: 120,
}

// run feeds steps to o and returns one line per output.
func run(t *testing.T, o *Operator, steps []step) []string {
	t.Helper()
	var lines []string
	var out Out
	for _, s := range steps {
		out.Reset()
		if s.tick {
			o.Tick(s.at, &out)
		} else {
			v := process(t, o, s.r, &out)
			lines = append(lines, fmt.Sprintf("verdict %d %v", s.r.Ref, v))
		}
		for _, f := range out.Features {
			lines = append(lines, fmt.Sprintf("feature %+v", f))
		}
		for _, l := range out.Late {
			lines = append(lines, fmt.Sprintf("late %+v", l))
		}
		for _, p := range out.Panes {
			lines = append(lines, fmt.Sprintf("pane %+v", p))
		}
	}
	return lines
}

// TestSnapshotResume: process part, snapshot, restore into a fresh
// operator, process the rest — the outputs and the final state equal an
// uninterrupted run, for many cut points, with redeliveries straddling the
// cut.
func TestSnapshotResume(t *testing.T) {
	steps := workload(7, 3000)
	whole := mustNew(t, workloadOptions)
	want := run(t, whole, steps)
	final := whole.Snapshot()

	s := whole.Stats()
	if s.Late == 0 || s.Duplicates == 0 || s.LatePanes == 0 || s.EarlyPanes == 0 || s.OnTimePanes == 0 ||
		s.DedupEvicted == 0 || s.FeatureLate == 0 || s.DedupExpired == 0 {
		t.Fatalf("workload does not exercise every path: %+v", s)
	}

	for _, cut := range []int{0, 1, 17, 500, 1234, 2999, len(steps)} {
		a := mustNew(t, workloadOptions)
		got := run(t, a, steps[:cut])
		snap := a.Snapshot()
		b := mustNew(t, workloadOptions)
		if err := b.Restore(snap); err != nil {
			t.Fatalf("cut %d: Restore: %v", cut, err)
		}
		if again := b.Snapshot(); !bytes.Equal(again, snap) {
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
	t.Logf("final snapshot %d bytes, stats %+v", len(final), s)
}

func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("line %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("%d lines, want %d", len(got), len(want))
	}
	return ""
}

func TestSnapshotDeterministic(t *testing.T) {
	steps := workload(3, 800)
	a, b := mustNew(t, workloadOptions), mustNew(t, workloadOptions)
	run(t, a, steps)
	run(t, b, steps)
	if !bytes.Equal(a.Snapshot(), b.Snapshot()) || !bytes.Equal(a.Snapshot(), a.Snapshot()) {
		t.Fatal("same state, different snapshots")
	}
}

func TestRestoreRefuses(t *testing.T) {
	a := mustNew(t, workloadOptions)
	run(t, a, workload(5, 300))
	snap := a.Snapshot()
	before := a.Snapshot()

	other := workloadOptions
	other.Window = 2 * time.Minute
	if err := mustNew(t, other).Restore(snap); !errors.Is(err, ErrSnapshot) || !strings.Contains(err.Error(), "window") {
		t.Errorf("restore with another window: %v", err)
	}
	for n := 0; n < len(snap); n += 1 + n/8 {
		if err := a.Restore(snap[:n]); !errors.Is(err, ErrSnapshot) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	for i := 0; i < len(snap); i += 7 {
		c := bytes.Clone(snap)
		c[i] ^= 0x10
		if err := a.Restore(c); !errors.Is(err, ErrSnapshot) {
			t.Fatalf("flipped byte %d: %v", i, err)
		}
	}
	if !bytes.Equal(a.Snapshot(), before) {
		t.Error("a failed Restore changed the state")
	}
	// A smaller dedup bound keeps the newest ids and counts the evictions.
	small := workloadOptions
	small.DedupMaxEntries = 10
	c := mustNew(t, small)
	if err := c.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if s, sa := c.Stats(), a.Stats(); s.DedupEntries != 10 || s.DedupEvicted != sa.DedupEvicted+uint64(sa.DedupEntries-10) {
		t.Errorf("restored with max 10: %+v (was %+v)", s, sa)
	}
}

// FuzzRestore: no input makes Restore panic or allocate without bound, and
// what it accepts re-encodes stably. The fuzzer supplies the body; the
// checksum is appended here so mutations reach the decoder.
func FuzzRestore(f *testing.F) {
	a, _ := New(workloadOptions)
	var out Out
	for _, s := range workload(9, 200) {
		if s.tick {
			a.Tick(s.at, &out)
		} else {
			_, _ = a.Process(s.r, &out)
		}
	}
	for _, snap := range [][]byte{a.Snapshot(), mustNew(f, workloadOptions).Snapshot()} {
		f.Add(snap[:len(snap)-4])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		b := binary.LittleEndian.AppendUint32(bytes.Clone(body), crc32.ChecksumIEEE(body))
		o, _ := New(workloadOptions)
		if err := o.Restore(b); err != nil {
			return
		}
		again := o.Snapshot()
		o2, _ := New(workloadOptions)
		if err := o2.Restore(again); err != nil || !bytes.Equal(o2.Snapshot(), again) {
			t.Fatalf("re-encoding is not stable: %v", err)
		}
	})
}
