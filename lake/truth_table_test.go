package lake

import (
	"encoding/json"
	"errors"
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
