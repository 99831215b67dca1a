package sqlserve

import (
	"fmt"
	"strings"
)

// column is one column of a base view: its name and DuckDB type.
type column struct{ name, typ string }

// baseTable is a lake table read with read_parquet: the view every other
// view builds on. Until a file of it exists, its view is an empty relation
// with the same columns (DuckDB cannot bind a glob that matches nothing).
type baseTable struct {
	view string // view name
	dir  string // directory under the lake root
	// hive is read_parquet's hive_types for the partition columns.
	hive string
	cols []column
}

// baseTables are the lake tables the views read, as lake/schema.go,
// lake/truth_table.go, lake/curated.go, lake/features.go and
// activities/zreport_lake.go write them (each file's columns, then the hive partition columns).
// windows and corrections are the curated tables
// (docs/adr/0019-curated-tables.md), read as they are: they hold the
// windowsHistorySQL and correctionsHistorySQL definitions materialised by
// the batch side, so the views need no window function over the history.
var baseTables = []baseTable{
	{view: "raw", dir: "raw", hive: "{'topic': VARCHAR, 'event_date': DATE, 'event_hour': INTEGER}", cols: []column{
		{"event_id", "VARCHAR"}, {"event_type", "VARCHAR"}, {"occurred_at", "TIMESTAMPTZ"}, {"ingested_at", "TIMESTAMPTZ"},
		{"key", "VARCHAR"}, {"value", "DOUBLE"}, {"data", "VARCHAR"}, {"kafka_partition", "INTEGER"}, {"kafka_offset", "BIGINT"},
		{"topic", "VARCHAR"}, {"event_date", "DATE"}, {"event_hour", "INTEGER"},
	}},
	{view: "panes", dir: "summaries", hive: "{'stream': VARCHAR, 'window_date': DATE}", cols: paneColumns},
	{view: "truth", dir: "truth", hive: "{'stream': VARCHAR, 'window_date': DATE}", cols: paneColumns},
	{view: "windows", dir: "windows", hive: "{'stream': VARCHAR, 'window_date': DATE}", cols: windowColumns},
	{view: "corrections", dir: "corrections", hive: "{'stream': VARCHAR, 'window_date': DATE}", cols: correctionColumns},
	{view: "served_features", dir: "features", hive: "{'stream': VARCHAR, 'event_date': DATE}",
		cols: featureColumns},
	{view: "feature_truth", dir: "feature_truth", hive: "{'stream': VARCHAR, 'event_date': DATE}",
		cols: featureTruthColumns},
	{view: "features", dir: "feature_status", hive: "{'stream': VARCHAR, 'event_date': DATE}",
		cols: featureStatusColumns},
	{view: "zreport_versions", dir: "zreports", hive: "{'close_date': DATE}", cols: []column{
		{"fiscal_drive", "VARCHAR"}, {"shift", "BIGINT"}, {"version", "BIGINT"}, {"status", "VARCHAR"},
		{"shift_closed_at", "TIMESTAMPTZ"}, {"finalized_at", "TIMESTAMPTZ"}, {"reason", "VARCHAR"},
		{"ofd_receipts_count", "BIGINT"}, {"ofd_total_amount", "DOUBLE"}, {"ofd_event_id", "VARCHAR"},
		{"dwh_receipts_count", "BIGINT"}, {"dwh_total_amount", "DOUBLE"}, {"dwh_event_id", "VARCHAR"},
		{"rms_receipts_count", "BIGINT"}, {"rms_total_amount", "DOUBLE"}, {"rms_event_id", "VARCHAR"},
		{"missing", "VARCHAR"}, {"ofd_duplicates", "BIGINT"}, {"dwh_duplicates", "BIGINT"}, {"rms_duplicates", "BIGINT"},
		{"ofd_corrections", "BIGINT"}, {"dwh_corrections", "BIGINT"}, {"rms_corrections", "BIGINT"},
		{"differences", "VARCHAR"}, {"schema_version", "INTEGER"}, {"close_date", "DATE"},
	}},
}

// paneColumns are the summaries and truth tables' columns (lake.SummaryRow)
// and their hive partition.
var paneColumns = []column{
	{"stream", "VARCHAR"}, {"key", "VARCHAR"}, {"window_start", "TIMESTAMPTZ"}, {"window_end", "TIMESTAMPTZ"},
	{"count", "BIGINT"}, {"sum", "DOUBLE"}, {"min", "DOUBLE"}, {"max", "DOUBLE"}, {"version", "BIGINT"},
	{"timing", "VARCHAR"}, {"computed_by", "VARCHAR"}, {"watermark", "TIMESTAMPTZ"}, {"emitted_at", "TIMESTAMPTZ"},
	{"reason", "VARCHAR"}, {"window_date", "DATE"},
}

