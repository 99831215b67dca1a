package operator

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"reckon/internal/event"
)

func TestOptionsValidate(t *testing.T) {
	err := Options{Window: -1, Rolling: -1, DedupMaxEntries: -1}.Validate()
	if !errors.Is(err, ErrOptions) {
		t.Fatalf("Validate = %v, want ErrOptions", err)
	}
	if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != 3 {
		t.Errorf("Validate reported %d problems, want all 3: %v", n, err)
	}
	if _, err := New(Options{IdleTimeout: -time.Second}); !errors.Is(err, ErrOptions) {
		t.Errorf("New = %v, want ErrOptions", err)
	}
	o := mustNew(t, Options{})
	if got := o.Options(); got.DedupTTL != 24*time.Hour || got.DedupMaxEntries != 1_000_000 {
		t.Errorf("defaults %+v", got)
	}
}

func TestBadRecord(t *testing.T) {
	o := mustNew(t, Options{Window: time.Minute})
	var out Out
	for _, r := range []Record{
		{Value: math.NaN(), EventTime: t0, Arrival: t0},
		{Value: math.Inf(1), EventTime: t0, Arrival: t0},
		{EventTime: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), Arrival: t0},
		{EventTime: t0, Arrival: time.Time{}},
	} {
		if _, err := o.Process(r, &out); !errors.Is(err, ErrRecord) {
			t.Errorf("Process(%+v) = %v, want ErrRecord", r, err)
		}
	}
	if s := o.Stats(); s.Records != 0 || out.Len() != 0 {
		t.Errorf("bad records changed state: %+v %+v", s, out)
	}
}

func TestWatermark(t *testing.T) {
	o := mustNew(t, Options{Window: time.Minute, OutOfOrderness: 5 * time.Second})
	if _, ok := o.Watermark(); ok || o.WatermarkLag() != 0 {
		t.Fatal("watermark before the first record")
	}
	var out Out
	process(t, o, rec(1, "a", sec(100), sec(130), 1), &out)
	if wm, ok := o.Watermark(); !ok || !wm.Equal(sec(95)) {
		t.Errorf("wm %v %v, want %v", wm, ok, sec(95))
	}
	if lag := o.WatermarkLag(); lag != 35*time.Second {
		t.Errorf("lag %v, want 35s", lag)
	}
	// An older event never moves the watermark back.
	process(t, o, rec(2, "a", sec(97), sec(131), 1), &out)
	if wm, _ := o.Watermark(); !wm.Equal(sec(95)) {
		t.Errorf("wm %v after an older event", wm)
	}
}

// TestCombinedLateRule pins the behaviour when features and windows disagree.
// A future-dated event (occurred_at ahead of its record timestamp, within
// the gate's skew) is counted in its window but moves the watermark only
// to its record timestamp − out_of_orderness: it cannot fire the on-time
// pane of a window that has not ended by the broker's clock.
func TestWatermarkNeverPassesArrival(t *testing.T) {
	o := mustNew(t, Options{Window: time.Minute, OutOfOrderness: 5 * time.Second, AllowedLateness: time.Minute})
	var out Out
	process(t, o, rec(1, "a", sec(10), sec(10), 1), &out)
	// Dated 3 minutes ahead of its arrival at 20 s.
	if v := process(t, o, rec(2, "a", sec(200), sec(20), 2), &out); !v.Has(InWindow) {
		t.Fatalf("future-dated event: verdict %v, want it in its window", v)
	}
	if wm, _ := o.Watermark(); !wm.Equal(sec(15)) {
		t.Errorf("wm %v after the future-dated event, want %v (its arrival − ooo)", wm, sec(15))
	}
	for _, p := range out.Panes {
		t.Errorf("pane %s for [%v, %v) fired before the broker's clock reached its end", p.Timing, p.WindowStart, p.WindowEnd)
	}
	// An ordinary event arriving at 70 s closes [0, 60 s): one on-time pane,
	// window [180 s, 240 s) still open, its event counted.
	process(t, o, rec(3, "a", sec(70), sec(70), 4), &out)
	if len(out.Panes) != 1 || out.Panes[0].Timing != event.TimingOnTime || !out.Panes[0].WindowEnd.Equal(sec(60)) || out.Panes[0].Count != 1 {
		t.Fatalf("panes %+v, want one on-time pane for [0, 60 s) with count 1", out.Panes)
	}
	if ws := o.Windows(); len(ws) != 3 || !ws[2].Start.Equal(sec(180)) || ws[2].Agg.Sum != 2 {
		t.Errorf("windows %+v, want the future-dated event held in [180 s, 240 s)", ws)
	}
	// Old traffic replayed with old record timestamps behaves as before.
	r := mustNew(t, Options{Window: time.Minute, OutOfOrderness: 5 * time.Second})
	process(t, r, rec(1, "a", sec(100), sec(130), 1), &out)
	if wm, _ := r.Watermark(); !wm.Equal(sec(95)) {
		t.Errorf("replayed record: wm %v, want %v", wm, sec(95))
	}
}

