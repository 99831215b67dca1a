// Package sqlserve is reckon's SQL endpoint for analysts: an Arrow Flight
// SQL server (arrow-go's flightsql) that runs queries on an embedded
// DuckDB over the lake and streams the results as Arrow record batches
// straight from DuckDB (no row-by-row conversion), plus the engine behind
// `reckon sql` for one-shot queries in a terminal.
//
// Every query sees the same views, defined once in views.go: raw, events,
// panes, truth, windows, corrections, features, zreports, zreport_versions, and the
// table macros windows_as_of(TIMESTAMP) and zreports_as_of(TIMESTAMP)
// (docs/lake.md, "SQL endpoint views"). The endpoint is read-only and
// locked down: one SELECT per query, DuckDB reads only the lake directory,
// no extensions, configuration locked, per-query time limit, memory limit,
// bearer-token or basic authentication, TLS and mutual TLS
// (docs/adr/0017-sql-endpoint.md). A query that fails because a
// compaction deleted a lake file it had listed is run again, a bounded
// number of times, counted on /metrics (retry.go,
// docs/adr/0031-sql-retry-on-vanished-files.md).
//
// DuckDB needs CGO: the engine, the server and the CLI build only with the
// build tag duckdb_arrow, into the second binary bin/reckon-sql; `reckon`
// itself stays CGO-free and runs bin/reckon-sql for `reckon serve sql` and
// `reckon sql`. Without the tag the package holds the view definitions,
// the options and the authentication, and Main says how to build it.
//
// An s3:// lake is served from a local mirror of the tables the views
// read (LakeMirror, in sql.cache_dir, synced every sql.sync_interval):
// DuckDB's httpfs extension is not in the linked library.
//
// Package sqlserve is not a general DuckDB host: it never writes the
// lake, and DuckDB never reaches the network.
package sqlserve
