package lake

import (
	"fmt"
	"testing"
	"time"

	"reckon/internal/event"
)

// TestPaneFiguresMatchReadPanes: ReadPaneFigures returns ReadPanes' rows,
// in the same order and with the same figures, column by column: several
// files and dates, small row groups (so a file has many), several
// versions of a window, and a range that cuts a date in two.
func TestPaneFiguresMatchReadPanes(t *testing.T) { forEachStore(t, testPaneFiguresMatchReadPanes) }

func testPaneFiguresMatchReadPanes(t *testing.T, opts Options) {
	opts.RowGroupRows = 7
	l := mustOpen(t, opts)
	w0 := time.Date(2026, 11, 7, 22, 0, 0, 0, time.UTC)
	var a, b []event.Pane
	for i := range 60 {
		ws := w0.Add(time.Duration(i%12) * 15 * time.Minute)
		p := event.Pane{
			Stream: "suhu", Key: fmt.Sprintf("sensor-%02d", i%5), WindowStart: ws, WindowEnd: ws.Add(15 * time.Minute),
			Count: int64(i), Sum: float64(i) * 1.5, Min: float64(i) / 2, Max: float64(i) * 2, Version: int64(1 + i/12),
			Timing: event.TimingOnTime, ComputedBy: event.ComputedByStream, EmittedAt: ws.Add(time.Duration(16+i) * time.Minute),
		}
		if i%4 == 3 {
			p.ComputedBy, p.Timing = event.ComputedByBatch, event.TimingCorrection
		}
		if i%2 == 0 {
			a = append(a, p)
		} else {
			b = append(b, p)
		}
	}
	for name, ps := range map[string][]event.Pane{"first": a, "second": b} {
		if _, err := l.WritePanes(t.Context(), "suhu", name, ps); err != nil {
			t.Fatal(err)
		}
	}
	from, to := w0.Add(45*time.Minute), w0.Add(150*time.Minute) // 22:45 .. 00:30
	want, err := l.ReadPanes(t.Context(), "suhu", from, to)
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.ReadPaneFigures(t.Context(), "suhu", from, to)
	if err != nil {
		t.Fatal(err)
	}
	if got.Len() != len(want) || len(want) < 20 {
		t.Fatalf("%d rows, ReadPanes %d", got.Len(), len(want))
	}
	for i, p := range want {
		g := event.Pane{
			Key: got.Keys[got.Key[i]], ComputedBy: got.ComputedBys[got.ComputedBy[i]],
			WindowStart: time.UnixMicro(got.WindowStart[i]).UTC(), EmittedAt: time.UnixMicro(got.EmittedAt[i]).UTC(),
			Version: got.Version[i], Count: got.Count[i], Sum: got.Sum[i], Min: got.Min[i], Max: got.Max[i],
		}
		if g.Key != p.Key || g.ComputedBy != p.ComputedBy || !g.WindowStart.Equal(p.WindowStart) || !g.EmittedAt.Equal(p.EmittedAt) ||
			g.Version != p.Version || g.Count != p.Count || g.Sum != p.Sum || g.Min != p.Min || g.Max != p.Max {
			t.Errorf("row %d: %+v, ReadPanes %+v", i, g, p)
		}
	}
}