func TestCombinedLateRule(t *testing.T) {
	o := mustNew(t, Options{Window: time.Minute, Rolling: 30 * time.Second})
	var out Out
	process(t, o, rec(1, "k", sec(50), sec(50), 1), &out)
	// wm = 50. et=45 is before the watermark: too late for features, but its
	// window [0, 60) has not fired: it counts there, quietly.
	out.Reset()
	v := process(t, o, rec(2, "k", sec(45), sec(51), 2), &out)
	if v != Accepted|InWindow || len(out.Features) != 0 || len(out.Late) != 0 || len(out.Panes) != 0 {
		t.Fatalf("et=45 at wm=50: verdict %v out %+v", v, out)
	}
	if s := o.Stats(); s.FeatureLate != 1 || s.Late != 0 {
		t.Errorf("stats %+v", s)
	}
	// wm → 70 fires [0, 60) on time with both events.
	out.Reset()
	process(t, o, rec(3, "k", sec(70), sec(70), 4), &out)
	if len(out.Panes) != 1 || out.Panes[0].Count != 2 || out.Panes[0].Sum != 3 {
		t.Fatalf("on-time pane %+v", out.Panes)
	}
	// Lateness 0: [0, 60) is purged at wm 70, et=55 is accepted nowhere.
	out.Reset()
	if v := process(t, o, rec(4, "k", sec(55), sec(71), 8), &out); v != Late || len(out.Late) != 1 {
		t.Fatalf("et=55 at wm=70: verdict %v out %+v", v, out)
	}
	if l := out.Late[0]; l.Ref != 4 || l.Value != 8 || !l.Watermark.Equal(sec(70)) || !l.EmittedAt.Equal(sec(71)) {
		t.Errorf("late record %+v", l)
	}
}

// TestLateIntoEmptyWindow: an event within lateness for a window that held
// nothing when the watermark passed it creates the window and fires a late
// pane, version 1.
func TestLateIntoEmptyWindow(t *testing.T) {
	o := mustNew(t, Options{Window: time.Minute, AllowedLateness: 2 * time.Minute})
	var out Out
	process(t, o, rec(1, "a", sec(130), sec(130), 1), &out)
	out.Reset()
	v := process(t, o, rec(2, "b", sec(70), sec(131), 5), &out)
	if v != Accepted|InWindow || len(out.Panes) != 1 {
		t.Fatalf("verdict %v panes %+v", v, out.Panes)
	}
	if p := out.Panes[0]; p.Timing != event.TimingLate || p.Version != 1 || p.Key != "b" || !p.WindowStart.Equal(sec(60)) {
		t.Errorf("pane %+v", p)
	}
	// Another key joining the fired window gets its own version 1 as well.
	out.Reset()
	process(t, o, rec(3, "c", sec(61), sec(132), 1), &out)
	if len(out.Panes) != 1 || out.Panes[0].Version != 1 || out.Panes[0].Timing != event.TimingLate {
		t.Errorf("pane %+v", out.Panes)
	}
}

func TestOnTimeOrderAndVersions(t *testing.T) {
	o := mustNew(t, Options{Window: time.Minute})
	var out Out
	for i, k := range []string{"z", "b", "m", "b"} {
		process(t, o, rec(i, k, sec(10+i), sec(10+i), float64(i)), &out)
	}
	o.EmitEarly(&out)
	o.EmitEarly(&out) // nothing changed: no second early pane
	process(t, o, rec(9, "m", sec(20), sec(20), 1), &out)
	process(t, o, rec(10, "x", sec(60), sec(61), 1), &out) // fires [0,60)
	var got []string
	for _, p := range out.Panes {
		got = append(got, p.Key+":"+string(p.Timing)+":"+strconv.FormatInt(p.Version, 10))
	}
	want := []string{"b:early:1", "m:early:1", "z:early:1", "b:on_time:2", "m:on_time:2", "z:on_time:2"}
	if !slices.Equal(got, want) {
		t.Errorf("panes %v, want %v", got, want)
	}
}