// windowColumns are the columns the windows view and windows_as_of
// expose: of the curated table (lake.WindowRow) all but watermark,
// emitted_at (updated_at is the same instant) and the hive column
// window_date, so windows and windows_as_of(T) stay one shape.
var windowColumns = []column{
	{"stream", "VARCHAR"}, {"key", "VARCHAR"}, {"window_start", "TIMESTAMPTZ"}, {"window_end", "TIMESTAMPTZ"},
	{"count", "BIGINT"}, {"sum", "DOUBLE"}, {"min", "DOUBLE"}, {"max", "DOUBLE"}, {"version", "BIGINT"},
	{"status", "VARCHAR"}, {"timing", "VARCHAR"}, {"computed_by", "VARCHAR"}, {"reason", "VARCHAR"}, {"updated_at", "TIMESTAMPTZ"},
}

// correctionColumns are the curated corrections table's columns
// (lake.CorrectionRow) without the hive column window_date.
var correctionColumns = []column{
	{"stream", "VARCHAR"}, {"key", "VARCHAR"}, {"window_start", "TIMESTAMPTZ"}, {"window_end", "TIMESTAMPTZ"},
	{"version", "BIGINT"}, {"reason", "VARCHAR"}, {"emitted_at", "TIMESTAMPTZ"},
	{"count", "BIGINT"}, {"sum", "DOUBLE"}, {"min", "DOUBLE"}, {"max", "DOUBLE"},
	{"prev_version", "BIGINT"}, {"prev_count", "BIGINT"}, {"prev_sum", "DOUBLE"}, {"prev_min", "DOUBLE"}, {"prev_max", "DOUBLE"},
	{"prev_computed_by", "VARCHAR"}, {"prev_emitted_at", "TIMESTAMPTZ"},
}

// featureColumns are the features table's columns (lake.FeatureRow) and
// its hive partition: every feature the stream served.
var featureColumns = []column{
	{"stream", "VARCHAR"}, {"key", "VARCHAR"}, {"event_id", "VARCHAR"}, {"event_time", "TIMESTAMPTZ"},
	{"size_ns", "BIGINT"}, {"count", "BIGINT"}, {"sum", "DOUBLE"}, {"watermark", "TIMESTAMPTZ"},
	{"emitted_at", "TIMESTAMPTZ"}, {"arrived_at", "TIMESTAMPTZ"},
	{"source_topic", "VARCHAR"}, {"source_partition", "INTEGER"}, {"source_offset", "BIGINT"},
	{"kafka_partition", "INTEGER"}, {"kafka_offset", "BIGINT"}, {"event_date", "DATE"},
}

// featureTruthColumns are the feature_truth table's columns
// (lake.FeatureTruthRow) and its hive partition: every truth a recompute
// computed.
var featureTruthColumns = []column{
	{"stream", "VARCHAR"}, {"key", "VARCHAR"}, {"event_id", "VARCHAR"}, {"event_time", "TIMESTAMPTZ"},
	{"size_ns", "BIGINT"}, {"count", "BIGINT"}, {"sum", "DOUBLE"}, {"computed_at", "TIMESTAMPTZ"},
	{"trigger", "VARCHAR"}, {"event_date", "DATE"},
}

// featureStatusColumns are the columns the features view exposes of the
// curated feature_status table (lake.FeatureStatusRow): one row per event,
// served beside true, and its status (docs/adr/0038-feature-truth.md).
var featureStatusColumns = []column{
	{"stream", "VARCHAR"}, {"key", "VARCHAR"}, {"event_id", "VARCHAR"}, {"event_time", "TIMESTAMPTZ"},
	{"served_count", "BIGINT"}, {"served_sum", "DOUBLE"}, {"served_at", "TIMESTAMPTZ"},
	{"true_count", "BIGINT"}, {"true_sum", "DOUBLE"}, {"status", "VARCHAR"},
}

// sqlString quotes s as a SQL string literal.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// ident quotes a column name (count, sum, min, max are function names).
func ident(s string) string { return `"` + s + `"` }

