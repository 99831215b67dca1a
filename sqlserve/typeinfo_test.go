//go:build duckdb_arrow

package sqlserve

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql/schema_ref"
)

// TestXdbcTypeInfo: GetXdbcTypeInfo through arrow-go's Flight SQL client
// lists every type a view's column has and a summed, cast or literal
// column commonly has, with its XDBC codes, and filters on one data type.
func TestXdbcTypeInfo(t *testing.T) {
	ctx := context.Background()
	tl := buildLake(t)
	c := newClient(t, startServer(t, openEngine(t, tl.root), ServeOptions{}))

	sr, err := c.GetXdbcTypeInfoSchema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sc, err := flight.DeserializeSchema(sr.GetSchema(), nil); err != nil || !sc.Equal(schema_ref.XdbcTypeInfo) {
		t.Fatalf("GetXdbcTypeInfoSchema: %v, %v", sc, err)
	}
	info, err := c.GetXdbcTypeInfo(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	all, err := readInfo(ctx, c, info)
	if err != nil {
		t.Fatal(err)
	}
	if !all.schema.Equal(schema_ref.XdbcTypeInfo) {
		t.Fatalf("schema %v", all.schema)
	}
	byName := map[string][]string{}
	var codes []int
	for _, r := range all.rows {
		byName[r[0]] = r
		n, _ := strconv.Atoi(r[1])
		codes = append(codes, n)
	}
	if !slices.IsSorted(codes) {
		t.Errorf("rows not ordered by data_type: %v", codes)
	}

	// Every column type of every view, and of common expressions.
	var types []string
	for _, v := range ViewNames() {
		for _, r := range mustRead(t, c, "SELECT column_type FROM (DESCRIBE "+v+")").rows {
			types = append(types, r[0])
		}
	}
	for _, r := range mustRead(t, c, `SELECT typeof(sum("count")), typeof(1.5), typeof(true), typeof(now()::TIMESTAMP), typeof(INTERVAL 1 HOUR) FROM windows`).rows[:1] {
		types = append(types, r...)
	}
	slices.Sort(types)
	for _, ty := range slices.Compact(types) {
		if i := strings.IndexByte(ty, '('); i > 0 {
			ty = ty[:i] // DECIMAL(2,1) is a DECIMAL
		}
		if _, ok := byName[ty]; !ok {
			t.Errorf("type %s of a view or expression is not listed", ty)
		}
	}

	// type_name, data_type, column_size, literal_prefix, literal_suffix, ..., sql_data_type, datetime_subcode.
	for name, want := range map[string][]string{
		"VARCHAR":                  {"12", "NULL", "'", "'"},
		"BIGINT":                   {"-5", "19", "NULL", "NULL"},
		"DOUBLE":                   {"8", "53", "NULL", "NULL"},
		"DATE":                     {"91", "10", "DATE '", "'"},
		"TIMESTAMP WITH TIME ZONE": {"93", "32", "TIMESTAMPTZ '", "'"},
	} {
		if got := byName[name]; len(got) < 5 || !slices.Equal(got[1:5], want) {
			t.Errorf("%s: %v, want data_type, column_size, literal prefix and suffix %v", name, got, want)
		}
	}
	if r := byName["TIMESTAMP WITH TIME ZONE"]; r[15] != "9" || r[16] != "5" {
		t.Errorf("TIMESTAMPTZ: sql_data_type %s, datetime_subcode %s; want 9 (datetime), 5 (timestamp with time zone)", r[15], r[16])
	}
	if r := byName["DECIMAL"]; r[5] != `["precision","scale"]` || r[13] != "0" || r[14] != "38" {
		t.Errorf("DECIMAL: create_params %s, scale %s..%s", r[5], r[13], r[14])
	}

	ts := int32(93)
	info, err = c.GetXdbcTypeInfo(ctx, &ts)
	if err != nil {
		t.Fatal(err)
	}
	only, err := readInfo(ctx, c, info)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range only.rows {
		names = append(names, r[0])
	}
	if !slices.Equal(names, []string{"TIMESTAMP", "TIMESTAMP WITH TIME ZONE"}) {
		t.Errorf("GetXdbcTypeInfo(93): %v", names)
	}
}
