//go:build duckdb_arrow

package sqlserve

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	_ "github.com/apache/arrow-go/v18/arrow/flight/flightsql/driver"
	_ "github.com/duckdb/duckdb-go/v2"
)

// windowRow is one row of windows (or windows_as_of) as the test reads it.
type windowRow struct {
	key            string
	start          time.Time
	count          int64
	sum, min, max  float64
	version        int64
	status, timing string
}

const windowCols = `key, window_start, "count", "sum", "min", "max", version, status, timing`

func parseWindows(t *testing.T, tab *table) []windowRow {
	t.Helper()
	var out []windowRow
	for _, r := range tab.rows {
		ws, err := time.Parse("2006-01-02 15:04:05Z", r[1])
		if err != nil {
			ws, err = time.Parse(time.RFC3339Nano, r[1])
		}
		if err != nil {
			t.Fatalf("window_start %q: %v", r[1], err)
		}
		w := windowRow{key: r[0], start: ws.UTC(), status: r[7], timing: r[8]}
		w.count, _ = strconv.ParseInt(r[2], 10, 64)
		w.sum, _ = strconv.ParseFloat(r[3], 64)
		w.min, _ = strconv.ParseFloat(r[4], 64)
		w.max, _ = strconv.ParseFloat(r[5], 64)
		w.version, _ = strconv.ParseInt(r[6], 10, 64)
		out = append(out, w)
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func mustRead(t *testing.T, c *flightsql.Client, q string) *table {
	t.Helper()
	tab, err := readAll(context.Background(), c, q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return tab
}

// TestViews runs every view through arrow-go's Flight SQL client and
// checks what each holds: windows equal to the lake reader's aggregate
// (the engine of `reckon lake query`) and to DuckDB run directly on the
// files, statuses, time travel before and after the correction,
// corrections with the previous figures, Z-report versions.
func TestViews(t *testing.T) {
	tl := buildLake(t)
	c := newClient(t, startServer(t, openEngine(t, tl.root), ServeOptions{}))

	count := func(q string) int {
		t.Helper()
		n, err := strconv.Atoi(mustRead(t, c, q).rows[0][0])
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count("SELECT count(*) FROM raw"); n != tl.rawRows {
		t.Errorf("raw: %d rows, want %d (every archived copy)", n, tl.rawRows)
	}
	if n := count("SELECT count(*) FROM events"); n != tl.events || tl.events == tl.rawRows {
		t.Errorf("events: %d rows, want %d distinct of %d archived", n, tl.events, tl.rawRows)
	}
	// Of a redelivered event's copies, events keeps the first archived.
	if n := count(`SELECT count(*) FROM events e JOIN raw r USING (topic, event_id)
	    WHERE (r.ingested_at, r.kafka_partition, r.kafka_offset) < (e.ingested_at, e.kafka_partition, e.kafka_offset)`); n != 0 {
		t.Errorf("events keeps a later copy for %d events", n)
	}
	// EXPLAIN [ANALYZE] of a SELECT is read-only too.
	for _, q := range []string{"EXPLAIN SELECT * FROM windows", "explain analyze SELECT count(*) FROM events"} {
		if tab := mustRead(t, c, q); len(tab.rows) == 0 {
			t.Errorf("%s: no plan", q)
		}
	}
	if n := count("SELECT count(*) FROM panes"); n != len(tl.truth)+1 {
		t.Errorf("panes: %d rows, want %d (every window once, one twice)", n, len(tl.truth)+1)
	}

	// windows == lake.Aggregate == DuckDB on the files, window by window.
	got := parseWindows(t, mustRead(t, c, "SELECT "+windowCols+" FROM windows ORDER BY key, window_start"))
	if len(got) != len(tl.truth) {
		t.Fatalf("windows: %d rows, lake query %d windows", len(got), len(tl.truth))
	}
	direct := duckDBHourly(t, tl.root)
	if len(direct) != len(tl.truth) {
		t.Fatalf("DuckDB on the files: %d windows, lake query %d", len(direct), len(tl.truth))
	}
	for i, a := range tl.truth {
		w, d := got[i], direct[i]
		if w.key != a.Key || !w.start.Equal(a.WindowStart) || w.count != a.Count || !near(w.sum, a.Sum) || w.min != a.Min || w.max != a.Max {
			t.Errorf("window %d: SQL %+v, lake query %s %v %+v", i, w, a.Key, a.WindowStart, a.Agg)
		}
		if d.key != w.key || !d.start.Equal(w.start) || d.count != w.count || !near(d.sum, w.sum) || d.min != w.min || d.max != w.max {
			t.Errorf("window %d: SQL %+v, DuckDB on the files %+v", i, w, d)
		}
		wantStatus, wantVersion := "final", int64(1)
		switch {
		case a.Key == "sensor-01" && a.WindowStart.Equal(t0.Add(time.Hour)):
			wantStatus, wantVersion = "corrected", 2
		case a.Key == "sensor-03" && a.WindowStart.Equal(t0.Add(2*time.Hour)):
			wantStatus = "corrected"
		}
		if w.status != wantStatus || w.version != wantVersion {
			t.Errorf("window %s %v: status %s v%d, want %s v%d", w.key, w.start, w.status, w.version, wantStatus, wantVersion)
		}
	}

	// Time travel: before the correction the consumer saw v1, one event
	// short, and nothing for the missing window; after it, v2.
	asOf := func(at time.Time) map[string]windowRow {
		t.Helper()
		m := map[string]windowRow{}
		q := fmt.Sprintf("SELECT %s FROM windows_as_of(TIMESTAMP '%s') ORDER BY key, window_start", windowCols, at.Format("2006-01-02 15:04:05"))
		for _, w := range parseWindows(t, mustRead(t, c, q)) {
			m[w.key+" "+w.start.Format(time.RFC3339)] = w
		}
		return m
	}
	late := "sensor-01 " + t0.Add(time.Hour).Format(time.RFC3339)
	missing := "sensor-03 " + t0.Add(2*time.Hour).Format(time.RFC3339)
	var truthLate struct{ count int64 }
	for _, a := range tl.truth {
		if a.Key+" "+a.WindowStart.Format(time.RFC3339) == late {
			truthLate.count = a.Count
		}
	}
	before, after := asOf(tl.beforeCorrection), asOf(tl.afterCorrection)
	if w, ok := before[late]; !ok || w.version != 1 || w.count != truthLate.count-1 || w.status != "provisional" || w.timing != "on_time" {
		t.Errorf("windows_as_of before the correction: %s = %+v (present %v), want v1 provisional with %d events", late, w, ok, truthLate.count-1)
	}
	if _, ok := before[missing]; ok || len(before) != len(tl.truth)-1 {
		t.Errorf("windows_as_of before the correction: %d windows (missing one present: %v), want %d", len(before), ok, len(tl.truth)-1)
	}
	if w := after[late]; w.version != 2 || w.count != truthLate.count || w.status != "corrected" || w.timing != "correction" {
		t.Errorf("windows_as_of after the correction: %s = %+v, want v2 corrected with %d events", late, w, truthLate.count)
	}
	if len(after) != len(tl.truth) {
		t.Errorf("windows_as_of after the correction: %d windows, want %d", len(after), len(tl.truth))
	}
	for k, w := range after {
		if k != late && k != missing && w.status != "final" {
			t.Errorf("windows_as_of after the batch checked everything: %s is %s", k, w.status)
		}
	}
	if n := count(fmt.Sprintf("SELECT count(*) FROM windows_as_of(TIMESTAMP '%s')", t0.Format("2006-01-02 15:04:05"))); n != 0 {
		t.Errorf("windows_as_of(t0): %d windows, want none (nothing emitted yet)", n)
	}

	// corrections: the late window with its previous figures, the missing
	// one without.
	cor := mustRead(t, c, `SELECT key, version, reason, "count", prev_version, prev_count FROM corrections ORDER BY key`).rows
	want := [][]string{
		{"sensor-01", "2", "late events", strconv.FormatInt(truthLate.count, 10), "1", strconv.FormatInt(truthLate.count-1, 10)},
		{"sensor-03", "1", "missing", cor[len(cor)-1][3], "NULL", "NULL"},
	}
	if !slices.EqualFunc(cor, want, slices.Equal) {
		t.Errorf("corrections: %v, want %v", cor, want)
	}

	// Z-reports: latest version, every version, and as of between them.
	for q, want := range map[string]string{
		"SELECT string_agg(version::VARCHAR || ' ' || status, ',' ORDER BY version) FROM zreport_versions":                                             "1 incomplete,2 complete",
		"SELECT string_agg(version::VARCHAR || ' ' || status, ',') FROM zreports":                                                                      "2 complete",
		"SELECT string_agg(version::VARCHAR || ' ' || status, ',') FROM zreports_as_of(TIMESTAMP '" + t0.Add(3*time.Hour).Format(time.DateTime) + "')": "1 incomplete",
		"SELECT count(*) FROM zreports_as_of(TIMESTAMP '" + t0.Add(time.Hour).Format(time.DateTime) + "')":                                             "0",
	} {
		if got := mustRead(t, c, q).rows[0][0]; got != want {
			t.Errorf("%s: %q, want %q", q, got, want)
		}
	}
}

// duckDBHourly is the hourly aggregate computed by DuckDB directly on the
// raw files (its own database, no views, no lock-down).
func duckDBHourly(t *testing.T, root string) []windowRow {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(fmt.Sprintf(`SELECT key, time_bucket(INTERVAL 1 HOUR, occurred_at) AS h, count(*), sum(value), min(value), max(value)
	  FROM (SELECT DISTINCT ON (event_id) key, occurred_at, value FROM read_parquet('%s/raw/**/*.parquet', hive_partitioning=true))
	  GROUP BY ALL ORDER BY key, h`, root))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []windowRow
	for rows.Next() {
		var w windowRow
		if err := rows.Scan(&w.key, &w.start, &w.count, &w.sum, &w.min, &w.max); err != nil {
			t.Fatal(err)
		}
		w.start = w.start.UTC()
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMetadata: the calls a client's table browser makes list the views
// with their schemas, and GetSqlInfo says the endpoint is read-only.
func TestMetadata(t *testing.T) {
	tl := buildLake(t)
	c := newClient(t, startServer(t, openEngine(t, tl.root), ServeOptions{}))
	ctx := context.Background()
	read := func(info *flight.FlightInfo, err error) *table {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		tab, err := readInfo(ctx, c, info)
		if err != nil {
			t.Fatal(err)
		}
		return tab
	}
	if cats := read(c.GetCatalogs(ctx)); !slices.EqualFunc(cats.rows, [][]string{{"memory"}}, slices.Equal) {
		t.Errorf("GetCatalogs: %v", cats.rows)
	}
	if sch := read(c.GetDBSchemas(ctx, &flightsql.GetDBSchemasOpts{})); !slices.EqualFunc(sch.rows, [][]string{{"memory", "main"}}, slices.Equal) {
		t.Errorf("GetDBSchemas: %v", sch.rows)
	}
	tabs := read(c.GetTables(ctx, &flightsql.GetTablesOpts{IncludeSchema: true}))
	var names []string
	for _, r := range tabs.rows {
		names = append(names, r[2])
		if r[0] != "memory" || r[1] != "main" || r[3] != "VIEW" {
			t.Errorf("GetTables row %v", r[:4])
		}
	}
	want := slices.Sorted(slices.Values(ViewNames()))
	if !slices.Equal(names, want) {
		t.Errorf("GetTables: %v, want %v", names, want)
	}
	// The schema GetTables gives is the schema a query returns.
	info, err := c.GetTables(ctx, &flightsql.GetTablesOpts{IncludeSchema: true, TableNameFilterPattern: ptr("zrep%"), TableTypes: []string{"VIEW"}})
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := c.DoGet(ctx, info.Endpoint[0].Ticket)
	if err != nil {
		t.Fatal(err)
	}
	var filtered []string
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			name := rec.Column(2).ValueStr(i)
			filtered = append(filtered, name)
			sc, err := flight.DeserializeSchema(rec.Column(4).(interface{ Value(int) []byte }).Value(i), c.Alloc)
			if err != nil {
				t.Fatal(err)
			}
			if q := mustRead(t, c, "SELECT * FROM "+name+" LIMIT 1"); !q.schema.Equal(sc) {
				t.Errorf("%s: GetTables schema %v, query schema %v", name, sc, q.schema)
			}
		}
	}
	rdr.Release()
	if !slices.Equal(filtered, []string{"zreport_versions", "zreports"}) {
		t.Errorf("GetTables zrep%%: %v", filtered)
	}

	if pk := read(c.GetPrimaryKeys(ctx, flightsql.TableRef{Table: "windows"})); len(pk.rows) != 0 || pk.schema.NumFields() != 6 {
		t.Errorf("GetPrimaryKeys: %v %v", pk.rows, pk.schema)
	}
	if fk := read(c.GetImportedKeys(ctx, flightsql.TableRef{Table: "windows"})); len(fk.rows) != 0 {
		t.Errorf("GetImportedKeys: %v", fk.rows)
	}
	if res, err := c.CloseSession(ctx, &flight.CloseSessionRequest{}); err != nil || res.GetStatus() != flight.CloseSessionResultClosed {
		t.Errorf("CloseSession: %v, %v", res, err)
	}
	si := read(c.GetSqlInfo(ctx, []flightsql.SqlInfo{flightsql.SqlInfoFlightSqlServerName, flightsql.SqlInfoFlightSqlServerReadOnly}))
	got := map[string]string{}
	for _, r := range si.rows {
		got[r[0]] = r[1]
	}
	name, ro := strconv.Itoa(int(flightsql.SqlInfoFlightSqlServerName)), strconv.Itoa(int(flightsql.SqlInfoFlightSqlServerReadOnly))
	if !strings.Contains(got[name], "reckon") || !strings.Contains(got[ro], "true") {
		t.Errorf("GetSqlInfo: %v", got)
	}
}

func ptr[T any](v T) *T { return &v }

// TestDriver: arrow-go's database/sql driver runs the views, with and
// without parameters (prepared statements), and 8 clients at once get the
// same answers.
func TestDriver(t *testing.T) {
	tl := buildLake(t)
	addr := startServer(t, openEngine(t, tl.root), ServeOptions{})
	db, err := sql.Open("flightsql", "flightsql://"+addr)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM windows WHERE status = 'final'").Scan(&n); err != nil || n != len(tl.truth)-2 {
		t.Errorf("final windows: %d, %v; want %d", n, err, len(tl.truth)-2)
	}
	var count int64
	var status string
	err = db.QueryRow(`SELECT "count", status FROM windows WHERE key = ? AND window_start = ?`, "sensor-01", t0.Add(time.Hour)).Scan(&count, &status)
	if err != nil || status != "corrected" {
		t.Errorf("prepared with parameters: %d %q, %v", count, status, err)
	}
	err = db.QueryRow(`SELECT version FROM windows_as_of(?) WHERE key = 'sensor-01' AND window_start = ?`, tl.beforeCorrection, t0.Add(time.Hour)).Scan(&count)
	if err != nil || count != 1 {
		t.Errorf("windows_as_of(?) before the correction: v%d, %v", count, err)
	}

	// 8 concurrent clients, each its own connection, each query 5 times.
	want := windowsDigest(t, db)
	var wg sync.WaitGroup
	errs := make(chan error, 8*5)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cdb, err := sql.Open("flightsql", "flightsql://"+addr)
			if err != nil {
				errs <- err
				return
			}
			defer cdb.Close()
			for j := 0; j < 5; j++ {
				got, err := windowsDigestErr(cdb)
				if err == nil && got != want {
					err = fmt.Errorf("client %d: %q, want %q", i, got, want)
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func windowsDigest(t *testing.T, db *sql.DB) string {
	t.Helper()
	s, err := windowsDigestErr(db)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// windowsDigestErr reads the whole windows view into one string.
func windowsDigestErr(db *sql.DB) (string, error) {
	rows, err := db.Query(`SELECT key, window_start, "count", "sum", version, status FROM windows ORDER BY key, window_start`)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var key, status string
		var ws time.Time
		var count, version int64
		var sum float64
		if err := rows.Scan(&key, &ws, &count, &sum, &version, &status); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s %s %d %v %d %s;", key, ws.UTC().Format(time.RFC3339), count, sum, version, status)
	}
	return b.String(), rows.Err()
}

// TestViewsFollowTheLake: the endpoint starts on a lake directory that
// does not exist yet, and tables written after it started appear in the
// views (DuckDB binds a view when it is created).
func TestViewsFollowTheLake(t *testing.T) {
	root := filepath.Join(t.TempDir(), "lake") // not there yet, as on a fresh `make dev`
	c := newClient(t, startServer(t, openEngine(t, root), ServeOptions{}))
	for _, v := range ViewNames() {
		if tab := mustRead(t, c, "SELECT * FROM "+v); len(tab.rows) != 0 {
			t.Errorf("%s on an empty lake: %d rows", v, len(tab.rows))
		}
	}
	empty := map[string]string{}
	for _, v := range ViewNames() {
		empty[v] = mustRead(t, c, "SELECT * FROM "+v+" LIMIT 0").schema.String()
	}
	// The same directory, now filled.
	full := buildLake(t)
	if err := os.CopyFS(root, os.DirFS(full.root)); err != nil {
		t.Fatal(err)
	}
	if n := mustRead(t, c, "SELECT count(*) FROM windows").rows[0][0]; n != strconv.Itoa(len(full.truth)) {
		t.Errorf("windows after the lake filled: %s rows, want %d", n, len(full.truth))
	}
	for _, v := range ViewNames() {
		if got := mustRead(t, c, "SELECT * FROM "+v+" LIMIT 0").schema.String(); got != empty[v] {
			t.Errorf("%s: schema on the empty lake\n%s\non files\n%s", v, empty[v], got)
		}
	}
}
