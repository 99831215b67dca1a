//go:build duckdb_arrow

package interop

import (
	"bytes"
	"context"
	"database/sql/driver"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/duckdb/duckdb-go/v2"

	"reckon/workers"
)

// TestDuckDBScansLakeQueryArrow: the Arrow IPC stream of `reckon lake query
// --format arrow` is read by arrow-go's IPC reader and scanned by DuckDB
// (its Arrow scan, as any Arrow client would): its types are DuckDB's
// natural ones and its rows equal DuckDB's own deduplicating aggregate of
// the Parquet files.
func TestDuckDBScansLakeQueryArrow(t *testing.T) {
	l, _ := buildLake(t)
	var out, errb bytes.Buffer
	if code := workers.Main(context.Background(), []string{"lake", "query", "--lake", l.Root(), "--topic", topic,
		"--from", "2026-11-07", "--to", "2026-11-08", "--format", "arrow"}, nil, &out, &errb, nil); code != 0 {
		t.Fatalf("lake query: exit %d: %s", code, errb.String())
	}
	r, err := ipc.NewReader(&out)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()

	db := openDuckDB(t)
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var release func()
	if err := conn.Raw(func(c any) error {
		a, err := duckdb.NewArrowFromConn(c.(driver.Conn))
		if err != nil {
			return err
		}
		release, err = a.RegisterView(r, "reckon_hourly")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer release()

	types := map[string]string{}
	rows, err := conn.QueryContext(context.Background(), "SELECT column_name, column_type FROM (DESCRIBE reckon_hourly)")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n, ty string
		if err := rows.Scan(&n, &ty); err != nil {
			t.Fatal(err)
		}
		types[n] = ty
	}
	rows.Close()
	want := map[string]string{"key": "VARCHAR", "window_start": "TIMESTAMP WITH TIME ZONE", "window_end": "TIMESTAMP WITH TIME ZONE",
		"count": "BIGINT", "sum": "DOUBLE", "avg": "DOUBLE", "min": "DOUBLE", "max": "DOUBLE"}
	if fmt.Sprint(types) != fmt.Sprint(want) {
		t.Errorf("DuckDB types of the Arrow stream %v, want %v", types, want)
	}

	// Materialize the stream once (it can be scanned only once), then
	// compare with DuckDB's own aggregate of the Parquet files.
	if _, err := conn.ExecContext(context.Background(), "CREATE TABLE reckon AS SELECT * FROM reckon_hourly"); err != nil {
		t.Fatal(err)
	}
	var n, diff int64
	q := fmt.Sprintf(`WITH duck AS (
	    SELECT key, time_bucket(INTERVAL 1 HOUR, occurred_at) AS window_start, count(*) AS count, sum(value) AS sum, min(value) AS min, max(value) AS max
	    FROM (SELECT DISTINCT ON (event_id) * FROM read_parquet('%s/raw/**/*.parquet', hive_partitioning = true) WHERE topic = '%s')
	    GROUP BY ALL)
	  SELECT (SELECT count(*) FROM reckon), count(*) FROM duck FULL OUTER JOIN reckon USING (key, window_start)
	  WHERE duck.count IS DISTINCT FROM reckon.count OR abs(duck.sum - reckon.sum) > 1e-9 * greatest(1, abs(duck.sum))
	     OR duck.min IS DISTINCT FROM reckon.min OR duck.max IS DISTINCT FROM reckon.max
	     OR reckon.window_end <> reckon.window_start + INTERVAL 1 HOUR`, l.Root(), topic)
	if err := conn.QueryRowContext(context.Background(), q).Scan(&n, &diff); err != nil {
		t.Fatal(err)
	}
	if n == 0 || diff != 0 {
		t.Errorf("the Arrow stream has %d windows, %d differ from DuckDB's aggregate of the lake", n, diff)
	}
}
