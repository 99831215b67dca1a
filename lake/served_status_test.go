package lake

import (
	"testing"
	"time"

	"reckon/internal/event"
)

// TestServedStatusWithoutCuration: an hour of events whose feature_status
// file was never written (a failed curation, or features archived before
// curation existed) still reads its served features, merged as the
// curation merges them (the first emitted wins); a curated hour reads its
// file; an hour not named costs nothing and adds nothing.
func TestServedStatusWithoutCuration(t *testing.T) {
	l := mustOpen(t, Options{Root: t.TempDir()})
	ctx := t.Context()
	h10 := time.Date(2026, 11, 7, 10, 0, 0, 0, time.UTC)
	h11 := h10.Add(time.Hour)
	feat := func(id string, et time.Time, count int64, emitted time.Time) event.Feature {
		return event.Feature{Stream: "payments", Key: "Budi", EventID: id, EventTime: et, Size: time.Minute,
			Count: count, Sum: float64(count) * 100, EmittedAt: emitted, ArrivedAt: emitted,
			SourceTopic: "payments-kejadian"}
	}
	write := func(name string, fs ...event.Feature) []string {
		var rows []FeatureRow
		for i, f := range fs {
			rows = append(rows, FeatureRowOf(f, 0, int64(i)))
		}
		files, err := l.WriteFeatures(ctx, name, rows)
		if err != nil {
			t.Fatal(err)
		}
		var paths []string
		for _, f := range files {
			paths = append(paths, f.Path)
		}
		return paths
	}
	curatedFiles := write("f-10", feat("e1", h10.Add(5*time.Minute), 1, h10.Add(5*time.Minute)))
	if _, err := l.Curate(ctx, curatedFiles); err != nil {
		t.Fatal(err)
	}
	// Hour 11: served twice (a redelivery served again later), never curated.
	write("f-11a", feat("e2", h11.Add(time.Minute), 2, h11.Add(2*time.Minute)))
	write("f-11b", feat("e2", h11.Add(time.Minute), 5, h11.Add(time.Minute)), feat("e3", h11.Add(3*time.Minute), 3,
		h11.Add(3*time.Minute)))

	figures := func(hours ...time.Time) map[string]int64 {
		var us []int64
		for _, h := range hours {
			us = append(us, h.UnixMicro())
		}
		rows, err := l.ReadServedStatus(ctx, "payments", h10, h11.Add(time.Hour), us)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, r := range rows {
			if r.ServedCount == nil {
				t.Fatalf("row %s without a served count", r.EventID)
			}
			out[r.EventID] = *r.ServedCount
		}
		return out
	}
	got := figures(h10, h11, h11)
	want := map[string]int64{"e1": 1, "e2": 5, "e3": 3} // e2: the first emitted (count 5) wins
	if len(got) != len(want) || got["e1"] != 1 || got["e2"] != 5 || got["e3"] != 3 {
		t.Fatalf("served figures %v, want %v", got, want)
	}
	if plain, err := l.ReadFeatureStatus(ctx, "payments", h10, h11.Add(time.Hour)); err != nil || len(plain) != 1 {
		t.Fatalf("the curated table alone: %d rows (%v), want hour 10's one", len(plain), err)
	}
	if got := figures(h10); len(got) != 1 || got["e1"] != 1 {
		t.Fatalf("hour 11 not named: %v, want e1 alone", got)
	}
}
