package workers

import (
	"bufio"
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/lakeconn"
	"reckon/internal/numfmt"
	"reckon/lake"
	"reckon/lake/storage"
	"reckon/lake/storage/errorfs"
)

// lakeSubcommands of `reckon lake`, in help order.
var lakeSubcommands = []struct {
	name, summary string
	run           func(ctx context.Context, cx *cmdContext) error
}{
	{"ls", "list tables, partitions, files, rows, bytes, time coverage and archive progress", runLakeLs},
	{"write", "archive a JSONL file of envelopes (arrived_at = ingest time) like the archiver does", runLakeWrite},
	{"query", "aggregate a topic per key and window (count, sum, min, max), deduplicated by event_id, or read a " +
		"stream's curated windows", runLakeQuery},
	{"compact", "compact hours as closed: merged across partitions, redeliveries dropped to raw_dropped/ (the " +
		"compaction workflow does it continuously)", runLakeCompact},
	{"curate", "rebuild a stream's curated windows, corrections and feature_status tables of one date from its history",
		runLakeCurate},
}

// runLake dispatches `reckon lake <subcommand>`.
func runLake(ctx context.Context, cx *cmdContext) error {
	if len(cx.args) == 0 || cx.args[0] == "-h" || cx.args[0] == "--help" || cx.args[0] == "help" {
		fmt.Fprintln(cx.stderr, "Usage: reckon lake <subcommand> [flags]\n\nSubcommands:")
		for _, s := range lakeSubcommands {
			fmt.Fprintf(cx.stderr, "  %-8s %s\n", s.name, s.summary)
		}
		if len(cx.args) == 0 {
			return fmt.Errorf("%w: missing subcommand", errUsage)
		}
		return nil
	}
	for _, s := range lakeSubcommands {
		if s.name == cx.args[0] {
			cx.args = cx.args[1:]
			cx.fs.Init("reckon lake "+s.name, cx.fs.ErrorHandling())
			return s.run(ctx, cx)
		}
	}
	return fmt.Errorf("%w: unknown subcommand %q (ls, write, query, compact, curate)", errUsage, cx.args[0])
}

// lakeFlag registers --lake; openLake opens it after cx.parse.
func lakeFlag(cx *cmdContext) *string {
	return cx.fs.String("lake", "",
		"lake root: a directory or s3://bucket[/prefix] reached as lake.s3 says (default: lake.root from the configuration)")
}

func openLake(cx *cmdContext, root string) (*lake.Lake, error) {
	return openConfiguredLake(cx.cfg, root)
}

// openConfiguredLake opens the lake at root (lake.root when empty) with the
// configuration's object storage settings: every command reaches the lake
// the same way.
func openConfiguredLake(cfg *config.Config, root string) (*lake.Lake, error) {
	opts, err := lakeOptions(cfg.Lake, root)
	if err != nil {
		return nil, err
	}
	return lake.Open(opts)
}

// lakeOptions maps the lake section onto lake.Options for the lake at root
// (c.Root when empty), reading the secret key file and the CA bundle.
func lakeOptions(c config.Lake, root string) (lake.Options, error) {
	if root == "" {
		root = c.Root
	}
	opts := lake.Options{Root: root, CompactLease: c.Compaction.Lease}
	if f := lakeFaults(c); f != nil {
		opts.Wrap = f.Wrap
		slog.Warn("lake: storage fault injection is on (lake.faults: chaos testing only)", "rate", c.Faults.Rate, "seed",
			c.Faults.Seed)
	}
	if !storage.IsS3Root(root) {
		return opts, nil
	}
	s3, err := lakeconn.S3Options(c.S3)
	opts.S3 = s3
	return opts, err
}

// lakeFaults returns the storage faults lake.faults asks for, nil when its
// rate is 0: chaos only (docs/adr/0022-lake-fault-injection.md).
func lakeFaults(c config.Lake) *errorfs.Faults {
	if c.Faults.Rate <= 0 {
		return nil
	}
	return errorfs.UniformFaults(uint64(c.Faults.Seed), c.Faults.Rate)
}

func lakeNoArgs(cx *cmdContext) error {
	if cx.fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, cx.fs.Args())
	}
	return nil
}

