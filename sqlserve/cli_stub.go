//go:build !duckdb_arrow

package sqlserve

import (
	"context"
	"fmt"
	"io"
)

// Main reports that this build has no SQL engine: DuckDB is linked only
// with the build tag duckdb_arrow (make build does it).
func Main(_ context.Context, _ []string, _ io.Reader, _, stderr io.Writer, _ []string) int {
	fmt.Fprintln(stderr,
		"reckon-sql: built without DuckDB; build it with CGO and the duckdb_arrow tag: make build (go build -tags "+
			"duckdb_arrow -o bin/reckon-sql ./workers/reckon-sql)")
	return 1
}
