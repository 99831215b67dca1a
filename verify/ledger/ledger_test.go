package ledger

import (
	"strings"
	"testing"
	"time"

	"reckon/internal/event"
	"reckon/verify/generate"
)

func ptr[T any](v T) *T { return &v }

func manifest() *generate.Manifest {
	return &generate.Manifest{
		Topic:  "payments-kejadian",
		Counts: generate.Counts{Records: 10},
		Listed: []generate.Entry{
			{Category: generate.Poison, Partition: ptr(int32(0)), Offset: ptr(int64(3))},
			{Category: generate.Duplicate, Partition: ptr(int32(1)), Offset: ptr(int64(4))},
		},
		Truth: []generate.Window{
			{Stream: "payments", Key: "Budi", WindowStart: "2026-11-07T12:00:00Z", WindowEnd: "2026-11-07T12:01:00Z", Count: 4, Sum: 590000, Min: 45000, Max: 350000},
			{Stream: "payments", Key: "Siti", WindowStart: "2026-11-07T12:00:00Z", WindowEnd: "2026-11-07T12:01:00Z", Count: 3, Sum: 375000, Min: 45000, Max: 210000},
			{Stream: "payments", Key: "Dewi", WindowStart: "2026-11-07T12:05:00Z", WindowEnd: "2026-11-07T12:06:00Z", Count: 1, Sum: 75000, Min: 75000, Max: 75000},
		},
	}
}

func pane(key string, start time.Time, count int64, sum, min, max float64, v int64) event.Pane {
	return event.Pane{Stream: "payments", Key: key, WindowStart: start, WindowEnd: start.Add(time.Minute), Count: count, Sum: sum, Min: min, Max: max, Version: v}
}

// The fraud-features price of speed (docs/requirements.md R-ROLL-4): Budi's
// window misses the event the stream
// dropped (3 / 240,000 + late 350,000 vs truth 4 / 590,000).
func TestLedgerSeed000(t *testing.T) {
	w := time.Date(2026, 11, 7, 12, 0, 0, 0, time.UTC)
	out := Outputs{
		Panes: map[string]event.Pane{
			event.WindowKey("payments", "Budi", w): pane("Budi", w, 3, 240000, 45000, 120000, 1),
			event.WindowKey("payments", "Siti", w): pane("Siti", w, 3, 375000, 45000, 210000, 1),
		},
		Late:     map[string]bool{"payments-kejadian/2/9": true},
		DLQ:      map[string]string{"payments-kejadian/0/3": "event_id: not a UUID"},
		Accepted: 6, Duplicates: 2, LateCount: 1,
		Watermark: w.Add(2 * time.Minute), // Dewi's 12:05 window is still open
	}
	l := Compute(manifest(), "payments", out)
	if !l.Conserved() || l.Unaccounted != 0 {
		t.Fatalf("not conserved: %+v", l)
	}
	if l.Windows != 2 || l.WindowsMatched != 1 || len(l.WindowsDiffer) != 1 || l.Open != 1 {
		t.Fatalf("windows: %+v", l)
	}
	d := l.WindowsDiffer[0]
	if d.Key != "Budi" || d.Truth.Count != 4 || d.Final.Count != 3 {
		t.Fatalf("diff = %+v", d)
	}
	if l.Truthful() {
		t.Fatal("a differing window must make the ledger untruthful")
	}
	var b strings.Builder
	l.Print(&b)
	if !strings.Contains(b.String(), "Budi 2026-11-07T12:00:00Z: truth count 4 sum 590000, final v1") {
		t.Errorf("report:\n%s", b.String())
	}

	// After the batch correction (v2 = truth) everything closed is true.
	out.Panes[event.WindowKey("payments", "Budi", w)] = pane("Budi", w, 4, 590000, 45000, 350000, 2)
	if l := Compute(manifest(), "payments", out); !l.Truthful() || !l.Conserved() || !l.Timely() {
		t.Fatalf("after correction: %+v", l)
	}

	// An on_time pane emitted before its window end + out_of_orderness
	// makes the ledger untimely and is named in the report.
	out.OnTime, out.EarlyOnTime = 2, []string{"payments|Siti|2026-11-07T12:00:00Z v1 processed 2026-11-07T12:03:00Z, due 2026-11-07T12:05:05Z"}
	l = Compute(manifest(), "payments", out)
	b.Reset()
	l.Print(&b)
	if l.Timely() || !strings.Contains(b.String(), "on_time panes   2, 1 fired before window end + out_of_orderness") || !strings.Contains(b.String(), "early: payments|Siti") {
		t.Errorf("early on_time pane not reported (timely %v):\n%s", l.Timely(), b.String())
	}
}

func TestLedgerFindsLossAndDoubleCounting(t *testing.T) {
	base := Outputs{DLQ: map[string]string{"payments-kejadian/0/3": "x"}, Accepted: 6, Duplicates: 2, Late: map[string]bool{"payments-kejadian/2/9": true}, LateCount: 1}
	lost := base
	lost.Accepted = 5
	if l := Compute(manifest(), "payments", lost); l.Conserved() || l.Unaccounted != 1 {
		t.Errorf("a lost record: %+v", l)
	}
	doubled := base
	doubled.Accepted = 7
	if l := Compute(manifest(), "payments", doubled); l.Conserved() || l.Unaccounted != -1 {
		t.Errorf("a double count: %+v", l)
	}
	noPoison := base
	noPoison.DLQ = map[string]string{"payments-kejadian/0/4": "x"}
	if l := Compute(manifest(), "payments", noPoison); l.Conserved() || len(l.PoisonNotDeadLettered) != 1 {
		t.Errorf("poison missing from the DLQ: %+v", l)
	}
	noReason := base
	noReason.DLQ = map[string]string{"payments-kejadian/0/3": ""}
	if l := Compute(manifest(), "payments", noReason); l.Conserved() {
		t.Errorf("a dead letter without a reason passed")
	}
	lateMismatch := base
	lateMismatch.LateCount = 2
	if l := Compute(manifest(), "payments", lateMismatch); l.Conserved() {
		t.Errorf("late topic vs counter mismatch passed")
	}
}