// runLakeLs prints what the lake holds.
func runLakeLs(ctx context.Context, cx *cmdContext) error {
	dir := lakeFlag(cx)
	format := cx.fs.String("format", "table", "output format: table or json")
	if err := cx.parse(); err != nil {
		return err
	}
	if err := lakeNoArgs(cx); err != nil {
		return err
	}
	l, err := openLake(cx, *dir)
	if err != nil {
		return err
	}
	inv, err := l.List(ctx)
	if err != nil {
		return err
	}
	retention := "forever"
	if r := cx.cfg.Lake.RejectedRetention; r > 0 {
		retention = lakeDuration(r)
	}
	for i := range inv.Tables {
		if inv.Tables[i].Table == lake.RejectedDir {
			inv.Tables[i].Retention = retention
		}
	}
	switch *format {
	case "json":
		enc := json.NewEncoder(cx.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(inv)
	case "table":
	default:
		return fmt.Errorf("%w: --format %q: want table or json", errUsage, *format)
	}
	tw := tabwriter.NewWriter(cx.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "lake %s\n", l.Root())
	if len(inv.Tables) == 0 {
		fmt.Fprintln(tw, "(empty)")
	} else {
		fmt.Fprintln(tw, "TABLE\tNAME\tPARTITIONS\tFILES\tROWS\tBYTES\tFROM\tTO\tRETENTION")
		for _, t := range inv.Tables {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Table, t.Name, numfmt.Int(int64(t.Partitions)),
				numfmt.Int(int64(t.Files)), numfmt.Int(t.Rows), lakeBytes(t.Bytes), lakeRFC3339(t.From), lakeRFC3339(t.To),
				cmp.Or(t.Retention, "forever"))
		}
		if cx.cfg.Lake.RejectedRetention > 0 {
			fmt.Fprintf(tw, "(rejected: the compaction workflow deletes an ingest date %s after its day; "+
				"lake.rejected_retention)\n", retention)
		}
	}
	if len(inv.Progress) > 0 {
		fmt.Fprintln(tw, "\nPROGRESS\tPARTITION\tNEXT_OFFSET\tARCHIVED_THROUGH\tUPDATED_AT")
		for _, p := range inv.Progress {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", p.Topic, p.Partition, p.NextOffset, lakeRFC3339(p.ArchivedThrough),
				lakeRFC3339(p.UpdatedAt))
		}
	}
	return tw.Flush()
}

// lakeDuration renders d in days when whole days, else as Go does.
func lakeDuration(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	return d.String()
}

