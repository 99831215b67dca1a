package lake

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"testing"
	"time"

	"reckon/internal/event"
)

// TestTruthTable: rows land per UTC window date, rewriting a name replaces
// its files (a retried recompute), ranges filter on window_start; reports
// round-trip.
func TestTruthTable(t *testing.T) { forEachStore(t, testTruthTable) }

func testTruthTable(t *testing.T, opts Options) {
	l := mustOpen(t, opts)
	d := time.Date(2026, 11, 7, 23, 55, 0, 0, time.UTC)
	pane := func(key string, start time.Time, count int64) event.Pane {
		return event.Pane{Stream: "payments", Key: key, WindowStart: start, WindowEnd: start.Add(5 * time.Minute),
			Count: count, Sum: float64(count), Version: 2, Timing: "truth", ComputedBy: event.ComputedByBatch, EmittedAt: d, Reason: "matched"}
	}
	files, err := l.WriteTruth(t.Context(), "payments", "truth-a", []event.Pane{pane("u1", d, 1), pane("u1", d.Add(5*time.Minute), 2), pane("u2", d, 3)})
	if err != nil || len(files) != 2 {
		t.Fatalf("files %v, %v", files, err)
	}
	if files[0].Path != "truth/stream=payments/window_date=2026-11-07/truth-a.parquet" || files[0].Rows != 2 {
		t.Fatalf("first file %+v", files[0])
	}
	if _, err := l.WriteTruth(t.Context(), "payments", "truth-a", []event.Pane{pane("u1", d, 7)}); err != nil {
		t.Fatal(err)
	}
	rows, err := l.ReadTruth(t.Context(), "payments", d.Add(-time.Hour), d.Add(time.Minute))
	if err != nil || len(rows) != 1 || rows[0].Count != 7 || rows[0].Reason != "matched" {
		t.Fatalf("rows %+v, %v", rows, err)
	}
	if _, err := l.WriteTruth(t.Context(), "payments", "truth-b", []event.Pane{{Stream: "suhu"}}); err == nil {
		t.Fatal("a pane of another stream was accepted")
	}
	b, _ := json.Marshal(map[string]int{"corrected": 3})
	path, err := l.WriteReport(t.Context(), "reconcile", "2026-11-07", b)
	if err != nil || path != "reports/reconcile/2026-11-07.json" {
		t.Fatalf("report path %q, %v", path, err)
	}
	got, err := l.ReadReport(t.Context(), "reconcile", "2026-11-07")
	if err != nil || string(got) != string(b) {
		t.Fatalf("report %s, %v", got, err)
	}
	if _, err := l.WriteReport(t.Context(), "../x", "y", b); err == nil {
		t.Fatal("bad report kind accepted")
	}
	if _, err := l.ReadReport(t.Context(), "reconcile", "2026-11-08"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing report: %v", err)
	}
}

// TestMergeTruthRows: a file that grows keeps its rows, the rows of a
// window written again replace the old ones (a retried step), and the
// rows of each window date go to that date's file.
func TestMergeTruthRows(t *testing.T) { forEachStore(t, testMergeTruthRows) }

func testMergeTruthRows(t *testing.T, opts Options) {
	l := mustOpen(t, opts)
	d := time.Date(2026, 11, 7, 23, 50, 0, 0, time.UTC)
	row := func(key string, start time.Time, count int64) SummaryRow {
		return SummaryRowOf(event.Pane{Stream: "payments", Key: key, WindowStart: start, WindowEnd: start.Add(5 * time.Minute),
			Count: count, Sum: float64(count), Version: 1, Timing: "truth", ComputedBy: event.ComputedByBatch, EmittedAt: d})
	}
	if _, err := l.MergeTruthRows(t.Context(), "payments", "final-h23", []SummaryRow{row("u1", d, 1), row("u2", d, 2)}); err != nil {
		t.Fatal(err)
	}
	step2 := []SummaryRow{row("u1", d.Add(5*time.Minute), 3), row("u2", d, 20)}
	for range 2 { // the second time: a retried step
		if _, err := l.MergeTruthRows(t.Context(), "payments", "final-h23", step2); err != nil {
			t.Fatal(err)
		}
	}
	files, err := l.MergeTruthRows(t.Context(), "payments", "final-h23", []SummaryRow{row("u3", d.Add(10*time.Minute), 4)})
	if err != nil || len(files) != 1 || files[0].Path != "truth/stream=payments/window_date=2026-11-08/final-h23.parquet" {
		t.Fatalf("files %+v, %v", files, err)
	}
	got, err := l.ReadTruth(t.Context(), "payments", d, d.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{}
	for _, p := range got {
		counts[p.Key+"@"+p.WindowStart.Format("15:04")] += p.Count
	}
	want := map[string]int64{"u1@23:50": 1, "u2@23:50": 20, "u1@23:55": 3, "u3@00:00": 4}
	if len(got) != len(want) || fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("rows %v, want %v", counts, want)
	}
}
