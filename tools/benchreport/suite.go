package benchreport

// The suite: what BENCHMARKS.md shows, section by section. This table is
// the one place that names benchmarks, metrics, references and goals; the
// renderer only evaluates it against a run.

// Package paths of the benchmarks.
const (
	pkgEvent    = "reckon/internal/event"
	pkgOperator = "reckon/streaming/operator"
	pkgStream   = "reckon/streaming"
	pkgLake     = "reckon/lake"
	pkgInterop  = "reckon/lake/interop"
	pkgGenerate = "reckon/verify/generate"
	pkgWorkers  = "reckon/workers"
	pkgSQL      = "reckon/sqlserve"
	pkgPace     = "reckon/tools/compactpace"
	pkgInstr    = "reckon/tools/benchinstr"
)

// Section is one heading of the report.
type Section struct {
	Title string
	// Goal is the section's goal in words; "" when it has none.
	Goal string
	// About says what is measured and how, in a sentence or two.
	About string
	Rows  []Row
}

// Row is one line of a section's table: reckon's figure, the reference
// beside it and, when the row carries a goal, the goal.
type Row struct {
	Case   string
	Reckon Figure
	// Ref is the reference: a figure of the same run or a published
	// anchor. Zero: none.
	Ref  Reference
	Goal *Goal
}

// Figure names a metric of a benchmark: Bench is the package path, a dot
// and the benchmark's full name; Metric a unit of its result lines, or
// MetricN for the iteration count.
type Figure struct {
	Bench, Metric string
}

// MetricN selects a result line's iteration count as the figure.
const MetricN = "N"

// Reference is either another figure of the same run or a published
// anchor (Text, with Value in the reckon figure's unit when a ratio makes
// sense, else 0).
type Reference struct {
	Figure *Figure
	Text   string
	// Short is Text for the goals summary; "" means Text.
	Short string
	Value float64
}

// GoalKind says how a goal is checked against the median of reckon's
// figure.
type GoalKind int

const (
	// AtLeast: figure ≥ Value.
	AtLeast GoalKind = iota
	// Below: figure < Value.
	Below
	// TimeRatioAtMost: reckon's time is at most Value times the
	// reference's (for rates, time is the inverse of the figure).
	TimeRatioAtMost
	// Scale: the benchmark passed (every key it pushed finalized) with
	// at least Value iterations; fewer is "not checked", not "not met".
	Scale
	// RatioAtLeast: figure ≥ Value times the reference figure (same unit).
	RatioAtLeast
	// RatioAtMost: figure ≤ Value times the reference figure (same unit):
	// a count against its bound measured in the same run.
	RatioAtMost
)

// Goal is a target a row's figure is checked against.
type Goal struct {
	Text  string
	Kind  GoalKind
	Value float64
	// Unit names what a Scale goal counts ("keys").
	Unit string
	// Hint says how to run the check when Scale was not reached.
	Hint string
}

func fig(pkg, name, metric string) Figure { return Figure{Bench: pkg + "." + name, Metric: metric} }

func ref(pkg, name, metric string) Reference {
	f := fig(pkg, name, metric)
	return Reference{Figure: &f}
}

// Published anchors.
var (
	flinkQ0 = Reference{Text: "Flink Nexmark q0 (pass-through) 155 K events/s/core; q12 75.7 K (published)",
		Short: "Flink Nexmark q0 155 K events/s/core (published)", Value: 155_000}
	// parquet-go with default settings, one core, row building included,
	// measured before the code (docs/requirements.md R-PERF-4; the
	// reference measurements in docs/benchmarks-notes.md).
	parquetGoDefaults = Reference{Text: "parquet-go defaults, zstd: 1.4 M rows/s incl. row building (measured before the code, one core; docs/benchmarks-notes.md)",
		Short: "parquet-go defaults 1.4 M rows/s (docs/benchmarks-notes.md)", Value: 1_400_000}
	flinkQ5 = Reference{Text: "Flink Nexmark q5 (hopping windows 10 s / 2 s, count per key) 22.1 K events/s/core (published)",
		Short: "Flink Nexmark q5 22.1 K events/s/core (published)", Value: 22_100}
	commitFloor    = Reference{Text: "the 20 ms commit interval: outputs are visible when their transaction commits, so an event waits up to one interval (the p99 cannot fall much below it)", Short: "20 ms commit interval (bounds p99 from below)"}
	dailyReconcile = Reference{Text: "without targeted corrections: the daily reconciliation at 02:00 UTC, i.e. hours"}
	feastOnline    = Reference{Text: "Feast online store on Redis: p99 < 1.5 ms (published benchmark)", Short: "Feast/Redis p99 < 1.5 ms (published)"}
	dailyFinal     = Reference{Text: "without the finalizer: final at the daily reconciliation at 02:00 UTC, i.e. hours"}
)

