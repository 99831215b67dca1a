package interop

import (
	"cmp"
	"database/sql"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"reckon/activities"
	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/lake"
)

// readmeQueries returns the SQL blocks of the README's "Query the lake"
// section, with the demo lake path replaced by root.
func readmeQueries(t testing.TB, root string) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "## Query the lake")
	if i < 0 {
		t.Fatal("README has no Query the lake section")
	}
	s = s[i+1:]
	if j := strings.Index(s, "\n## "); j >= 0 {
		s = s[:j]
	}
	return sqlBlocks(s, root)
}

// sqlBlocks returns the ```sql blocks of markdown s, with the demo lake
// path replaced by root.
func sqlBlocks(s, root string) []string {
	var out []string
	for {
		i := strings.Index(s, "```sql\n")
		if i < 0 {
			break
		}
		s = s[i+len("```sql\n"):]
		j := strings.Index(s, "```")
		out = append(out, strings.ReplaceAll(s[:j], ".reckon/lake", root))
		s = s[j+3:]
	}
	return out
}

// runReadmeQuery runs every statement of q and returns the last one's rows
// as column name → value maps.
func runReadmeQuery(t *testing.T, db *sql.DB, q string) []map[string]any {
	t.Helper()
	stmts := statements(q)
	for _, st := range stmts[:len(stmts)-1] {
		if _, err := db.Exec(st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	rows, err := db.Query(stmts[len(stmts)-1])
	if err != nil {
		t.Fatalf("%s: %v", stmts[len(stmts)-1], err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		m := map[string]any{}
		for i, c := range cols {
			m[c] = vals[i]
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// statements splits q into its statements, dropping empty ones and
// comment-only ones.
func statements(q string) []string {
	var stmts []string
	for _, st := range strings.Split(q, ";") {
		if strings.TrimSpace(stripComments(st)) != "" {
			stmts = append(stmts, st)
		}
	}
	return stmts
}

func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// curatedLake is a lake with closed, duplicate-free raw hours (what
// compaction leaves), a payments stream's pane history with corrections
// and truth rows, curated, and Z-report versions.
func curatedLake(t *testing.T) *lake.Lake {
	t.Helper()
	l, err := lake.Open(lake.Options{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for p := int32(0); p < 2; p++ {
		var rows []lake.RawRow
		for h := range 3 {
			rs := hourRows(rng, h, 500, 6, int64(len(rows)))
			for i := range rs {
				rs[i].KafkaPartition = p
			}
			rows = append(rows, rs...)
		}
		if _, err := l.WriteRaw(t.Context(), topic, p, 0, int64(len(rows)-1), rows); err != nil {
			t.Fatal(err)
		}
	}

	// A rejected record, for the rejected table's query.
	cfg, err := config.Load("", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	gate, err := event.NewGate(cfg.Gate)
	if err != nil {
		t.Fatal(err)
	}
	rw, err := l.NewRawWriter(lake.RawTable{Topic: topic, KeyPath: "data.id_perangkat", ValuePath: "data.suhu_c"}, gate)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := rw.WriteBatch(t.Context(), 2, []lake.RawRecord{{Offset: 0, Timestamp: start.Add(time.Hour), Value: []byte(`{"event_id":"not-a-uuid"}`)}}); err != nil || res.Rejected != 1 {
		t.Fatalf("rejected: %+v, %v", res, err)
	}

	var panes, truth []event.Pane
	at := start.Add(time.Hour)
	for k := range 4 {
		key := fmt.Sprintf("u%d", k)
		for w := range 6 {
			ws := start.Add(time.Duration(w) * 20 * time.Minute)
			pane := func(v int64, n int64, by string, timing event.Timing, reason string) event.Pane {
				at = at.Add(time.Second)
				return event.Pane{Stream: "payments", Key: key, WindowStart: ws, WindowEnd: ws.Add(5 * time.Minute), Count: n, Sum: float64(n) * 10,
					Min: 10, Max: 10, Version: v, Timing: timing, ComputedBy: by, EmittedAt: at, Reason: reason}
			}
			switch (k + w) % 4 {
			case 0: // provisional
				panes = append(panes, pane(1, 3, event.ComputedByStream, event.TimingOnTime, ""))
			case 1: // checked: final
				panes = append(panes, pane(1, 3, event.ComputedByStream, event.TimingOnTime, ""))
				truth = append(truth, pane(1, 3, event.ComputedByBatch, "truth", "matched"))
			case 2: // corrected
				panes = append(panes, pane(1, 3, event.ComputedByStream, event.TimingOnTime, ""), pane(2, 4, event.ComputedByStream, event.TimingLate, ""))
				truth = append(truth, pane(3, 5, event.ComputedByBatch, "truth", "corrected"))
				panes = append(panes, pane(3, 5, event.ComputedByBatch, event.TimingCorrection, "late events beyond lateness: 1"))
			case 3: // missing
				truth = append(truth, pane(1, 1, event.ComputedByBatch, "truth", "corrected"))
				panes = append(panes, pane(1, 1, event.ComputedByBatch, event.TimingCorrection, "missing"))
			}
		}
	}
	// A hopping stream (docs/adr/0041): u1's 5-minute windows, one starting
	// every minute, for docs/lake.md's moving-sum query.
	var hop []event.Pane
	for m := range 5 {
		ws := start.Add(time.Duration(m) * time.Minute)
		at = at.Add(time.Second)
		hop = append(hop, event.Pane{Stream: "payments_hop", Key: "u1", WindowStart: ws, WindowEnd: ws.Add(5 * time.Minute),
			Count: int64(m + 1), Sum: float64(m+1) * 10, Min: 10, Max: 10, Version: 1, Timing: event.TimingOnTime,
			ComputedBy: event.ComputedByStream, EmittedAt: at})
	}
	var files []string
	hf, err := l.WritePanes(t.Context(), "payments_hop", "panes", hop)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range hf {
		files = append(files, f.Path)
	}
	pf, err := l.WritePanes(t.Context(), "payments", "panes", panes)
	if err != nil {
		t.Fatal(err)
	}
	tf, err := l.WriteTruth(t.Context(), "payments", "truth", truth)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(pf, tf...) {
		files = append(files, f.Path)
	}
	if _, err := l.Curate(t.Context(), files); err != nil {
		t.Fatal(err)
	}

	// Served features: the payments users' checkouts 90 s apart, with
	// the rolling count and sum the stream would have served.
	var feats []lake.FeatureRow
	for k := range 4 {
		for i := range 5 {
			et := start.Add(time.Duration(k)*time.Hour + time.Duration(i)*90*time.Second)
			f := event.Feature{Stream: "payments", Key: fmt.Sprintf("u%d", k), EventID: fmt.Sprintf("ev-%d-%d", k, i), EventTime: et,
				Size: time.Minute, Count: 1, Sum: 100, Watermark: et.Add(-5 * time.Second), EmittedAt: et.Add(40 * time.Millisecond),
				ArrivedAt: et.Add(10 * time.Millisecond), SourceTopic: "payments-kejadian", SourceOffset: int64(10*k + i)}
			feats = append(feats, lake.FeatureRowOf(f, 0, int64(len(feats))))
		}
	}
	ff, err := l.WriteFeatures(t.Context(), "reckon-features-0-0-19", feats)
	if err != nil {
		t.Fatal(err)
	}
	// Their truth: u0's last event counted one more (a late event the
	// stream refused); u3's events not yet recomputed (pending), and an
	// event the stream never served.
	var truths []lake.FeatureTruthRow
	for _, f := range feats {
		if f.Key == "u3" {
			continue
		}
		tr := lake.FeatureTruthRow{Stream: "payments", Key: f.Key, EventID: f.EventID, EventTime: f.EventTime, SizeNS: f.SizeNS,
			Count: f.Count, Sum: f.Sum, ComputedAt: start.Add(6 * time.Hour).UnixMicro(), Trigger: "reconcile"}
		if f.EventID == "ev-0-4" {
			tr.Count, tr.Sum = 2, 250
		}
		truths = append(truths, tr)
	}
	truths = append(truths, lake.FeatureTruthRow{Stream: "payments", Key: "u0", EventID: "ev-0-late",
		EventTime: start.Add(5 * time.Minute).UnixMicro(), SizeNS: int64(time.Minute), Count: 1, Sum: 150,
		ComputedAt: start.Add(6 * time.Hour).UnixMicro(), Trigger: "reconcile"})
	ft, err := l.WriteFeatureTruth(t.Context(), "payments", "truth-20261107", truths, false)
	if err != nil {
		t.Fatal(err)
	}
	files = files[:0]
	for _, f := range append(ff, ft...) {
		files = append(files, f.Path)
	}
	if _, err := l.Curate(t.Context(), files); err != nil {
		t.Fatal(err)
	}

	// Z-report versions in the schema activities/zreport_lake.go writes.
	total := func(v float64) *float64 { return &v }
	count := func(v int64) *int64 { return &v }
	for _, z := range []activities.ZReportRow{
		{FiscalDrive: "9999078900001234", Shift: 1, Version: 1, Status: "mismatched", FinalizedAt: start.Add(time.Hour).UnixMicro(),
			Reason: "ofd total differs", OFDTotal: total(100), OFDReceipts: count(3), Missing: "DWH,RMS"},
		{FiscalDrive: "9999078900001234", Shift: 1, Version: 2, Status: "matched", FinalizedAt: start.Add(2 * time.Hour).UnixMicro(),
			Reason: "late dwh part"},
		{FiscalDrive: "9999078900001234", Shift: 2, Version: 1, Status: "matched", FinalizedAt: start.Add(3 * time.Hour).UnixMicro()},
	} {
		z.ShiftClosedAt, z.DifferencesJSON, z.SchemaVersion = start.UnixMicro(), "[]", 1
		key := fmt.Sprintf("zreports/close_date=2026-11-07/%s-%d-v%d.parquet", z.FiscalDrive, z.Shift, z.Version)
		if _, err := l.WriteFile(t.Context(), key, func(w io.Writer) error {
			pw := parquet.NewGenericWriter[activities.ZReportRow](w)
			if _, err := pw.Write([]activities.ZReportRow{z}); err != nil {
				return err
			}
			return pw.Close()
		}); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// TestReadmeQueries runs the README's DuckDB queries exactly as printed
// (the lake path replaced) and checks their answers against reckon's own
// readers: the hourly aggregate of duplicate-free hours, the windows and
// corrections tables, the latest Z-report versions.
func TestReadmeQueries(t *testing.T) {
	l := curatedLake(t)
	db := openDuckDB(t)
	qs := readmeQueries(t, filepath.ToSlash(l.Root()))
	if len(qs) != 4 {
		t.Fatalf("README has %d SQL blocks, this test checks 4", len(qs))
	}
	for _, q := range qs {
		if strings.Contains(q, "DISTINCT ON") || strings.Contains(q, "hive_types") {
			t.Errorf("README query needs a trick:\n%s", q)
		}
	}

	// 1. Hourly aggregate == reckon's deduplicating reader.
	aggs, _, err := l.Aggregate(t.Context(), lake.Query{Topic: topic, From: start, To: start.Add(24 * time.Hour)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]lake.WindowAgg{}
	for _, a := range aggs {
		want[a.Key+" "+a.WindowStart.UTC().Format(time.RFC3339)] = a
	}
	got := runReadmeQuery(t, db, qs[0])
	if len(got) != len(want) || len(got) == 0 {
		t.Errorf("hourly: DuckDB %d rows, reckon %d", len(got), len(want))
	}
	for _, r := range got {
		k := r["id_perangkat"].(string) + " " + r["hour"].(time.Time).UTC().Format(time.RFC3339)
		a, ok := want[k]
		if !ok || r["events"].(int64) != a.Count || r["min_suhu_c"].(float64) != a.Min || r["max_suhu_c"].(float64) != a.Max ||
			math.Abs(r["avg_suhu_c"].(float64)-math.Round(a.Sum/float64(a.Count)*100)/100) > 0.0051 {
			t.Errorf("hourly %s: DuckDB %v, reckon %+v", k, r, a.Agg)
		}
	}

	// 2. Windows table == lake.ReadWindows, one row per window.
	ws, err := l.ReadWindows(t.Context(), "payments", start, start.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(ws, func(a, b lake.WindowRow) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return cmp.Compare(a.WindowStart, b.WindowStart)
	})
	got = runReadmeQuery(t, db, qs[1])
	if len(got) != len(ws) || len(ws) != 24 {
		t.Fatalf("windows: DuckDB %d rows, reckon %d, want 24", len(got), len(ws))
	}
	statuses := map[string]int{}
	for i, r := range got {
		w := ws[i]
		statuses[w.Status]++
		if r["key"] != w.Key || r["window_start"].(time.Time).UnixMicro() != w.WindowStart || r["count"] != w.Count || r["sum"] != w.Sum ||
			r["status"] != w.Status || r["version"] != w.Version || r["computed_by"] != w.ComputedBy || r["reason"] != w.Reason ||
			r["updated_at"].(time.Time).UnixMicro() != w.UpdatedAt {
			t.Errorf("windows row %d: DuckDB %v, reckon %+v", i, r, w)
		}
	}
	if statuses[lake.StatusProvisional] != 6 || statuses[lake.StatusFinal] != 6 || statuses[lake.StatusCorrected] != 12 {
		t.Errorf("statuses %v", statuses)
	}

	// 3. Corrections beside the replaced figures; NULL when none.
	got = runReadmeQuery(t, db, qs[2])
	if len(got) != 12 {
		t.Fatalf("corrections: %d rows, want 12", len(got))
	}
	for _, r := range got {
		switch r["reason"] {
		case "missing":
			if r["prev_version"] != nil || r["prev_count"] != nil || r["prev_sum"] != nil || r["version"] != int64(1) {
				t.Errorf("missing window's correction %v", r)
			}
		default:
			if r["prev_version"] != int64(2) || r["prev_count"] != int64(4) || r["prev_sum"] != 40.0 || r["version"] != int64(3) || r["count"] != int64(5) {
				t.Errorf("correction %v", r)
			}
		}
	}

	// 4. Latest Z-report version per business key.
	got = runReadmeQuery(t, db, qs[3])
	if len(got) != 2 || got[0]["shift"] != int64(1) || got[0]["version"] != int64(2) || got[0]["status"] != "matched" ||
		got[1]["shift"] != int64(2) || got[1]["version"] != int64(1) {
		t.Errorf("latest Z-reports %v", got)
	}
}

// TestLakeDocQueries runs every DuckDB query of docs/lake.md: each reads
// its table without error and returns rows, and the windows table rebuilt
// from the history at a time after every version equals the curated one.
func TestLakeDocQueries(t *testing.T) {
	l := curatedLake(t)
	db := openDuckDB(t)
	b, err := os.ReadFile("../../docs/lake.md")
	if err != nil {
		t.Fatal(err)
	}
	// The queries on the files; the SQL endpoint's section (its views) is
	// run by sqlserve's TestDocExamples.
	doc, _, _ := strings.Cut(string(b), "\n## SQL endpoint views")
	qs := sqlBlocks(doc, filepath.ToSlash(l.Root()))
	if len(qs) < 9 {
		t.Fatalf("docs/lake.md has %d SQL blocks", len(qs))
	}
	var asOf []map[string]any
	for _, q := range qs {
		got := runReadmeQuery(t, db, q)
		if len(got) == 0 {
			t.Errorf("no rows from\n%s", q)
		}
		if strings.Contains(q, "WITH v AS") {
			asOf = got
		}
	}
	ws := runReadmeQuery(t, db, qs[slices.IndexFunc(qs, func(q string) bool { return strings.Contains(q, "windows/**") })])
	if len(asOf) != len(ws) || len(ws) == 0 {
		t.Fatalf("as of now: %d windows, the windows table %d", len(asOf), len(ws))
	}
	for i, r := range asOf {
		w := ws[i]
		if r["key"] != w["key"] || r["window_start"] != w["window_start"] || r["count"] != w["count"] || r["version"] != w["version"] ||
			r["status"] != w["status"] || r["updated_at"] != w["updated_at"] {
			t.Errorf("window %d: from the history %v, the windows table %v", i, r, w)
		}
	}
}
