package workers

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"reckon/internal/event"
	"reckon/lake"
)

// readArrowStream reads an Arrow IPC stream with arrow-go's reader and
// returns its schema and every row as column name → Go value (NULL: nil,
// timestamps as time.Time).
func readArrowStream(t *testing.T, b []byte) (*arrow.Schema, []map[string]any) {
	t.Helper()
	r, err := ipc.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	var rows []map[string]any
	for r.Next() {
		rec := r.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			row := map[string]any{}
			for c, f := range rec.Schema().Fields() {
				col := rec.Column(c)
				if col.IsNull(i) {
					row[f.Name] = nil
					continue
				}
				switch a := col.(type) {
				case *array.String:
					row[f.Name] = a.Value(i)
				case *array.Int64:
					row[f.Name] = a.Value(i)
				case *array.Float64:
					row[f.Name] = a.Value(i)
				case *array.Timestamp:
					row[f.Name] = a.Value(i).ToTime(arrow.Microsecond)
				default:
					t.Fatalf("column %s: unexpected array %T", f.Name, col)
				}
			}
			rows = append(rows, row)
		}
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return r.Schema(), rows
}

// TestLakeQueryArrow: --format arrow writes an Arrow IPC stream that
// arrow-go's reader reads back with typed columns (timestamps in µs UTC)
// and the same rows as --format json, for an aggregate of a topic and for
// a stream's curated windows (--stream), which `lake curate` rebuilds.
func TestLakeQueryArrow(t *testing.T) {
	root := filepath.Join(t.TempDir(), "lake")
	lines := []string{
		lakeLine(1, "2026-11-07T08:10:00Z", "2026-11-07T08:10:01Z", "sensor-07", "24.5"),
		lakeLine(2, "2026-11-07T08:20:00Z", "2026-11-07T08:20:01Z", "sensor-07", "26"),
		lakeLine(3, "2026-11-07T08:09:59.999999Z", "2026-11-07T08:10:02Z", "sensor-01", "-3.5"),
		lakeLine(5, "2026-11-07T09:30:00Z", "2026-11-07T09:30:02Z", "sensor-01", "20.25"),
	}
	mustLake(t, strings.Join(lines, "\n")+"\n", "write", "--lake", root, "--topic", "m8-suhu-kejadian", "--input", "-")
	query := []string{"query", "--lake", root, "--topic", "m8-suhu-kejadian", "--from", "2026-11-07", "--to", "2026-11-08", "--window", "30m"}
	compareArrowJSON(t, mustLake(t, "", append(query, "--format", "arrow")...), mustLake(t, "", append(query, "--format", "json")...), 3, 8)

	// The curated windows of a stream: a provisional window, a corrected one
	// and a retraction (count 0: avg NULL in Arrow).
	l, err := lake.Open(lake.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	ws := time.Date(2026, 11, 7, 8, 0, 0, 0, time.UTC)
	pane := func(key string, v, n int64, by string, timing event.Timing, reason string) event.Pane {
		return event.Pane{Stream: "suhu", Key: key, WindowStart: ws, WindowEnd: ws.Add(time.Hour), Count: n, Sum: float64(n) * 2.5, Min: 2.5, Max: 2.5,
			Version: v, Timing: timing, ComputedBy: by, EmittedAt: ws.Add(time.Hour + time.Duration(v)*time.Second), Reason: reason}
	}
	files, err := l.WritePanes(t.Context(), "suhu", "panes", []event.Pane{
		pane("sensor-01", 1, 2, event.ComputedByStream, event.TimingOnTime, ""),
		pane("sensor-07", 1, 2, event.ComputedByStream, event.TimingOnTime, ""),
		pane("sensor-07", 2, 3, event.ComputedByBatch, event.TimingCorrection, "late events beyond lateness: 1"),
		pane("sensor-09", 1, 1, event.ComputedByStream, event.TimingOnTime, ""),
		pane("sensor-09", 2, 0, event.ComputedByBatch, event.TimingCorrection, "retracted"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Curate(t.Context(), []string{files[0].Path}); err != nil {
		t.Fatal(err)
	}
	query = []string{"query", "--lake", root, "--stream", "suhu", "--from", "2026-11-07", "--to", "2026-11-08"}
	jsonOut := mustLake(t, "", append(query, "--format", "json")...)
	if !strings.Contains(jsonOut, `"key":"sensor-07"`) || !strings.Contains(jsonOut, `"status":"corrected","version":2`) {
		t.Errorf("--stream json:\n%s", jsonOut)
	}
	compareArrowJSON(t, mustLake(t, "", append(query, "--format", "arrow")...), jsonOut, 3, 13)
	if code, _, errs := lakeMain(t, "", "query", "--lake", root, "--stream", "suhu", "--window", "1h", "--from", "2026-11-07", "--to", "2026-11-08"); code != 2 || !strings.Contains(errs, "--window does not apply to --stream") {
		t.Errorf("--stream with --window: exit %d: %s", code, errs)
	}

	// `lake curate` rebuilds a lost day from the history.
	if err := os.RemoveAll(filepath.Join(root, "windows")); err != nil {
		t.Fatal(err)
	}
	if out := mustLake(t, "", "query", "--lake", root, "--stream", "suhu", "--from", "2026-11-07", "--to", "2026-11-08", "--format", "json"); out != "" {
		t.Fatalf("windows table still there:\n%s", out)
	}
	if out := mustLake(t, "", "curate", "--lake", root, "--stream", "suhu", "--date", "2026-11-07"); !strings.Contains(out, "suhu 2026-11-07: 3 windows, 2 corrections") {
		t.Errorf("lake curate:\n%s", out)
	}
	if out := mustLake(t, "", append(query, "--format", "json")...); out != jsonOut {
		t.Errorf("after lake curate:\n%s\nwant:\n%s", out, jsonOut)
	}
}

// compareArrowJSON checks the Arrow stream holds the JSON lines' rows,
// column by column, with typed timestamps.
func compareArrowJSON(t *testing.T, arrowOut, jsonOut string, wantRows, wantCols int) {
	t.Helper()
	schema, rows := readArrowStream(t, []byte(arrowOut))
	if len(schema.Fields()) != wantCols {
		t.Fatalf("schema %v", schema)
	}
	if ts, ok := schema.Field(1).Type.(*arrow.TimestampType); !ok || ts.Unit != arrow.Microsecond || ts.TimeZone != "UTC" {
		t.Errorf("window_start type %v", schema.Field(1).Type)
	}
	sc := bufio.NewScanner(strings.NewReader(jsonOut))
	i := 0
	for ; sc.Scan(); i++ {
		var want map[string]any
		if err := json.Unmarshal(sc.Bytes(), &want); err != nil {
			t.Fatal(err)
		}
		if i >= len(rows) {
			continue
		}
		got := rows[i]
		for name, w := range want {
			g, ok := got[name]
			if !ok {
				t.Errorf("row %d: no column %s in the Arrow stream", i, name)
				continue
			}
			switch g := g.(type) {
			case time.Time:
				if g.UTC().Format(time.RFC3339Nano) != w {
					t.Errorf("row %d %s: arrow %v, json %v", i, name, g, w)
				}
			case int64:
				if float64(g) != w.(float64) {
					t.Errorf("row %d %s: arrow %v, json %v", i, name, g, w)
				}
			case float64:
				if math.Abs(g-w.(float64)) > 1e-12 {
					t.Errorf("row %d %s: arrow %v, json %v", i, name, g, w)
				}
			case nil:
				if name != "avg" || got["count"] != int64(0) {
					t.Errorf("row %d %s: arrow NULL, json %v", i, name, w)
				}
			default:
				if g != w {
					t.Errorf("row %d %s: arrow %v, json %v", i, name, g, w)
				}
			}
		}
	}
	if i != len(rows) || i != wantRows {
		t.Errorf("json %d rows, arrow %d, want %d", i, len(rows), wantRows)
	}
}
