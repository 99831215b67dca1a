package operator

import (
	"testing"
	"time"

	"reckon/internal/event"
)

// seed000 is the fraud-features example's 14 checkout events
// (docs/requirements.md R-ROLL-3): (arrival s, event time s, user, amount),
// seconds after 12:00.
var seed000 = []struct {
	arr, et int
	user    string
	v       float64
}{
	{10, 10, "Budi", 120000}, {18, 18, "Siti", 75000}, {25, 25, "Budi", 210000},
	{33, 33, "Dewi", 45000}, {41, 40, "Siti", 120000}, {48, 48, "Budi", 75000},
	{56, 55, "Dewi", 350000}, {62, 60, "Siti", 45000}, {70, 70, "Budi", 120000},
	{80, 78, "Dewi", 210000}, {86, 52, "Budi", 350000}, {90, 90, "Siti", 210000},
	{96, 95, "Dewi", 75000}, {99, 99, "Budi", 45000},
}

// TestSeed000Features reproduces the fraud-features table line by line
// (docs/requirements.md R-ROLL-3, R-WIN-2): 60s rolling window, watermark =
// max event time − 5s, lateness 0.
func TestSeed000Features(t *testing.T) {
	want := []struct {
		wm    int // -1: no watermark yet
		late  bool
		count int64
		sum   float64
	}{
		{-1, false, 1, 120000}, {5, false, 1, 75000}, {13, false, 2, 330000},
		{20, false, 1, 45000}, {28, false, 2, 195000}, {35, false, 3, 405000},
		{43, false, 2, 395000}, {50, false, 3, 240000}, {55, false, 3, 405000},
		{65, false, 3, 605000}, {73, true, 0, 0}, {73, false, 3, 375000},
		{85, false, 3, 635000}, {90, false, 3, 240000},
	}
	o := mustNew(t, Options{Rolling: 60 * time.Second, OutOfOrderness: 5 * time.Second})
	var out Out
	for i, e := range seed000 {
		out.Reset()
		v := process(t, o, rec(i, e.user, sec(e.et), sec(e.arr), e.v), &out)
		w := want[i]
		if w.late {
			if v != Late || len(out.Late) != 1 || len(out.Features) != 0 {
				t.Fatalf("event %d (et=%d %s): verdict %v, out %+v; want late", i, e.et, e.user, v, out)
			}
			if l := out.Late[0]; !l.Watermark.Equal(sec(w.wm)) || l.Key != e.user || !l.EventTime.Equal(sec(e.et)) {
				t.Errorf("event %d: late %+v, want wm=%d", i, l, w.wm)
			}
			continue
		}
		if !v.Has(Accepted|InFeatures) || len(out.Features) != 1 {
			t.Fatalf("event %d (et=%d %s): verdict %v, %d features", i, e.et, e.user, v, len(out.Features))
		}
		f := out.Features[0]
		if f.Count != w.count || f.Sum != w.sum {
			t.Errorf("event %d (et=%d %s): count=%d sum=%v, want %d %v", i, e.et, e.user, f.Count, f.Sum, w.count, w.sum)
		}
		if w.wm < 0 {
			if f.HasWatermark {
				t.Errorf("event %d: watermark %v before the first event", i, f.Watermark)
			}
		} else if !f.HasWatermark || !f.Watermark.Equal(sec(w.wm)) {
			t.Errorf("event %d: watermark %v, want %v", i, f.Watermark, sec(w.wm))
		}
	}
	s := o.Stats()
	if s.Records != 14 || s.Accepted != 13 || s.Late != 1 || s.Features != 13 {
		t.Errorf("stats %+v, want records 14 accepted 13 late 1", s)
	}
	// The closing comparison (R-ROLL-4): Budi's last accepted event is et=99;
	// the stream saw 3 events / 240,000 in (39, 99], the truth is 4 / 590,000.
	var all, accepted []Record
	for i, e := range seed000 {
		if e.user != "Budi" {
			continue
		}
		r := rec(i, e.user, sec(e.et), sec(e.arr), e.v)
		all = append(all, r)
		if e.et != 52 {
			accepted = append(accepted, r)
		}
	}
	if a := RollingTruth(60*time.Second, sec(99), accepted); a.Count != 3 || a.Sum != 240000 {
		t.Errorf("Budi stream view %+v, want 3/240000", a)
	}
	if a := RollingTruth(60*time.Second, sec(99), all); a.Count != 4 || a.Sum != 590000 {
		t.Errorf("Budi truth %+v, want 4/590000", a)
	}
}

