package lake

import (
	"fmt"
	"testing"
	"time"

	"reckon/internal/event"
	"reckon/lake/storage"
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
		if i%3 != 0 { // the rest as published before processed_at existed
			p.ProcessedAt = p.EmittedAt.Add(-time.Duration(i) * time.Second)
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
			WindowStart: time.UnixMicro(got.WindowStart[i]).UTC(), ProcessedAt: time.UnixMicro(got.ProcessedAt[i]).UTC(),
			Version: got.Version[i], Count: got.Count[i], Sum: got.Sum[i], Min: got.Min[i], Max: got.Max[i],
		}
		if g.Key != p.Key || g.ComputedBy != p.ComputedBy || !g.WindowStart.Equal(p.WindowStart) || !g.ProcessedAt.Equal(p.Processed()) ||
			g.Version != p.Version || g.Count != p.Count || g.Sum != p.Sum || g.Min != p.Min || g.Max != p.Max {
			t.Errorf("row %d: %+v, ReadPanes %+v", i, g, p)
		}
	}
}

// summaryRowV1 is a summaries row as written before processed_at existed.
type summaryRowV1 struct {
	Stream      string  `parquet:"stream,dict"`
	Key         string  `parquet:"key,dict"`
	WindowStart int64   `parquet:"window_start,timestamp(microsecond:utc)"`
	WindowEnd   int64   `parquet:"window_end,timestamp(microsecond:utc)"`
	Count       int64   `parquet:"count"`
	Sum         float64 `parquet:"sum"`
	Min         float64 `parquet:"min"`
	Max         float64 `parquet:"max"`
	Version     int64   `parquet:"version"`
	Timing      string  `parquet:"timing,dict"`
	ComputedBy  string  `parquet:"computed_by,dict"`
	Watermark   int64   `parquet:"watermark,timestamp(microsecond:utc)"`
	EmittedAt   int64   `parquet:"emitted_at,timestamp(microsecond:utc)"`
	Reason      string  `parquet:"reason"`
}

// TestPaneProcessedAtOldFiles: a summaries file written before
// processed_at existed (emitted_at was then the processing clock) reads
// with that clock, beside a new file: ReadPanes' Processed and
// ReadPaneFigures' ProcessedAt are its emitted_at, and the new file's
// panes keep their own processed_at.
func TestPaneProcessedAtOldFiles(t *testing.T) { forEachStore(t, testPaneProcessedAtOldFiles) }

func testPaneProcessedAtOldFiles(t *testing.T, opts Options) {
	l := mustOpen(t, opts)
	ws := time.Date(2026, 11, 7, 10, 0, 0, 0, time.UTC)
	old := summaryRowV1{Stream: "suhu", Key: "old", WindowStart: ws.UnixMicro(), WindowEnd: ws.Add(time.Hour).UnixMicro(),
		Count: 1, Version: 1, Timing: "on_time", ComputedBy: event.ComputedByStream, EmittedAt: ws.Add(61 * time.Minute).UnixMicro()}
	key := storage.JoinKey(paneDateKey(SummariesDir, "suhu", ws), "old.parquet")
	if _, err := putRows(t.Context(), l, key, []summaryRowV1{old}); err != nil {
		t.Fatal(err)
	}
	p := event.Pane{Stream: "suhu", Key: "new", WindowStart: ws, WindowEnd: ws.Add(time.Hour), Count: 2, Version: 1,
		Timing: event.TimingOnTime, ComputedBy: event.ComputedByStream,
		ProcessedAt: ws.Add(62 * time.Minute), EmittedAt: ws.Add(63 * time.Minute)}
	if _, err := l.WritePanes(t.Context(), "suhu", "new", []event.Pane{p}); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]time.Time{ // key → emitted_at, processing clock
		"old": {ws.Add(61 * time.Minute), ws.Add(61 * time.Minute)},
		"new": {ws.Add(63 * time.Minute), ws.Add(62 * time.Minute)},
	}
	panes, err := l.ReadPanes(t.Context(), "suhu", ws, ws.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	figs, err := l.ReadPaneFigures(t.Context(), "suhu", ws, ws.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(panes) != 2 || figs.Len() != 2 {
		t.Fatalf("%d panes, %d figures; want 2", len(panes), figs.Len())
	}
	for i, p := range panes {
		w := want[p.Key]
		if !p.EmittedAt.Equal(w[0]) || !p.Processed().Equal(w[1]) {
			t.Errorf("ReadPanes %s: emitted_at %s, processed %s; want %s, %s", p.Key, p.EmittedAt, p.Processed(), w[0], w[1])
		}
		k := figs.Keys[figs.Key[i]]
		if got := time.UnixMicro(figs.ProcessedAt[i]).UTC(); !got.Equal(want[k][1]) {
			t.Errorf("ReadPaneFigures %s: processed %s, want %s", k, got, want[k][1])
		}
	}
}