func TestIdleAdvance(t *testing.T) {
	o := mustNew(t, Options{Window: time.Minute, OutOfOrderness: 5 * time.Second, IdleTimeout: 30 * time.Second})
	var out Out
	// Event time far in the past (a replay): the idle rule is relative, so
	// the wall clock does not make it late.
	old := time.Date(2020, 1, 1, 0, 0, 10, 0, time.UTC)
	process(t, o, rec(1, "a", old, sec(0), 1), &out) // wm = old − 5s = 00:00:05
	o.Tick(sec(29), &out)
	if wm, _ := o.Watermark(); !wm.Equal(old.Add(-5 * time.Second)) {
		t.Fatalf("wm moved before the idle timeout: %v", wm)
	}
	o.Tick(sec(40), &out) // idle for 10s past the timeout → wm = 00:00:15
	if wm, _ := o.Watermark(); !wm.Equal(old.Add(5 * time.Second)) {
		t.Fatalf("wm %v, want %v", wm, old.Add(5*time.Second))
	}
	if len(out.Panes) != 0 {
		t.Fatalf("panes %+v", out.Panes)
	}
	o.Tick(sec(85), &out) // wm = 00:01:00 → [00:00, 00:01) fires
	if len(out.Panes) != 1 || out.Panes[0].Timing != event.TimingOnTime || !out.Panes[0].Watermark.Equal(old.Add(50*time.Second)) {
		t.Fatalf("idle fire: %+v", out.Panes)
	}
	o.Tick(sec(80), &out) // an earlier tick changes nothing
	if wm, _ := o.Watermark(); !wm.Equal(old.Add(50 * time.Second)) {
		t.Errorf("wm went back: %v", wm)
	}
	// A record resumes the normal rule and never moves the watermark back.
	process(t, o, rec(2, "a", old.Add(20*time.Second), sec(86), 1), &out)
	if wm, _ := o.Watermark(); !wm.Equal(old.Add(50 * time.Second)) {
		t.Errorf("wm %v after a record behind the idle watermark", wm)
	}
}