// TestSeed001Windows (docs/requirements.md R-WIN-6 to R-WIN-8): 5-minute
// windows, 5-minute lateness. The 09:55–10:00 window fires on time, a 09:58
// event arriving while wm < 10:05 fires a late pane version 2, and once
// wm ≥ 10:05 an event for it is late.
func TestSeed001Windows(t *testing.T) {
	at := func(hm string) time.Time {
		tm, err := time.Parse("15:04:05", hm)
		if err != nil {
			t.Fatal(err)
		}
		return time.Date(2026, 11, 7, tm.Hour(), tm.Minute(), tm.Second(), 0, time.UTC)
	}
	o := mustNew(t, Options{Window: 5 * time.Minute, AllowedLateness: 5 * time.Minute})
	var out Out
	step := func(n int, et, arr string, v float64) Verdict {
		out.Reset()
		return process(t, o, rec(n, "kassa-1", at(et), at(arr), v), &out)
	}
	step(1, "09:56:00", "09:56:01", 100)
	step(2, "09:57:30", "09:57:31", 200)
	if len(out.Panes) != 0 {
		t.Fatalf("panes before wm passed 10:00: %+v", out.Panes)
	}
	step(3, "10:01:00", "10:01:02", 50) // wm → 10:01: fires 09:55–10:00
	if len(out.Panes) != 1 {
		t.Fatalf("want one on-time pane, got %+v", out.Panes)
	}
	p := out.Panes[0]
	if p.Timing != event.TimingOnTime || p.Version != 1 || p.Count != 2 || p.Sum != 300 ||
		!p.WindowStart.Equal(at("09:55:00")) || !p.WindowEnd.Equal(at("10:00:00")) || !p.Watermark.Equal(at("10:01:00")) {
		t.Errorf("on-time pane %+v", p)
	}
	step(4, "10:04:00", "10:04:01", 75) // wm → 10:04
	if v := step(5, "09:58:00", "10:04:30", 500); !v.Has(InWindow) {
		t.Fatalf("09:58 event at wm 10:04: verdict %v", v)
	}
	if len(out.Panes) != 1 {
		t.Fatalf("want one late pane, got %+v", out.Panes)
	}
	p = out.Panes[0]
	if p.Timing != event.TimingLate || p.Version != 2 || p.Count != 3 || p.Sum != 800 || p.Min != 100 || p.Max != 500 {
		t.Errorf("late pane %+v", p)
	}
	step(6, "10:05:00", "10:05:02", 20) // wm → 10:05: fires 10:00–10:05, purges 09:55–10:00
	if len(out.Panes) != 1 || out.Panes[0].Timing != event.TimingOnTime || out.Panes[0].Count != 2 || out.Panes[0].Sum != 125 {
		t.Errorf("10:00–10:05 on-time pane: %+v", out.Panes)
	}
	if v := step(7, "09:59:00", "10:06:00", 999); v != Late || len(out.Late) != 1 || len(out.Panes) != 0 {
		t.Fatalf("09:59 event at wm 10:05: verdict %v out %+v; want late", v, out)
	}
	if ws := o.Windows(); len(ws) != 2 {
		t.Errorf("held windows %+v, want 10:00 and 10:05", ws)
	}
	out.Reset()
	o.EmitEarly(&out)
	if len(out.Panes) != 1 || out.Panes[0].Timing != event.TimingEarly || out.Panes[0].Count != 1 || out.Panes[0].Version != 1 {
		t.Errorf("early pane at end: %+v", out.Panes)
	}
}