func (b baseTable) columnList() string {
	names := make([]string, len(b.cols))
	for i, c := range b.cols {
		names[i] = ident(c.name)
	}
	return strings.Join(names, ", ")
}

// glob is the table's files under root (a local directory, no trailing
// slash). Hidden names (".x.parquet.123.tmp" while a write is in flight,
// "_progress") never match.
func (b baseTable) glob(root string) string { return root + "/" + b.dir + "/**/*.parquet" }

// sql is the view's body: the files when present, else an empty relation
// of the same columns.
func (b baseTable) sql(root string, present bool) string {
	if !present {
		sel := make([]string, len(b.cols))
		for i, c := range b.cols {
			sel[i] = "NULL::" + c.typ + " AS " + ident(c.name)
		}
		return "SELECT " + strings.Join(sel, ", ") + " WHERE false"
	}
	return fmt.Sprintf("SELECT %s FROM read_parquet(%s, hive_partitioning=true, hive_types=%s)", b.columnList(), sqlString(b.glob(root)), b.hive)
}

// The derived views and table macros: each view's SQL is written once
// here. asOf is a predicate on emitted_at (or finalized_at) for the
// *_as_of macros, "true" for the current views.

// eventsSQL keeps one row per (topic, event_id): the lake holds a
// redelivered event once per delivery, with the same bytes; the copy kept
// is the first archived (earliest ingested_at, then partition and
// offset), so the answer does not change between runs. (DISTINCT ON
// without an order is about as fast for SELECT * but picks any copy.)
// Compacted closed hours hold each event once, but the dedup still runs
// on every hour: a compacted hour can hold archive files beside its
// compacted ones (late files, a compaction between writing its outputs
// and deleting its inputs, docs/adr/0018-continuous-compaction.md), and
// no file name says an hour is in neither state.
const eventsSQL = `SELECT * FROM raw
QUALIFY row_number() OVER (PARTITION BY topic, event_id ORDER BY ingested_at, kafka_partition, kafka_offset) = 1`

// windowsHistorySQL computes the windows table from the history: every
// window's latest version (highest version, ties to the latest
// emitted_at, docs/adr/0008-batch-truth.md) with its status: corrected
// when that version is a batch correction, final when it is a stream pane
// and the batch has checked the window (a truth row exists), provisional
// otherwise. asOf filters panes and truth rows alike, on emitted_at.
// windows_as_of is this definition; the windows view reads the curated
// table, which equals it with asOf "true" (TestCuratedViewsEqualHistory).
func windowsHistorySQL(asOf string) string {
	return `WITH latest AS (
  SELECT * FROM panes WHERE ` + asOf + `
  QUALIFY row_number() OVER (PARTITION BY stream, key, window_start ORDER BY version DESC, emitted_at DESC) = 1
), checked AS (
  SELECT DISTINCT stream, key, window_start FROM truth WHERE ` + asOf + `
)
SELECT l.stream, l.key, l.window_start, l.window_end, l."count", l."sum", l."min", l."max", l.version,
  CASE WHEN l.computed_by = 'batch' THEN 'corrected' WHEN c.stream IS NOT NULL THEN 'final' ELSE 'provisional' END AS status,
  l.timing, l.computed_by, l.reason, l.emitted_at AS updated_at
FROM latest l LEFT JOIN checked c ON c.stream = l.stream AND c.key = l.key AND c.window_start = l.window_start`
}

// correctionsHistorySQL computes the corrections table from the history:
// one row per batch correction, its first copy (earliest emitted_at: the
// curated table adds a correction when it is first archived and never
// changes it), with the figures of the window's latest version below it
// (that version's latest copy; NULL when the window never had one: reason
// "missing"). The corrections view reads the curated table, which equals
// this (TestCuratedViewsEqualHistory).
const correctionsHistorySQL = `WITH v AS (
  SELECT * FROM panes
  QUALIFY row_number() OVER (PARTITION BY stream, key, window_start, version ORDER BY emitted_at DESC) = 1
), h AS (
  SELECT stream, key, window_start, version, lag(version) OVER w AS prev_version, lag("count") OVER w AS prev_count,
    lag("sum") OVER w AS prev_sum, lag("min") OVER w AS prev_min, lag("max") OVER w AS prev_max,
    lag(computed_by) OVER w AS prev_computed_by, lag(emitted_at) OVER w AS prev_emitted_at
  FROM v WINDOW w AS (PARTITION BY stream, key, window_start ORDER BY version)
), c AS (
  SELECT * FROM panes WHERE computed_by = 'batch'
  QUALIFY row_number() OVER (PARTITION BY stream, key, window_start, version ORDER BY emitted_at) = 1
)
SELECT c.stream, c.key, c.window_start, c.window_end, c.version, c.reason, c.emitted_at, c."count", c."sum", c."min", c."max",
  h.prev_version, h.prev_count, h.prev_sum, h.prev_min, h.prev_max, h.prev_computed_by, h.prev_emitted_at
FROM c JOIN h USING (stream, key, window_start, version)`