// A partition that holds no record at all (only transaction markers) gets
// a watermark from the idle rule: StartIdle stands for a record then,
// dated then, and the windows before it become final; a record that comes
// later is judged against it. Without StartIdle (a partition with other
// event types only) ticks give no watermark.
func TestIdleAdvanceWithoutRecords(t *testing.T) {
	opts := Options{Window: time.Minute, OutOfOrderness: 5 * time.Second, AllowedLateness: 10 * time.Second,
		IdleTimeout: 30 * time.Second}
	var out Out
	other := mustNew(t, opts)
	for _, at := range []int{100, 200, 1000} {
		other.Tick(sec(at), &out)
	}
	if wm, ok := other.Watermark(); ok {
		t.Fatalf("ticks alone gave a watermark: %v", wm)
	}
	o := mustNew(t, opts)
	o.StartIdle(sec(100)) // as if a record of 00:01:40 arrived at 00:01:40
	o.Tick(sec(100), &out)
	o.StartIdle(sec(120)) // no-op: started
	o.Tick(sec(129), &out)
	if wm, ok := o.Watermark(); ok {
		t.Fatalf("a watermark before the idle timeout: %v", wm)
	}
	if p := o.Progress(); !p.Watermark.IsZero() || !p.PurgedThrough.IsZero() ||
		!p.ProcessingTime.Equal(sec(129)) {
		t.Fatalf("progress before the idle timeout: %+v", p)
	}
	// A snapshot keeps the anchor: the restored operator advances alike.
	r := mustNew(t, opts)
	if err := r.Restore(o.Snapshot()); err != nil {
		t.Fatal(err)
	}
	for _, op := range []*Operator{o, r} {
		op.Tick(sec(140), &out) // 10 s past the timeout: wm = 00:01:35 + 10 s
		p := op.Progress()
		if !p.Watermark.Equal(sec(105)) || !p.PurgedThrough.Equal(sec(95)) || !p.MaxEventTime.IsZero() {
			t.Fatalf("progress after the idle timeout: %+v", p)
		}
	}
	if len(out.Panes) != 0 {
		t.Fatalf("panes without records: %+v", out.Panes)
	}
	r2 := mustNew(t, opts)
	if err := r2.Restore(o.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if p := r2.Progress(); !p.Watermark.Equal(sec(105)) || !p.MaxEventTime.IsZero() {
		t.Fatalf("restored progress %+v", p)
	}
	// A window purged by the idle watermark takes no record; a later one does.
	if v := process(t, o, rec(1, "a", sec(30), sec(141), 1), &out); v != Late {
		t.Errorf("a record of a purged window: verdict %v, want late", v)
	}
	if v := process(t, o, rec(2, "a", sec(130), sec(141), 1), &out); v&InWindow == 0 {
		t.Errorf("a record of an open window: verdict %v", v)
	}
	if p := o.Progress(); !p.MaxEventTime.Equal(sec(130)) || !p.Watermark.Equal(sec(125)) {
		t.Errorf("progress after the first record: %+v", p)
	}
}

func TestTickEarlyPanes(t *testing.T) {
	o := mustNew(t, Options{Window: time.Hour, EmitInterval: 10 * time.Second})
	var out Out
	o.Tick(sec(0), &out) // arms the timer
	process(t, o, rec(1, "a", sec(1), sec(1), 1), &out)
	o.Tick(sec(5), &out)
	if len(out.Panes) != 0 {
		t.Fatalf("early pane before the interval: %+v", out.Panes)
	}
	o.Tick(sec(10), &out)
	process(t, o, rec(2, "a", sec(11), sec(11), 2), &out)
	o.Tick(sec(15), &out) // not yet: next emit at 20
	o.Tick(sec(20), &out)
	o.Tick(sec(30), &out) // clean: nothing
	if len(out.Panes) != 2 || out.Panes[0].Version != 1 || out.Panes[1].Version != 2 || out.Panes[1].Count != 2 ||
		!out.Panes[1].ProcessedAt.Equal(sec(20)) || out.Panes[1].Timing != event.TimingEarly {
		t.Errorf("panes %+v", out.Panes)
	}
}

func TestDedup(t *testing.T) {
	o := mustNew(t, Options{Window: time.Minute, DedupTTL: time.Minute, DedupMaxEntries: 3})
	var out Out
	if v := process(t, o, rec(1, "a", sec(1), sec(0), 1), &out); !v.Has(Accepted) {
		t.Fatal(v)
	}
	if v := process(t, o, rec(1, "a", sec(1), sec(59), 1), &out); v != Duplicate {
		t.Fatalf("redelivery within TTL: %v", v)
	}
	// The TTL runs from first sight: at 60s the id is forgotten.
	if v := process(t, o, rec(1, "a", sec(1), sec(60), 1), &out); v == Duplicate {
		t.Fatal("id remembered past its TTL")
	}
	for n := 2; n <= 4; n++ { // fills the set of 3: evicts id 1
		process(t, o, rec(n, "a", sec(2), sec(61), 1), &out)
	}
	s := o.Stats()
	if s.Duplicates != 1 || s.DedupExpired != 1 || s.DedupEvicted != 1 || s.DedupEntries != 3 {
		t.Errorf("stats %+v", s)
	}
	if v := process(t, o, rec(2, "a", sec(2), sec(62), 1), &out); v != Duplicate {
		t.Errorf("id 2 forgotten: %v", v)
	}
	// A late record is remembered too: its redelivery is a duplicate, not a
	// second late output.
	process(t, o, rec(5, "a", sec(300), sec(63), 1), &out)
	out.Reset()
	if v := process(t, o, rec(6, "a", sec(3), sec(64), 1), &out); v != Late {
		t.Fatal(v)
	}
	if v := process(t, o, rec(6, "a", sec(3), sec(65), 1), &out); v != Duplicate || len(out.Late) != 1 {
		t.Errorf("late redelivery: %v %+v", v, out.Late)
	}
}

// TestDedupIndex checks the ring and its open-addressing index against a
// plain map through growth, wrap-around, eviction and expiry.
func TestDedupIndex(t *testing.T) {
	var d dedup
	d.init(300, 100)
	ref := map[EventID]int64{}
	var order []EventID
	for i := range 5000 {
		id := testID(i % 700) // ids come back after being forgotten
		now := int64(i / 3)   // first half: the bound evicts; second: the TTL expires
		if i >= 2500 {
			now = 833 + int64(i-2500)*10
		}
		d.expire(now)
		for len(order) > 0 && ref[order[0]] <= now-300 {
			delete(ref, order[0])
			order = order[1:]
		}
		_, seen := ref[id]
		if added := d.add(id, now); added == seen {
			t.Fatalf("step %d: add(%v) = %v, reference seen=%v", i, id, added, seen)
		}
		if !seen {
			if len(order) == 100 {
				delete(ref, order[0])
				order = order[1:]
			}
			ref[id] = now
			order = append(order, id)
		}
		used := 0
		for _, s := range d.slots {
			if s != 0 {
				used++
			}
		}
		if d.n != len(ref) || used != d.n {
			t.Fatalf("step %d: n=%d used slots=%d reference=%d", i, d.n, used, len(ref))
		}
	}
	for i, e := range d.entries() {
		if e.id != order[i] || d.find(&e.id, d.hash(e.id)) < 0 {
			t.Fatalf("entry %d: %v not in FIFO order or not indexed", i, e.id)
		}
	}
	if d.evicted == 0 || d.expired == 0 {
		t.Errorf("evicted %d expired %d: both paths should run", d.evicted, d.expired)
	}
}

func TestNegativeTimesAlign(t *testing.T) {
	if got := floorTo(-1, 60); got != -60 {
		t.Errorf("floorTo(-1, 60) = %d", got)
	}
	o := mustNew(t, Options{Window: time.Minute})
	var out Out
	process(t, o, rec(1, "a", time.Unix(-1, 0), time.Unix(0, 0), 1), &out)
	if ws := o.Windows(); len(ws) != 1 || !ws[0].Start.Equal(time.Unix(-60, 0)) {
		t.Errorf("windows %+v", ws)
	}
}

func TestRollingPrunes(t *testing.T) {
	o := mustNew(t, Options{Rolling: 10 * time.Second})
	var out Out
	for i := range 1000 {
		process(t, o, rec(i, string(rune('a'+i%7)), sec(i), sec(i), 1), &out)
	}
	s := o.Stats()
	// wm = 999; horizon = 989: every key holds only its last ~10s.
	if s.RollingPoints > 7*3 || s.RollingKeys != 7 {
		t.Errorf("rolling state not pruned: %+v", s)
	}
	// Keys that go quiet are dropped once their points are past the horizon.
	process(t, o, rec(5000, "z", sec(5000), sec(5000), 1), &out)
	if s := o.Stats(); s.RollingKeys != 1 || s.RollingPoints != 1 {
		t.Errorf("quiet keys kept: %+v", s)
	}
}

func TestEventIDRoundTrip(t *testing.T) {
	const s = "a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d"
	id, ok := ParseEventID(s)
	if !ok || id.String() != s {
		t.Fatalf("ParseEventID(%q) = %v %v", s, id, ok)
	}
	for _, bad := range []string{"", "A3F8E1D2-7B4C-4E2A-9C1D-5E6F7A8B9C0D", "a3f8e1d2x7b4c-4e2a-9c1d-5e6f7a8b9c0d", "a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0"} {
		if _, ok := ParseEventID(bad); ok {
			t.Errorf("ParseEventID(%q) accepted", bad)
		}
	}
}

// TestSortKeys checks the radix sort of fired windows against a plain
// sort on key sets with long common prefixes, short and empty keys, zero
// bytes that tie with the padding, and ties beyond the eight cached bytes.
func TestSortKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	gens := []func(i int) string{
		func(i int) string { return "user-" + strconv.Itoa(rng.IntN(100000)) },
		func(i int) string {
			return string([]byte{byte(rng.IntN(3)), byte(rng.IntN(3))}[:rng.IntN(3)]) + "\x00" + strconv.Itoa(i)
		},
		func(i int) string { return "sensor-" + strconv.Itoa(i%10) + "-long-shared-middle-" + strconv.Itoa(i) },
		func(i int) string {
			b := make([]byte, rng.IntN(12))
			for j := range b {
				b[j] = byte(rng.IntN(256))
			}
			return string(b) + strconv.Itoa(i)
		},
		func(i int) string { return strings.Repeat("k", i%20) },
	}
	var tmp []keyIndex
	for g, gen := range gens {
		for _, n := range []int{0, 1, 255, 256, 1000, 5000} {
			seen := map[string]bool{}
			var ks []keyIndex
			for i := 0; len(ks) < n && i < 10*n; i++ {
				if k := gen(i); !seen[k] {
					seen[k] = true
					ks = append(ks, keyIndex{key: k, i: int32(len(ks))})
				}
			}
			want := slices.Clone(ks)
			slices.SortFunc(want, func(x, y keyIndex) int { return strings.Compare(x.key, y.key) })
			tmp = sortKeys(ks, tmp)
			for i := range ks {
				if ks[i].key != want[i].key || ks[i].i != want[i].i {
					t.Fatalf("generator %d, n %d: position %d holds %q, want %q", g, n, i, ks[i].key, want[i].key)
				}
			}
		}
	}
}

