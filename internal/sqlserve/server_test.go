//go:build duckdb_arrow

package sqlserve

import (
	"context"
	"testing"
)

// TestViewsThroughFlightSQL: every view answers through arrow-go's Flight
// SQL client.
func TestViewsThroughFlightSQL(t *testing.T) {
	tl := buildLake(t)
	addr := startServer(t, openEngine(t, tl.root), ServeOptions{})
	c := newClient(t, addr)
	ctx := context.Background()
	for _, v := range ViewNames() {
		tab, err := readAll(ctx, c, "SELECT * FROM "+v)
		if err != nil {
			t.Errorf("%s: %v", v, err)
			continue
		}
		t.Logf("%s: %d rows, schema %v", v, len(tab.rows), tab.schema)
	}
}