// featuresHistorySQL computes the features table from the history: per
// (stream, event_id), the first feature served (earliest emitted_at, then
// the features topic's partition and offset) beside the latest truth
// (latest computed_at; ties to the larger count, then sum) and the
// status. asOf filters served rows on emitted_at and truths on
// computed_at: features_as_of(T) is what was known at T. The features
// view reads the curated table, which equals this with asOf "true"
// (TestCuratedFeaturesEqualHistory).
func featuresHistorySQL(asOf string) string {
	at := func(col string) string { return strings.ReplaceAll(asOf, "as_of_col", col) }
	return `WITH s AS (
  SELECT * FROM served_features WHERE ` + at("emitted_at") + `
  QUALIFY row_number() OVER (PARTITION BY stream, event_id ORDER BY emitted_at, kafka_partition, kafka_offset) = 1
), t AS (
  SELECT * FROM feature_truth WHERE ` + at("computed_at") + `
  QUALIFY row_number() OVER (PARTITION BY stream, event_id ORDER BY computed_at DESC, "count" DESC, "sum" DESC) = 1
)
SELECT coalesce(t.stream, s.stream) AS stream, coalesce(t.key, s.key) AS key,
  coalesce(t.event_id, s.event_id) AS event_id, coalesce(t.event_time, s.event_time) AS event_time,
  s."count" AS served_count, s."sum" AS served_sum,
  s.emitted_at AS served_at, t."count" AS true_count, t."sum" AS true_sum,
  CASE WHEN t.event_id IS NULL THEN 'pending' WHEN s.event_id IS NULL THEN 'not_served'
    WHEN s."count" = t."count" AND s."sum" = t."sum" THEN 'exact' ELSE 'differs' END AS status
FROM s FULL OUTER JOIN t ON s.stream = t.stream AND s.event_id = t.event_id`
}

// zreportsSQL is each business key's (fiscal_drive, shift) latest
// version; asOf filters on finalized_at.
func zreportsSQL(asOf string) string {
	return `SELECT * FROM zreport_versions WHERE ` + asOf + `
QUALIFY row_number() OVER (PARTITION BY fiscal_drive, shift ORDER BY version DESC) = 1`
}

// derived is a view or table macro built on the base views.
type derived struct {
	name  string
	macro bool // a table macro of one argument, as_of
	sql   string
}

// derivedViews are created after the base views, in this order.
var derivedViews = []derived{
	{name: "events", sql: eventsSQL},
	{name: "zreports", sql: zreportsSQL("true")},
	{name: "windows_as_of", macro: true, sql: windowsHistorySQL("emitted_at <= CAST(as_of AS TIMESTAMPTZ)")},
	{name: "zreports_as_of", macro: true, sql: zreportsSQL("finalized_at <= CAST(as_of AS TIMESTAMPTZ)")},
	{name: "features_as_of", macro: true, sql: featuresHistorySQL("as_of_col <= CAST(as_of AS TIMESTAMPTZ)")},
}

// ViewNames lists every view the endpoint defines, base views first.
func ViewNames() []string {
	var out []string
	for _, b := range baseTables {
		out = append(out, b.view)
	}
	for _, d := range derivedViews {
		if !d.macro {
			out = append(out, d.name)
		}
	}
	return out
}

// definitions returns the statements creating every view and macro over
// the lake at root, present[dir] saying which base tables have files.
func definitions(root string, present map[string]bool) []string {
	var out []string
	for _, b := range baseTables {
		out = append(out, "CREATE OR REPLACE VIEW "+b.view+" AS "+b.sql(root, present[b.dir]))
	}
	for _, d := range derivedViews {
		if d.macro {
			out = append(out, "CREATE OR REPLACE MACRO "+d.name+"(as_of) AS TABLE "+d.sql)
		} else {
			out = append(out, "CREATE OR REPLACE VIEW "+d.name+" AS "+d.sql)
		}
	}
	return out
}
