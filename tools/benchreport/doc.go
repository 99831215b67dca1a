// Package benchreport turns the raw output of `make bench` — the text of
// several `go test -bench` invocations, custom b.ReportMetric units
// included, between marker lines the Makefile writes — into BENCHMARKS.md:
// the command, machine, date and load, then every figure beside its
// reference (another benchmark of the same run, or a published anchor),
// with each goal checked against the numbers.
//
// The report's content is one table, Suite (suite.go): which benchmark and
// metric gives each figure, what it is compared with, and the goal. A
// benchmark the suite names that failed, was skipped or did not run shows
// as such with the reason; a benchmark the run has that the suite does not
// name is listed under "Other benchmarks". It is not for judging single
// benchmarks interactively (use benchstat for that), and it never runs
// benchmarks itself.
package benchreport
