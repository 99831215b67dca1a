// Command reckon-sql is reckon's SQL endpoint: an Arrow Flight SQL server
// and one-shot queries on embedded DuckDB over the lake. It is a second
// binary because DuckDB needs CGO and reckon stays CGO-free; `reckon
// serve sql` and `reckon sql` run it (docs/adr/0017-sql-endpoint.md).
// Build it with `make build` (CGO, -tags duckdb_arrow).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"reckon/sqlserve"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := sqlserve.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ())
	stop()
	os.Exit(code)
}