// runLakeWrite archives a JSONL file through the archiver's writer.
func runLakeWrite(ctx context.Context, cx *cmdContext) error {
	dir := lakeFlag(cx)
	topic := cx.fs.String("topic", "", "Kafka topic the records belong to (required)")
	keyPath := cx.fs.String("key", "",
		"dotted envelope path of the key, e.g. data.id_perangkat (default: the configured stream of --topic); with it any "+
			"event type is accepted, as by simulate")
	valuePath := cx.fs.String("value", "",
		"dotted envelope path of the value, e.g. data.suhu_c (default: the configured stream of --topic)")
	input := cx.fs.String("input", "", "JSONL file of envelopes with arrived_at (required; - for stdin)")
	batch := cx.fs.Int("batch", 1_000_000, "lines per archived batch (one file per event hour per batch)")
	batchBytes := cx.fs.Int("batch-bytes", 64<<20,
		"bytes of input per archived batch at most: memory is bounded by a batch, not by the input")
	if err := cx.parse(); err != nil {
		return err
	}
	if err := lakeNoArgs(cx); err != nil {
		return err
	}
	var missing []string
	if *topic == "" {
		missing = append(missing, "--topic")
	}
	if *input == "" {
		missing = append(missing, "--input")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s required", errUsage, strings.Join(missing, " and "))
	}
	if *batch <= 0 || *batchBytes <= 0 {
		return fmt.Errorf("%w: --batch and --batch-bytes must be positive", errUsage)
	}
	// With --key the caller defines the table: any event type is accepted
	// as `reckon simulate` accepts it (the envelope checks); types the
	// configuration has rules for still get them, so a configured topic
	// archives the same rows with or without --key.
	gateOpts := cx.cfg.Gate
	if *keyPath != "" {
		gateOpts.AllowUnknownTypes = true
	}
	table := lake.RawTable{Topic: *topic, KeyPath: *keyPath, ValuePath: *valuePath}
	for _, s := range cx.cfg.Streams {
		if s.Topic == *topic {
			if table.KeyPath == "" {
				table.KeyPath = "data." + s.KeyField
			}
			if table.ValuePath == "" && s.ValueField != "" {
				table.ValuePath = "data." + s.ValueField
			}
			break
		}
	}
	if table.KeyPath == "" {
		return fmt.Errorf("%w: --key required: no stream reads topic %q", errUsage, *topic)
	}
	l, err := openLake(cx, *dir)
	if err != nil {
		return err
	}
	gate, err := event.NewGate(gateOpts)
	if err != nil {
		return err
	}
	w, err := l.NewRawWriter(table, gate)
	if err != nil {
		return err
	}
	in := cx.stdin
	if *input != "-" {
		f, err := os.Open(*input)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	parser, err := event.NewGate(gateOpts) // reads arrived_at; the writer's gate checks
	if err != nil {
		return err
	}
	maxLine := gateOpts.MaxPayloadBytes
	if maxLine <= 0 {
		maxLine = event.DefaultMaxPayloadBytes
	}
	start := time.Now()
	total, err := writeJSONL(ctx, w, parser, in, jsonlBatch{Lines: *batch, Bytes: *batchBytes, MaxLine: maxLine + 1},
		cx.stdout)
	if err != nil {
		return err
	}
	if total.Records == 0 {
		return fmt.Errorf("lake write: %s has no lines", *input)
	}
	if _, err := l.WriteProgress(ctx,
		lake.Progress{Topic: *topic, Partition: 0, NextOffset: total.LastOffset + 1, ArchivedThrough: total.MaxIngestedAt,
			UpdatedAt: time.Now()}); err != nil {
		return err
	}
	fmt.Fprintf(cx.stdout, "%s: %d lines -> %d raw rows, %d rejected, %d files, %s in %.2fs\n",
		*topic, total.Records, total.Rows, total.Rejected, total.Files, lakeBytes(total.Bytes), time.Since(start).Seconds())
	return nil
}

// lakeWriteTotals sums the batches of one `lake write`.
type lakeWriteTotals struct {
	Records, Rows, Rejected, Bytes int64
	Files                          int
	LastOffset                     int64
	MaxIngestedAt                  time.Time
}

// jsonlBatch bounds the batches of writeJSONL.
type jsonlBatch struct {
	// Lines and Bytes end a batch at this many lines or once its lines
	// hold this many bytes, whichever comes first.
	Lines, Bytes int
	// MaxLine is how many bytes of a line are kept: a longer line is kept
	// truncated (the gate rejects it as oversized), so one line costs at
	// most MaxLine bytes however long it is.
	MaxLine int
}

// writeJSONL archives the lines of in as partition 0, offset = line number
// (the first line is offset 1), in batches bounded by lim. A line's ingest
// time is its arrived_at; a line without one (or not JSON at all) takes the
// previous line's, or at the start of the file the first one found, so every
// record gets a deterministic time and nothing is dropped. Memory is
// bounded by a batch (lim.Bytes plus one line of lim.MaxLine), not by the
// input.
func writeJSONL(ctx context.Context, w *lake.RawWriter, parser *event.Gate, in io.Reader, lim jsonlBatch,
	out io.Writer) (lakeWriteTotals, error) {
	var tot lakeWriteTotals
	batch, maxLine := lim.Lines, lim.MaxLine
	r := bufio.NewReaderSize(in, 1<<20)
	recs := make([]lake.RawRecord, 0, min(batch, 1<<16))
	var arena []byte // the batch's lines, back to back
	var ends []int   // end of each line in arena
	var last time.Time
	pending := 0 // leading records still waiting for a known arrival
	flush := func() error {
		if len(recs) == 0 {
			return nil
		}
		if last.IsZero() {
			return fmt.Errorf("lake write: no line up to %d has a valid arrived_at", recs[len(recs)-1].Offset)
		}
		for i := 0; i < pending; i++ {
			recs[i].Timestamp = last
		}
		pending = 0
		start := 0
		for i := range recs {
			recs[i].Value = arena[start:ends[i]:ends[i]]
			start = ends[i]
		}
		res, err := w.WriteRange(ctx, 0, recs[0].Offset, recs[len(recs)-1].Offset, recs)
		if err != nil {
			return err
		}
		tot.Rows += res.Rows
		tot.Rejected += res.Rejected
		tot.Files += len(res.Files)
		for _, f := range res.Files {
			tot.Bytes += f.Bytes
			fmt.Fprintf(out, "  %s\t%d rows\t%s\n", f.Path, f.Rows, lakeBytes(f.Bytes))
		}
		tot.LastOffset = res.LastOffset
		if res.MaxIngestedAt.After(tot.MaxIngestedAt) {
			tot.MaxIngestedAt = res.MaxIngestedAt
		}
		clear(recs) // the arena is reused; no record keeps a slice of it
		recs, arena, ends = recs[:0], arena[:0], ends[:0]
		return nil
	}
	for line := int64(1); ; line++ {
		if err := ctx.Err(); err != nil {
			return tot, err
		}
		b, err := readLakeLine(r, maxLine)
		if errors.Is(err, io.EOF) && b == nil {
			break
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return tot, fmt.Errorf("lake write: line %d: %w", line, err)
		}
		rec := lake.RawRecord{Offset: line}
		if env, res := parser.Parse(b); res.Valid {
			if s, ok := env.String("arrived_at"); ok {
				if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
					rec.Timestamp = t.UTC()
					last = rec.Timestamp
					for i := len(recs) - pending; i < len(recs); i++ {
						recs[i].Timestamp = last
					}
					pending = 0
				}
			}
		}
		if rec.Timestamp.IsZero() {
			if last.IsZero() {
				pending++
			}
			rec.Timestamp = last
		}
		arena = append(arena, b...)
		ends = append(ends, len(arena))
		recs = append(recs, rec)
		tot.Records++
		if len(recs) == batch || len(arena) >= lim.Bytes {
			if err := flush(); err != nil {
				return tot, err
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	return tot, flush()
}

// readLakeLine reads one line without its line ending, keeping at most
// maxLine bytes of it. At the end of the input it returns io.EOF, with a
// nil line when there was nothing left.
func readLakeLine(r *bufio.Reader, maxLine int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line) < maxLine {
			line = append(line, chunk[:min(len(chunk), maxLine-len(line))]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == nil || len(line) > 0 {
			line = trimLakeEOL(line)
			if line == nil {
				line = []byte{}
			}
		}
		return line, err
	}
}

func trimLakeEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// runLakeQuery prints one row per (key, window).
func runLakeQuery(ctx context.Context, cx *cmdContext) error {
	dir := lakeFlag(cx)
	topic := cx.fs.String("topic", "", "topic of the raw table to aggregate (this or --stream required)")
	stream := cx.fs.String("stream", "",
		"read the curated windows table of this stream instead: each window's latest figure and its status, no scan of raw "+
			"events")
	fromS := cx.fs.String("from", "", "start of the event-time range, RFC 3339 or YYYY-MM-DD (required)")
	toS := cx.fs.String("to", "", "end of the event-time range (exclusive), RFC 3339 or YYYY-MM-DD (required)")
	var keys, types stringList
	cx.fs.Var(&keys, "key", "only this key (repeatable)")
	cx.fs.Var(&types, "event-type", "only this event type (repeatable; not with --stream)")
	window := cx.fs.Duration("window", time.Hour, "window size; must divide 24h (not with --stream: the stream's window)")
	format := cx.fs.String("format", "table",
		"output format: table, csv, json (one object per line) or arrow (an Arrow IPC stream)")
	stats := cx.fs.Bool("stats", false, "print scan statistics to stderr")
	if err := cx.parse(); err != nil {
		return err
	}
	if err := lakeNoArgs(cx); err != nil {
		return err
	}
	var problems []string
	switch {
	case *topic == "" && *stream == "":
		problems = append(problems, "--topic or --stream required")
	case *topic != "" && *stream != "":
		problems = append(problems, "--topic and --stream exclude each other")
	case *stream != "":
		cx.fs.Visit(func(f *flag.Flag) {
			if f.Name == "window" || f.Name == "event-type" {
				problems = append(problems, "--"+f.Name+" does not apply to --stream")
			}
		})
	}
	from, err := parseLakeTime(*fromS)
	if err != nil {
		problems = append(problems, "--from: "+err.Error())
	}
	to, err := parseLakeTime(*toS)
	if err != nil {
		problems = append(problems, "--to: "+err.Error())
	}
	switch *format {
	case "table", "csv", "json", "arrow":
	default:
		problems = append(problems, fmt.Sprintf("--format %q: want table, csv, json or arrow", *format))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", errUsage, strings.Join(problems, "; "))
	}
	l, err := openLake(cx, *dir)
	if err != nil {
		return err
	}
	if *stream != "" {
		return queryLakeWindows(ctx, cx, l, *stream, from, to, keys, *format)
	}
	aggs, st, err := l.Aggregate(ctx, lake.Query{Topic: *topic, From: from, To: to, Keys: keys, EventTypes: types},
		*window)
	if errors.Is(err, lake.ErrBadQuery) || errors.Is(err, lake.ErrBadName) {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if err != nil {
		return err
	}
	if *stats {
		fmt.Fprintf(cx.stderr, "hours %d, files %d, row groups %d (pruned %d), rows read %d, rows %d, duplicates %d\n",
			st.HourDirs, st.Files, st.RowGroups, st.RowGroupsPruned, st.RowsRead, st.Rows, st.Duplicates)
	}
	return printLakeAggs(cx.stdout, *format, aggs)
}

// parseLakeTime accepts RFC 3339 (any offset) or a bare UTC date.
func parseLakeTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, errors.New("required")
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q is not RFC 3339 or YYYY-MM-DD", s)
}

// lakeAggJSON is one line of `lake query --format json`.
type lakeAggJSON struct {
	Key         string  `json:"key"`
	WindowStart string  `json:"window_start"`
	WindowEnd   string  `json:"window_end"`
	Count       int64   `json:"count"`
	Sum         float64 `json:"sum"`
	Avg         float64 `json:"avg"` // sum / count
	Min         float64 `json:"min"`
	Max         float64 `json:"max"`
}

func printLakeAggs(out io.Writer, format string, aggs []lake.WindowAgg) error {
	if format == "arrow" {
		return writeArrowAggs(out, aggs)
	}
	bw := bufio.NewWriter(out)
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	// Windows hold at least one event, so count is never 0.
	avg := func(a lake.WindowAgg) float64 { return a.Sum / float64(a.Count) }
	switch format {
	case "json":
		enc := json.NewEncoder(bw)
		for _, a := range aggs {
			if err := enc.Encode(lakeAggJSON{a.Key, lakeRFC3339(a.WindowStart), lakeRFC3339(a.WindowEnd), a.Count, a.Sum, avg(a),
				a.Min, a.Max}); err != nil {
				return err
			}
		}
	case "csv":
		cw := csv.NewWriter(bw)
		cw.Write([]string{"key", "window_start", "window_end", "count", "sum", "avg", "min", "max"})
		for _, a := range aggs {
			cw.Write([]string{a.Key, lakeRFC3339(a.WindowStart), lakeRFC3339(a.WindowEnd), strconv.FormatInt(a.Count, 10),
				f(a.Sum), f(avg(a)), f(a.Min), f(a.Max)})
		}
		cw.Flush()
		if err := cw.Error(); err != nil {
			return err
		}
	default:
		tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tWINDOW_START\tWINDOW_END\tCOUNT\tSUM\tAVG\tMIN\tMAX")
		for _, a := range aggs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Key, lakeRFC3339(a.WindowStart), lakeRFC3339(a.WindowEnd),
				numfmt.Int(a.Count), numfmt.Float(a.Sum), numfmt.Float(avg(a)), numfmt.Float(a.Min), numfmt.Float(a.Max))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// runLakeCompact compacts the hours of one date (or one hour) as closed,
// with the code the compaction workflow runs
// (docs/adr/0018-continuous-compaction.md); for hours the stream may still
// count events of, it is correct but early work.
func runLakeCompact(ctx context.Context, cx *cmdContext) error {
	dir := lakeFlag(cx)
	topic := cx.fs.String("topic", "", "topic of the raw table (required)")
	dateS := cx.fs.String("date", "", "UTC event date YYYY-MM-DD (required)")
	hourF := cx.fs.Int("hour", -1, "only this UTC hour 0-23 (default: every hour of the date)")
	if err := cx.parse(); err != nil {
		return err
	}
	if err := lakeNoArgs(cx); err != nil {
		return err
	}
	date, err := time.Parse(time.DateOnly, *dateS)
	if *topic == "" || err != nil || *hourF < -1 || *hourF > 23 {
		return fmt.Errorf("%w: --topic, --date YYYY-MM-DD and optionally --hour 0-23 required", errUsage)
	}
	l, err := openLake(cx, *dir)
	if err != nil {
		return err
	}
	hours := []int{*hourF}
	if *hourF < 0 {
		hours = hours[:0]
		for h := 0; h < 24; h++ {
			hours = append(hours, h)
		}
	}
	for _, h := range hours {
		res, err := l.CompactHour(ctx, *topic, date.Add(time.Duration(h)*time.Hour),
			lake.CompactOptions{MaxRows: cx.cfg.Lake.Compaction.MaxRows, Sweep: true})
		if err != nil {
			return err
		}
		for _, f := range res.Written {
			fmt.Fprintf(cx.stdout, "%s\t%d rows\t%s\t(%d inputs removed, %d duplicate offsets, %d redeliveries dropped)\n",
				f.Path, f.Rows, lakeBytes(f.Bytes), len(res.Removed), res.DuplicateOffsets, res.Dropped)
		}
	}
	return nil
}

func lakeRFC3339(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func lakeBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
