package interop

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// docColumn is one column of a table as docs/lake.md describes it.
type docColumn struct {
	name, parquet, duckdb, line string
}

// lakeDocTables returns, per "## <table>" section of docs/lake.md, the
// columns its "| column | Parquet type | DuckDB | meaning |" table lists.
// A row may name several columns: `a`, `b`, `c` with one type each, or
// fewer types than names (the last repeats; "DOUBLE ×3" counts three),
// and `dwh_…` stands for the first name with its source prefix replaced.
// A DuckDB cell's "NULL…" notes nullability, not a type.
func lakeDocTables(t *testing.T, doc string) map[string][]docColumn {
	t.Helper()
	tables := map[string][]docColumn{}
	section := ""
	names := regexp.MustCompile("`([^`]+)`")
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(l, "## ") {
			section = strings.TrimPrefix(l, "## ")
			continue
		}
		if !strings.HasPrefix(l, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), "|")
		if len(cells) < 4 || section == "" {
			continue
		}
		var cols []string
		for _, m := range names.FindAllStringSubmatch(cells[0], -1) {
			n := m[1]
			if rest, ok := strings.CutSuffix(n, "_…"); ok && len(cols) > 0 {
				_, suffix, _ := strings.Cut(cols[0], "_")
				n = rest + "_" + suffix
			}
			cols = append(cols, n)
		}
		var types []string
		for _, ty := range strings.Split(cells[2], ",") {
			ty = strings.TrimSpace(ty)
			if ty == "" || strings.HasPrefix(ty, "NULL") {
				continue
			}
			n := 1
			if base, times, ok := strings.Cut(ty, " ×"); ok {
				if k, err := strconv.Atoi(times); err == nil {
					ty, n = base, k
				}
			}
			for range n {
				types = append(types, ty)
			}
		}
		if len(cols) == 0 || len(types) == 0 {
			t.Errorf("docs/lake.md %s: cannot read the row %q", section, l)
			continue
		}
		for i, c := range cols {
			tables[section] = append(tables[section], docColumn{c, strings.TrimSpace(cells[1]), types[min(i, len(types)-1)], l})
		}
	}
	return tables
}

// duckType spells a DuckDB type as DESCRIBE reports it.
func duckType(s string) string {
	switch s = strings.ToUpper(strings.TrimSpace(s)); s {
	case "TIMESTAMPTZ":
		return "TIMESTAMP WITH TIME ZONE"
	}
	return s
}

// TestLakeDocColumnTypes: every table docs/lake.md describes has exactly
// the columns it lists, with the DuckDB types it gives, as DuckDB's
// DESCRIBE reports them for files reckon's writers wrote (hive
// partitioning on, as the doc's queries read them), and every column it
// calls a UTC timestamp is isAdjustedToUTC=true in the files. The windows table
// lists its own columns after "every summaries column"; truth files are
// "in the summaries schema".
func TestLakeDocColumnTypes(t *testing.T) {
	l := curatedLake(t)
	db := openDuckDB(t)
	b, err := os.ReadFile("../../docs/lake.md")
	if err != nil {
		t.Fatal(err)
	}
	doc, _, _ := strings.Cut(string(b), "\n## SQL endpoint views")
	tables := lakeDocTables(t, doc)
	tables["windows"] = append(slices.Clone(tables["summaries"]), tables["windows"]...)
	tables["truth"] = tables["summaries"]
	for _, table := range []string{"raw", "rejected", "summaries", "truth", "windows", "corrections", "features",
		"feature_truth", "feature_status", "zreports"} {
		want := tables[table]
		if len(want) == 0 {
			t.Errorf("docs/lake.md lists no columns of %s", table)
			continue
		}
		glob := filepath.ToSlash(filepath.Join(l.Root(), table)) + "/**/*.parquet"
		rows, err := db.Query("DESCRIBE SELECT * FROM read_parquet('" + glob + "', hive_partitioning = true)")
		if err != nil {
			t.Errorf("%s: %v", table, err)
			continue
		}
		got := map[string]string{}
		for rows.Next() {
			var name, typ string
			var null, key, def, extra any
			if err := rows.Scan(&name, &typ, &null, &key, &def, &extra); err != nil {
				t.Fatal(err)
			}
			got[name] = typ
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		listed := map[string]bool{}
		for _, c := range want {
			listed[c.name] = true
			typ, ok := got[c.name]
			switch {
			case !ok:
				t.Errorf("%s.%s: in docs/lake.md, not in the files (DESCRIBE: %v)\n  %s", table, c.name, got, c.line)
			case typ != duckType(c.duckdb):
				t.Errorf("%s.%s: docs/lake.md says %s, DuckDB reads %s\n  %s", table, c.name, c.duckdb, typ, c.line)
			}
		}
		for name, typ := range got {
			if !listed[name] {
				t.Errorf("%s.%s (%s): in the files, not in docs/lake.md", table, name, typ)
			}
		}
		checkTimestampUTC(t, l.Root(), table, want)
	}
}

// checkTimestampUTC: a column docs/lake.md calls a "timestamp … UTC" is
// an INT64 TIMESTAMP with isAdjustedToUTC=true in the table's files (one
// file read), and one it calls "not UTC-adjusted" has it false.
func checkTimestampUTC(t *testing.T, root, table string, cols []docColumn) {
	t.Helper()
	var file string
	_ = filepath.WalkDir(filepath.Join(root, table), func(p string, d fs.DirEntry, err error) error {
		if err == nil && file == "" && !d.IsDir() && strings.HasSuffix(p, ".parquet") && !strings.HasPrefix(d.Name(), ".") {
			file = p
		}
		return err
	})
	if file == "" {
		t.Errorf("%s: no file", table)
		return
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for _, c := range cols {
		if !strings.Contains(c.parquet, "timestamp") {
			continue
		}
		leaf, ok := pf.Schema().Lookup(c.name)
		if !ok {
			t.Errorf("%s.%s: not in %s", table, c.name, file)
			continue
		}
		var ts *format.TimestampType
		if lt := leaf.Node.Type().LogicalType(); lt != nil {
			ts, _ = lt.Value.(*format.TimestampType)
		}
		if ts == nil {
			t.Errorf("%s.%s: docs/lake.md says %s, the file's type is %v", table, c.name, c.parquet, leaf.Node.Type())
			continue
		}
		docUTC := strings.Contains(c.parquet, "UTC") && !strings.Contains(c.parquet, "not UTC")
		if ts.IsAdjustedToUTC != docUTC {
			t.Errorf("%s.%s: docs/lake.md says %s, the file has isAdjustedToUTC=%v", table, c.name, c.parquet,
				ts.IsAdjustedToUTC)
		}
	}
}