// PurgedThrough is watermark − lateness and never behind the purge: after
// every record and tick, no window ending at or before it is held.
func TestProgressPurgedThrough(t *testing.T) {
	o := mustNew(t, Options{Window: 10 * time.Second, OutOfOrderness: 2 * time.Second, AllowedLateness: 15 * time.Second, IdleTimeout: 30 * time.Second})
	if p := o.Progress(); !p.Watermark.IsZero() || !p.PurgedThrough.IsZero() {
		t.Fatalf("progress before any record: %+v", p)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	var out Out
	arrival := 0
	for i := 1; i <= 2000; i++ {
		arrival += rng.IntN(3)
		et := arrival - 20 + rng.IntN(40) // late, on time and future-dated
		process(t, o, rec(i, "k"+strconv.Itoa(rng.IntN(3)), sec(et), sec(arrival), 1), &out)
		if i%100 == 0 {
			o.Tick(sec(arrival+rng.IntN(60)), &out)
		}
		p := o.Progress()
		if !p.PurgedThrough.Equal(p.Watermark.Add(-15*time.Second)) || p.MaxEventTime.After(sec(arrival)) {
			t.Fatalf("record %d: progress %+v at arrival %v", i, p, sec(arrival))
		}
		for _, w := range o.Windows() {
			if !w.End.After(p.PurgedThrough) {
				t.Fatalf("record %d: window [%v, %v) held at purged-through %v", i, w.Start, w.End, p.PurgedThrough)
			}
		}
	}
	if o := mustNew(t, Options{Window: time.Second, AllowedLateness: Forever}); true {
		process(t, o, rec(1, "k", sec(5), sec(5), 1), &out)
		if p := o.Progress(); p.Watermark.IsZero() || !p.PurgedThrough.IsZero() {
			t.Errorf("unbounded lateness: %+v, want a watermark and no purged-through point", p)
		}
	}
}

// TestProcessCopiesKeys: a record's key may alias bytes the caller reuses
// (the stream passes a view of the record, event.Envelope.StringView);
// windows, rolling features, late records and panes keep their own copies.
func TestProcessCopiesKeys(t *testing.T) {
	o := mustNew(t, Options{Window: time.Minute, Rolling: time.Minute, AllowedLateness: time.Second})
	buf := []byte("key-a")
	view := unsafe.String(&buf[0], len(buf))
	var out Out
	process(t, o, rec(1, view, sec(10), sec(10), 1), &out)
	process(t, o, rec(2, view, sec(20), sec(20), 2), &out)
	copy(buf, "XXXXX")
	process(t, o, rec(3, "key-b", sec(200), sec(200), 3), &out) // fires key-a's window
	process(t, o, rec(4, view, sec(5), sec(201), 4), &out)      // too late: a late record
	copy(buf, "YYYYY")
	for _, f := range out.Features[:2] {
		if f.Key != "key-a" {
			t.Errorf("feature key %q, want key-a", f.Key)
		}
	}
	found := false
	for _, p := range out.Panes {
		if p.WindowStart.Equal(sec(0)) {
			found = true
			if p.Key != "key-a" || p.Count != 2 {
				t.Errorf("pane key %q count %d, want key-a 2", p.Key, p.Count)
			}
		}
	}
	if !found {
		t.Errorf("no pane of key-a's window: %+v", out.Panes)
	}
	if len(out.Late) != 1 || out.Late[0].Key != "XXXXX" {
		t.Errorf("late %+v, want one with the key as it was then (XXXXX)", out.Late)
	}
}
