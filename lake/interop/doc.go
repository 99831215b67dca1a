// Package interop holds reckon's lake interoperability tests and the
// reader benchmarks that need foreign engines: DuckDB (through
// github.com/duckdb/duckdb-go/v2, CGO) reads the lake exactly as analysts
// do, and arrow-go's pqarrow competes with the parquet-go reader.
//
// It is a separate Go module (lake/interop/go.mod, replace reckon => ../..)
// so the reckon binary stays free of CGO and of DuckDB's static library.
// Run it with:
//
//	cd lake/interop && go test -tags duckdb_arrow ./...
//
// (the duckdb_arrow tag enables the driver's Arrow scan, which
// TestDuckDBScansLakeQueryArrow feeds with `reckon lake query --format
// arrow`; without it that one test is left out).
//
// and the benchmarks with, e.g.:
//
//	cd lake/interop && RECKON_BENCH_ROWS=10000000 go test -run '^$' -bench . -benchtime 1x
//
// BenchmarkLakeQueryProcess runs DuckDB and `reckon lake query` as
// separate processes; its two small programs live in internal/:
// duckquery (DuckDB with one thread, nothing else linked) and launch
// (measures a child's wall time, CPU time and peak RSS).
package interop
