//go:build duckdb_arrow

package sqlserve

import (
	"context"
	"testing"
)

// TestWideRows: a result whose DuckDB chunks exceed gRPC's default 4 MiB
// message limit reaches a client with default settings (the server cuts
// batches to at most maxBatchBytes).
func TestWideRows(t *testing.T) {
	c := newClient(t, startServer(t, openEngine(t, t.TempDir()), ServeOptions{}))
	tab, err := readAll(context.Background(), c, "SELECT i, repeat('x', 5000) AS s FROM range(5000) t(i)")
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.rows) != 5000 || len(tab.rows[4999][1]) != 5000 {
		t.Errorf("%d rows", len(tab.rows))
	}
}