const (
	opHot  = "BenchmarkOperatorHotPath/"
	opHop  = "BenchmarkOperatorHopping/"
	hourly = "BenchmarkHourly/"
	recomp = "BenchmarkRecomputeDay/"
	feat   = "BenchmarkFeatureTruthDay/"
	zrep   = "BenchmarkZReportThroughput"
	ttt    = "BenchmarkTimeToTruth"
	ttf    = "BenchmarkTimeToFinal"
	fsql   = "BenchmarkFlightSQL/"
	lakeq  = "BenchmarkLakeQueryProcess/"
	pace   = "BenchmarkCompactPace"
)

// lookHTTP is the loopback lookup benchmark (a const of its own: the
// block above is everyone's).
const lookHTTP = "BenchmarkLookupHTTP"

// Suite is the report's sections, in order.
var Suite = []Section{
	{
		Title: "Stream hot path, one core",
		Goal:  "≥ 1,000,000 events/s/core for decode + gate + dedup + window",
		About: "Per event: decode and gate a payment envelope, read key and value, dedup by event_id (the set full at its bound, so every insert evicts), update a 1-minute window over 10,000 keys; `-cpu 1`, figures per CPU-second of the process.",
		Rows: []Row{
			{Case: "**decode + gate + dedup (1M ids) + window**", Reckon: fig(pkgOperator, opHot+"decode+gate+dedup=1M+window", "cpu-events/s"), Ref: flinkQ0,
				Goal: &Goal{Text: "≥ 1,000,000 events/s/core", Kind: AtLeast, Value: 1_000_000}},
			{Case: "decode + gate + dedup (1M ids) + window + rolling 60 s", Reckon: fig(pkgOperator, opHot+"decode+gate+dedup=1M+window+rolling", "cpu-events/s"), Ref: flinkQ0},
			{Case: "decode + gate + dedup (10k ids, cache-resident) + window", Reckon: fig(pkgOperator, opHot+"decode+gate+dedup=10k+window", "cpu-events/s"), Ref: flinkQ0},
			{Case: "records already decoded: dedup (1M ids) + window", Reckon: fig(pkgOperator, opHot+"dedup=1M+window", "cpu-events/s")},
			{Case: "records already decoded: dedup (1M ids) + window + rolling", Reckon: fig(pkgOperator, opHot+"dedup=1M+window+rolling", "cpu-events/s")},
			{Case: "records already decoded: dedup (10k ids) + window", Reckon: fig(pkgOperator, opHot+"dedup=10k+window", "cpu-events/s")},
			{Case: "dedup set alone, 1M ids", Reckon: fig(pkgOperator, "BenchmarkDedup/1000000", "cpu-events/s")},
			{Case: "dedup set alone, 10k ids", Reckon: fig(pkgOperator, "BenchmarkDedup/10000", "cpu-events/s")},
			{Case: "instructions per event (callgrind, load-independent): decode + gate + dedup (1M ids) + window",
				Reckon: fig(pkgInstr, "BenchmarkInstr/hot-path", "instr/event")},
			{Case: "instructions per event (callgrind): records already decoded, dedup (1M ids) + window",
				Reckon: fig(pkgInstr, "BenchmarkInstr/dedup+window", "instr/event")},
		},
	},
	{
		Title: "Window kinds, one core",
		Goal:  "≥ 500,000 events/s/core for hopping windows, decode and gate included",
		About: "Nexmark q5's shape: count per key over 10 s windows advancing every 2 s (an event updates 5 windows; docs/adr/0041), beside tumbling 10 s windows in the same run; 10,000 keys, a 10k dedup set, `-cpu 1`, figures per CPU-second. windows/key: the windows held per key (state grows with window/hop).",
		Rows: []Row{
			{Case: "**decode + gate + hopping 10 s / 2 s**", Reckon: fig(pkgOperator, opHop+"decode+gate+hopping=10s/2s", "cpu-events/s"), Ref: flinkQ5,
				Goal: &Goal{Text: "≥ 500,000 events/s/core", Kind: AtLeast, Value: 500_000}},
			{Case: "decode + gate + tumbling 10 s (same run)", Reckon: fig(pkgOperator, opHop+"decode+gate+tumbling=10s", "cpu-events/s"), Ref: flinkQ5},
			{Case: "records already decoded: hopping 10 s / 2 s", Reckon: fig(pkgOperator, opHop+"hopping=10s/2s", "cpu-events/s")},
			{Case: "records already decoded: tumbling 10 s", Reckon: fig(pkgOperator, opHop+"tumbling=10s", "cpu-events/s")},
			{Case: "windows held per key, hopping", Reckon: fig(pkgOperator, opHop+"hopping=10s/2s", "windows/key")},
			{Case: "windows held per key, tumbling", Reckon: fig(pkgOperator, opHop+"tumbling=10s", "windows/key")},
		},
	},
	{
		Title: "Quality gate, one core",
		About: "The sensor example envelope (docs/requirements.md R-GATE-1): decode, envelope rules, data rules (part of the hot path above). References in the same run: the standard library decoding the same bytes into structs without any check, and fastjson's lenient parse alone.",
		Rows: []Row{
			{Case: "gate check vs `encoding/json` into structs", Reckon: fig(pkgEvent, "BenchmarkGateCheck", "cpu-ns/op"), Ref: ref(pkgEvent, "BenchmarkReferenceEncodingJSON", "cpu-ns/op")},
			{Case: "gate check vs fastjson parse (no checks)", Reckon: fig(pkgEvent, "BenchmarkGateCheck", "cpu-ns/op"), Ref: ref(pkgEvent, "BenchmarkReferenceFastjsonParse", "cpu-ns/op")},
			{Case: "gate check + key/value access", Reckon: fig(pkgEvent, "BenchmarkGateCheckAccess", "cpu-ns/op"), Ref: ref(pkgEvent, "BenchmarkReferenceFastjsonParse", "cpu-ns/op")},
			{Case: "gate parse alone (structural minimum) vs fastjson parse", Reckon: fig(pkgEvent, "BenchmarkGateParse", "cpu-ns/op"), Ref: ref(pkgEvent, "BenchmarkReferenceFastjsonParse", "cpu-ns/op")},
			{Case: "gate parse alone vs fastjson strict validation", Reckon: fig(pkgEvent, "BenchmarkGateParse", "ns/op"), Ref: ref(pkgEvent, "BenchmarkReferenceFastjsonValidate", "ns/op")},
			{Case: "a rejection (reasons built)", Reckon: fig(pkgEvent, "BenchmarkGateCheckInvalid", "ns/op")},
			{Case: "gate check, instructions per event (callgrind)", Reckon: fig(pkgInstr, "BenchmarkInstr/gate-check", "instr/event")},
		},
	},
	{
		Title: "Stream state, one core",
		About: "Retained heap per unit of operator state, and a full snapshot of a busy partition (1M dedup ids, 10k keys with windows and rolling buffers).",
		Rows: []Row{
			{Case: "dedup entry", Reckon: fig(pkgOperator, "BenchmarkStateBytes/dedup/1M", "bytes/entry")},
			{Case: "window (10-byte keys)", Reckon: fig(pkgOperator, "BenchmarkStateBytes/window/100k-keys", "bytes/window")},
			{Case: "windows of a key with one event: tumbling 10 s", Reckon: fig(pkgOperator, "BenchmarkStateBytes/key/100k-keys/tumbling-10s", "bytes/key")},
			{Case: "windows of a key with one event: hopping 10 s / 2 s (5 windows)", Reckon: fig(pkgOperator, "BenchmarkStateBytes/key/100k-keys/hopping-10s/2s", "bytes/key")},
			{Case: "rolling point", Reckon: fig(pkgOperator, "BenchmarkStateBytes/rolling/100k-keys×10", "bytes/point")},
			{Case: "snapshot size", Reckon: fig(pkgOperator, "BenchmarkSnapshot/encode", "bytes")},
			{Case: "snapshot encode", Reckon: fig(pkgOperator, "BenchmarkSnapshot/encode", "ns/op")},
			{Case: "snapshot restore", Reckon: fig(pkgOperator, "BenchmarkSnapshot/restore", "ns/op")},
		},
	},
	{
		Title: "Stream end to end through kfake, exactly-once effect on",
		Goal:  "≥ 300,000 events/s (median)",
		About: "200,000 payment events (10,000 users, 60 s rolling features, 5-minute windows, late events, duplicates) produced before the clock starts; one stream worker processing the topic's 3 partitions in parallel, the broker in the same process, one transaction per iteration holding outputs (late panes once per window per transaction), operator state (replay log; a full checkpoint every 30 s) and offsets; events/s from the first record to the last committed offset (wall clock, both cores).",
		Rows: []Row{
			{Case: "**events/s, end to end**", Reckon: fig(pkgStream, "BenchmarkStreamEndToEnd", "events/s"), Ref: flinkQ0,
				Goal: &Goal{Text: "≥ 300,000 events/s", Kind: AtLeast, Value: 300_000}},
		},
	},
	{
		Title: "Stream latency at 10,000 events/s",
		Goal:  "p99 produce → feature readable < 50 ms",
		About: "Paced 10,000 events/s for 5 s, commit interval 20 ms: from producing an event to its rolling feature being readable by a read-committed consumer.",
		Rows: []Row{
			{Case: "**p99**", Reckon: fig(pkgStream, "BenchmarkStreamLatency", "p99-ms"), Ref: commitFloor,
				Goal: &Goal{Text: "< 50 ms", Kind: Below, Value: 50}},
			{Case: "p50", Reckon: fig(pkgStream, "BenchmarkStreamLatency", "p50-ms"), Ref: commitFloor},
		},
	},
	{
		Title: "Feature lookups (ADR 0040)",
		Goal:  "p99 ≤ 1 ms over loopback HTTP at 10,000 requests/s; the stream's end-to-end figure with lookups running within 10 % of the figure without",
		About: "In process: `Lookup.At` for a random one of 10,000 keys with 60 s rolling buffers (6 events each), each call timed; `PublishTo`, the run loop's copy into the lookups after a commit, on a partition of 1 M keys. Over loopback HTTP: a worker that processed 20,000 payment events answers `GET /v1/features/payments/<user>?at=<watermark>` to wrk (Debian package; the row is empty without it) for 5 s from 24 connections each waiting 2 ms after an answer (wrk holds no constant rate: at most 12,000 requests/s offered), latency as wrk measures it; worker CPU per request from the process's CPU time. End to end: the stream benchmark above with the worker serving lookups and a client offering 1,000 lookups/s (open loop) for the whole run, beside the figure without lookups from the same run.",
		Rows: []Row{
			{Case: "in process, p50", Reckon: fig(pkgOperator, "BenchmarkLookupAt", "p50-ns"), Ref: feastOnline},
			{Case: "in process, p99", Reckon: fig(pkgOperator, "BenchmarkLookupAt", "p99-ns"), Ref: feastOnline},
			{Case: "copy after a commit touching 2,000 of 1 M keys", Reckon: fig(pkgOperator, "BenchmarkLookupPublish/commit", "ns/op")},
			{Case: "copy after a sweep of 1 M keys (a new map, swapped)", Reckon: fig(pkgOperator, "BenchmarkLookupPublish/sweep", "ns/op")},
			{Case: "full copy after a restore, 1 M keys (outside the lock)", Reckon: fig(pkgOperator, "BenchmarkLookupPublish/full", "ns/op")},
			{Case: "**loopback HTTP (wrk), p99**", Reckon: fig(pkgStream, lookHTTP, "p99-ms"), Ref: feastOnline,
				Goal: &Goal{Text: "p99 ≤ 1 ms", Kind: Below, Value: 1.0001}},
			{Case: "loopback HTTP (wrk), p50", Reckon: fig(pkgStream, lookHTTP, "p50-ms"), Ref: feastOnline},
			{Case: "loopback HTTP, requests/s reached (10,000 offered at most)", Reckon: fig(pkgStream, lookHTTP, "req/s"),
				Ref: Reference{Text: "10,000 requests/s (issue 29)", Value: 10_000}},
			{Case: "worker CPU per request", Reckon: fig(pkgStream, lookHTTP, "cpu-us/req")},
			{Case: "**stream end to end with 1,000 lookups/s** vs without", Reckon: fig(pkgStream, "BenchmarkStreamEndToEndLookups", "events/s"),
				Ref: ref(pkgStream, "BenchmarkStreamEndToEnd", "events/s"), Goal: &Goal{Text: "≥ 0.9× the figure without", Kind: RatioAtLeast, Value: 0.9}},
			{Case: "lookups answered/s during that run", Reckon: fig(pkgStream, "BenchmarkStreamEndToEndLookups", "lookups/s")},
			{Case: "lookup p99 during that run (the stream saturating both cores)", Reckon: fig(pkgStream, "BenchmarkStreamEndToEndLookups", "lookup-p99-ms")},
			{Case: "late event folded back: refresh record → lookup counts it, p99 (stream side)",
				Reckon: fig(pkgStream, "BenchmarkRefreshToLookup", "p99-ms"), Ref: Reference{Text: "issue 29: late arrival → live state p99 ≤ 30 s with the defaults (the archive wait before the late watch publishes is not in this figure)"}},
			{Case: "late event folded back, p50 (stream side)", Reckon: fig(pkgStream, "BenchmarkRefreshToLookup", "p50-ms")},
		},
	},
	{
		Title: "Archive write, one core",
		Goal:  "≥ 1,000,000 rows/s/core",
		About: "1,000,000 pre-decoded raw rows: sort, split by hour, encode (zstd), fsync, rename; and the archiver's whole path for a 200,000-record batch (gate decode + write). Rows per CPU-second with `-cpu 1`.",
		Rows: []Row{
			{Case: "**write rows, zstd level 1 (the default)**", Reckon: fig(pkgLake, "BenchmarkWriteRaw/zstd=1", "rows/cpu-s"), Ref: parquetGoDefaults,
				Goal: &Goal{Text: "≥ 1,000,000 rows/s/core", Kind: AtLeast, Value: 1_000_000}},
			{Case: "write rows, zstd level 2", Reckon: fig(pkgLake, "BenchmarkWriteRaw/zstd=2", "rows/cpu-s"), Ref: parquetGoDefaults},
			{Case: "write rows, zstd level 3", Reckon: fig(pkgLake, "BenchmarkWriteRaw/zstd=3", "rows/cpu-s"), Ref: parquetGoDefaults},
			{Case: "full archive path (gate decode + write)", Reckon: fig(pkgLake, "BenchmarkArchiveBatch", "rows/cpu-s"), Ref: parquetGoDefaults},
			{Case: "full archive path, instructions per row (callgrind)", Reckon: fig(pkgInstr, "BenchmarkInstr/archive", "instr/row")},
			{Case: "bytes on disk, zstd level 1", Reckon: fig(pkgLake, "BenchmarkWriteRaw/zstd=1", "bytes/event")},
			{Case: "bytes on disk, zstd level 3", Reckon: fig(pkgLake, "BenchmarkWriteRaw/zstd=3", "bytes/event")},
		},
	},
	{
		Title: "Compaction, one core",
		About: "One closed hour of the payments topic (3 partitions, 181 archive files, 1% redeliveries) compacted as docs/adr/0018-continuous-compaction.md does: a k-way merge across partitions, duplicate event_ids dropped to raw_dropped/, files of up to 1 M rows (zstd level 1), inputs deleted; and an open hour's partitions (60 archive files each) merged, every offset kept. Rows per CPU-second with `-cpu 1`, beside the archive writer of the same run.",
		Rows: []Row{
			{Case: "closed hour (dedup, across partitions)", Reckon: fig(pkgLake, "BenchmarkCompactClosedHour", "rows/cpu-s"), Ref: ref(pkgLake, "BenchmarkWriteRaw/zstd=1", "rows/cpu-s")},
			{Case: "open hour (per partition, every offset)", Reckon: fig(pkgLake, "BenchmarkCompactOpenHour", "rows/cpu-s"), Ref: ref(pkgLake, "BenchmarkWriteRaw/zstd=1", "rows/cpu-s")},
		},
	},
	{
		Title: "Lake query vs DuckDB",
		Goal:  "hourly aggregation ≤ 2.0× DuckDB's time",
		About: "Hourly count/sum/min/max per key over a day of raw files (RECKON_BENCH_ROWS rows, 24 hourly files, 50 keys), the same files in the same run: reckon's reader (parquet-go, dedup by event_id), the same on arrow-go's pqarrow, DuckDB with `SET threads = 1` without and with `DISTINCT ON (event_id)`. Rows per CPU-second of the process.",
		Rows: []Row{
			{Case: "**reckon (with dedup) vs DuckDB without dedup**", Reckon: fig(pkgInterop, hourly+"reckon", "rows/cpu-s"), Ref: ref(pkgInterop, hourly+"duckdb", "rows/cpu-s"),
				Goal: &Goal{Text: "≤ 2.0× DuckDB's time", Kind: TimeRatioAtMost, Value: 2.0}},
			{Case: "reckon vs DuckDB with `DISTINCT ON (event_id)`", Reckon: fig(pkgInterop, hourly+"reckon", "rows/cpu-s"), Ref: ref(pkgInterop, hourly+"duckdb-dedup", "rows/cpu-s")},
			{Case: "reckon vs arrow-go pqarrow, same algorithm", Reckon: fig(pkgInterop, hourly+"reckon", "rows/cpu-s"), Ref: ref(pkgInterop, hourly+"arrow", "rows/cpu-s")},
			{Case: "wall clock: reckon vs DuckDB without dedup", Reckon: fig(pkgInterop, hourly+"reckon", "ns/op"), Ref: ref(pkgInterop, hourly+"duckdb", "ns/op")},
			{Case: "2M rows, 96 files per day with 1% redeliveries: merge dedup vs hash set", Reckon: fig(pkgLake, "BenchmarkAggregateHourlyManyFiles/merge", "rows/cpu-s"), Ref: ref(pkgLake, "BenchmarkAggregateHourlyManyFiles/hash", "rows/cpu-s")},
		},
	},
	{
		Title: "Recompute a day vs DuckDB",
		Goal:  "≤ 1.0× DuckDB's time",
		About: "One UTC day of the payments stream (RECKON_BENCH_DAY_ROWS raw rows, 1% redeliveries, 1,000 users, 5-minute windows): reckon runs the Recompute workflow's activity (`BatchTruth.RecomputeWindows`, in Temporal's test activity environment, kfake in process): read the published panes, scan and dedup the raw files and fold them as the stream operator's window code does, compare every window, write the truth table (fsynced). DuckDB (`SET threads = 1`) runs the same grouping with `DISTINCT ON (event_id)` over the same files. The truth table equals DuckDB's answer window by window (checked before timing).",
		Rows: []Row{
			{Case: "rows per CPU-second", Reckon: fig(pkgInterop, recomp+"reckon", "rows/cpu-s"), Ref: ref(pkgInterop, recomp+"duckdb", "rows/cpu-s")},
			{Case: "**wall clock per day**", Reckon: fig(pkgInterop, recomp+"reckon", "ns/op"), Ref: ref(pkgInterop, recomp+"duckdb", "ns/op"),
				Goal: &Goal{Text: "≤ 1.0× DuckDB's time", Kind: TimeRatioAtMost, Value: 1.0}},
			{Case: "windows checked", Reckon: fig(pkgInterop, recomp+"reckon", "windows")},
		},
	},
	{
		Title: "Feature truth of a day vs DuckDB",
		Goal:  "≤ 1.0× DuckDB's time",
		About: "One UTC day of the payments stream (RECKON_BENCH_DAY_ROWS raw rows, 1% redeliveries, 10,000 users): " +
			"reckon computes every event's true 60 s rolling count and sum as a recompute does (`activities.FeatureTruthRows`: " +
			"scan, dedup, sort per key, one pass; docs/adr/0038-feature-truth.md); DuckDB (`SET threads = 1`) computes the " +
			"same with `count(*)`/`sum(value) OVER (PARTITION BY key ORDER BY occurred_at RANGE BETWEEN INTERVAL 59999999 " +
			"MICROSECONDS PRECEDING AND CURRENT ROW)` after a `row_number()` dedup, over the same files. The answers are " +
			"checked equal event by event before timing. peak-rss-B: how far each raised the process's peak resident memory.",
		Rows: []Row{
			{Case: "events per CPU-second", Reckon: fig(pkgInterop, feat+"reckon", "events/cpu-s"),
				Ref: ref(pkgInterop, feat+"duckdb", "events/cpu-s")},
			{Case: "**wall clock per day**", Reckon: fig(pkgInterop, feat+"reckon", "ns/op"), Ref: ref(pkgInterop, feat+"duckdb", "ns/op"),
				Goal: &Goal{Text: "≤ 1.0× DuckDB's time", Kind: TimeRatioAtMost, Value: 1.0}},
			{Case: "peak memory added", Reckon: fig(pkgInterop, feat+"reckon", "peak-rss-B"),
				Ref: ref(pkgInterop, feat+"duckdb", "peak-rss-B")},
		},
	},
	{
		Title: "DuckDB (threads=1, no DISTINCT ON) vs reckon lake query — 10 M rows compacted",
		About: "What an analyst runs, each engine in a process of its own on the same lake: a day of the sensor topic (RECKON_BENCH_ROWS raw rows, `make bench` 10 M; 1% redeliveries; 3 partitions archived as 20 files per partition-hour), every hour then compacted as closed by the real compaction (`lake.CompactHour`: files of up to 1 M rows, redeliveries to raw_dropped/). DuckDB (`SET threads = 1`, a program of database/sql and the driver only) runs the README's hourly query as printed, on the raw table without `DISTINCT ON` and without `hive_types`; `reckon lake query` (bin/reckon) gives the hourly figures deduplicating any hour. A launcher measures each process: wall clock, CPU time (user + system) and peak RSS (rusage maxrss; the launcher's own few MB are the floor). Both answers are checked against the generator, hour by hour, before timing; the timed runs find the files in the page cache.",
		Rows: []Row{
			{Case: "**wall clock**", Reckon: fig(pkgInterop, lakeq+"reckon", "wall-s"), Ref: ref(pkgInterop, lakeq+"duckdb", "wall-s")},
			{Case: "**peak RSS**", Reckon: fig(pkgInterop, lakeq+"reckon", "maxrss-MB"), Ref: ref(pkgInterop, lakeq+"duckdb", "maxrss-MB")},
			{Case: "CPU time (user + system)", Reckon: fig(pkgInterop, lakeq+"reckon", "cpu-s"), Ref: ref(pkgInterop, lakeq+"duckdb", "cpu-s")},
			{Case: "raw rows (redeliveries included)", Reckon: fig(pkgInterop, lakeq+"reckon", "rows")},
			{Case: "files after compaction", Reckon: fig(pkgInterop, lakeq+"reckon", "files")},
		},
	},
	{
		Title: "SQL endpoint: Arrow Flight SQL vs DuckDB in process",
		Goal:  "the endpoint adds ≤ 20 % to DuckDB's time (hourly aggregation)",
		About: "RECKON_BENCH_ROWS raw rows (24 hourly files, 50 keys) through the endpoint's views (docs/lake.md): each query run by the same DuckDB engine in process (its Arrow batches read, no network) and through `reckon serve sql` on loopback with arrow-go's Flight SQL client receiving every batch, back to back in each run, alternating which goes first. Hourly count/sum/min/max per key over `events` (1,200 result rows), and `SELECT * FROM events` (every row transferred). Both cores (docs/adr/0017-sql-endpoint.md).",
		Rows: []Row{
			{Case: "**hourly aggregation, wall clock**", Reckon: fig(pkgSQL, fsql+"hourly", "flightsql-s"), Ref: ref(pkgSQL, fsql+"hourly", "duckdb-s"),
				Goal: &Goal{Text: "≤ 1.2× DuckDB's time", Kind: TimeRatioAtMost, Value: 1.2}},
			{Case: "`SELECT * FROM events`, wall clock", Reckon: fig(pkgSQL, fsql+"events", "flightsql-s"), Ref: ref(pkgSQL, fsql+"events", "duckdb-s")},
			{Case: "`SELECT * FROM events`, rows/s", Reckon: fig(pkgSQL, fsql+"events", "rows/s"), Ref: ref(pkgSQL, fsql+"events", "duckdb-rows/s")},
			{Case: "`SELECT * FROM events`, Arrow data received", Reckon: fig(pkgSQL, fsql+"events", "arrow-MB/s")},
		},
	},
	{
		Title: "Raw files per hour under paced traffic",
		Goal:  "a closed hour ≤ 1 file per 1 M rows; an open (partition, hour) ≤ 64 files",
		About: "tools/compactpace (`BenchmarkCompactPace`): 30 traffic minutes at 2,000 events/s over 3 partitions from 00:40 (hour 00 closes, hour 01 stays open), 1% of events late by 1–10 minutes, 0.5% redelivered; the archive's writer every 2 s per partition, a compaction pass (`activities.Compaction.CompactRaw`, closed hours judged by the archive's progress minus the 5-minute margin) every 30 s of traffic. **The clock is compressed** by the speed in the table (BENCH_PACE_SPEED; 1 is real time, 10 plays the 30 traffic minutes in 3 wall minutes): archive steps and passes follow the traffic clock, so the file counts do not depend on the speed except through late_delay (it ages files by wall time and is divided by the speed); the speed decides whether archive and compaction keep up, which the speed achieved shows (below the speed asked: they fell behind, and the run took longer). The closed hour's files are counted at the end of the run, the open (partition, hour)'s just before each pass (its peak); every archived record is checked to be in raw or raw_dropped.",
		Rows: []Row{
			{Case: "**files of a closed hour** vs 1 per 1 M rows", Reckon: fig(pkgPace, pace, "closed-files"), Ref: ref(pkgPace, pace, "closed-bound"),
				Goal: &Goal{Text: "≤ 1 file per 1 M rows", Kind: RatioAtMost, Value: 1}},
			{Case: "**most files of an open (partition, hour)** vs max_open_files", Reckon: fig(pkgPace, pace, "open-files"), Ref: ref(pkgPace, pace, "open-bound"),
				Goal: &Goal{Text: "≤ 64 files", Kind: RatioAtMost, Value: 1}},
			{Case: "closed hours", Reckon: fig(pkgPace, pace, "closed-hours")},
			{Case: "records archived", Reckon: fig(pkgPace, pace, "rows")},
			{Case: "duplicates dropped (of redeliveries generated)", Reckon: fig(pkgPace, pace, "dropped"), Ref: ref(pkgPace, pace, "redelivered")},
			{Case: "compaction passes, CPU time", Reckon: fig(pkgPace, pace, "compact-cpu-s")},
			{Case: "speed asked (traffic seconds per wall second)", Reckon: fig(pkgPace, pace, "speed"), Ref: Reference{Text: "1 (real time)"}},
			{Case: "speed achieved (traffic time / wall time)", Reckon: fig(pkgPace, pace, "achieved-speed"), Ref: ref(pkgPace, pace, "speed")},
			{Case: "traffic time", Reckon: fig(pkgPace, pace, "traffic-min")},
			{Case: "behind the pace at the end (wall)", Reckon: fig(pkgPace, pace, "behind-s")},
		},
	},
	{
		Title: "Z-reports on the Temporal dev server",
		Goal:  "10,000 business keys × 3 parts from a backlog at ≥ 2.0 parts per server call and ≥ 1.5× the bare signal-with-start rate; parts spread out (no batching possible) at ≥ 90% of it",
		About: "N business keys × 3 parts through the bridge (signal-with-start) and the entity workflows to finalize → lake + complete topic, on a real dev server, twice: from a backlog (each key's parts together in its partition, already in the topic: the bridge sends a key's parts found in one poll in one call, docs/adr/0021-zreport-coalescing.md), then N more keys whose parts arrive in three rounds, one part of every key per round, each round produced after the bridge committed the one before (no poll or linger holds two parts of a key). The reference, measured first in the same run on the same server: the bare signal-with-start rate (one part per call) to a workflow that only receives signals.",
		Rows: []Row{
			{Case: "**parts/s accepted, backlog**", Reckon: fig(pkgWorkers, zrep, "parts/s"), Ref: ref(pkgWorkers, zrep, "bare-signals/s"),
				Goal: &Goal{Text: "backlog at ≥ 1.5× the bare signal-with-start rate", Kind: RatioAtLeast, Value: 1.5}},
			{Case: "**parts per server call, backlog**", Reckon: fig(pkgWorkers, zrep, "parts/call"), Ref: Reference{Text: "1 (one signal-with-start per part)", Value: 1},
				Goal: &Goal{Text: "backlog at ≥ 2.0 parts per server call", Kind: AtLeast, Value: 2}},
			{Case: "**parts/s accepted, spread out**", Reckon: fig(pkgWorkers, zrep, "spread-parts/s"), Ref: ref(pkgWorkers, zrep, "bare-signals/s"),
				Goal: &Goal{Text: "parts spread out at ≥ 90% of the bare rate", Kind: RatioAtLeast, Value: 0.9}},
			{Case: "parts per server call, spread out", Reckon: fig(pkgWorkers, zrep, "spread-parts/call"), Ref: Reference{Text: "1 (one signal-with-start per part)", Value: 1}},
			{Case: "**keys, all finalized**", Reckon: fig(pkgWorkers, zrep, MetricN),
				Goal: &Goal{Text: "10,000 keys", Kind: Scale, Value: 10_000, Unit: "keys", Hint: "`make bench ZREPORT_KEYS=10000` checks it (that step alone takes about 7 minutes on a quiet machine, over the suite's budget)"}},
			{Case: "keys finalized/s, backlog", Reckon: fig(pkgWorkers, zrep, "finalized-keys/s")},
			{Case: "time until all final, backlog", Reckon: fig(pkgWorkers, zrep, "s-to-all-final")},
			{Case: "Go heap after (bridge + worker + kfake)", Reckon: fig(pkgWorkers, zrep, "heap-MiB")},
		},
	},
	{
		Title: "Time to truth for too-late events",
		About: "The end-to-end test's stack (real dev server, kfake, stream and batch workers in process; 5 s windows, 2 s allowed lateness, 1 s correction debounce) under 1,200 live payments at 60/s: from the generator releasing an event beyond allowed lateness to a read-committed observer seeing the batch correction pane that counts it. No numeric goal.",
		Rows: []Row{
			{Case: "p50", Reckon: fig(pkgWorkers, ttt, "p50-s"), Ref: dailyReconcile},
			{Case: "p99", Reckon: fig(pkgWorkers, ttt, "p99-s"), Ref: dailyReconcile},
			{Case: "max", Reckon: fig(pkgWorkers, ttt, "max-s"), Ref: dailyReconcile},
			{Case: "too-late events measured", Reckon: fig(pkgWorkers, ttt, "events")},
		},
	},
	{
		Title: "Time to final under steady traffic",
		Goal:  "p99 ≤ 30 s with the defaults",
		About: "The end-to-end test's stack (real dev server, kfake, stream worker in process, `reckon batch` with the finalizer and horizon poll at their defaults: a step every 10 s, 30 s long polls; 5 s windows, 2 s allowed lateness) under 200 clean payments/s for a minute: per (key, window), from the moment a watcher of the progress topic (every 100 ms) saw every partition purged through the window's end to the window's truth row in the lake (its emitted_at), computed by the finalizer (docs/adr/0034-finalizer.md).",
		Rows: []Row{
			{Case: "p50", Reckon: fig(pkgWorkers, ttf, "p50-s"), Ref: dailyFinal},
			{Case: "**p99**", Reckon: fig(pkgWorkers, ttf, "p99-s"), Ref: dailyFinal,
				Goal: &Goal{Text: "p99 ≤ 30 s", Kind: Below, Value: 30.001}},
			{Case: "max", Reckon: fig(pkgWorkers, ttf, "max-s"), Ref: dailyFinal},
			{Case: "windows measured", Reckon: fig(pkgWorkers, ttf, "windows")},
		},
	},
	{
		Title: "Traffic generator",
		About: "Finite runs as `reckon generate --count` makes them, default mix and without the 1 MiB oversized poison records.",
		Rows: []Row{
			{Case: "sensors", Reckon: fig(pkgGenerate, "BenchmarkGenerate/sensors/default", "events/s")},
			{Case: "sensors, no oversized", Reckon: fig(pkgGenerate, "BenchmarkGenerate/sensors/no-oversized", "events/s")},
			{Case: "payments", Reckon: fig(pkgGenerate, "BenchmarkGenerate/payments/default", "events/s")},
			{Case: "payments, no oversized", Reckon: fig(pkgGenerate, "BenchmarkGenerate/payments/no-oversized", "events/s")},
			{Case: "fiscal", Reckon: fig(pkgGenerate, "BenchmarkGenerate/fiscal/default", "events/s")},
			{Case: "fiscal, no oversized", Reckon: fig(pkgGenerate, "BenchmarkGenerate/fiscal/no-oversized", "events/s")},
			{Case: "sensors with JSONL rendering", Reckon: fig(pkgGenerate, "BenchmarkJSONL", "events/s")},
		},
	},
}
