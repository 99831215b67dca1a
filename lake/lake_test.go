package lake

import (
	"bytes"
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"reckon/internal/event"
	"reckon/lake/storage"
)

const topic = "m8-suhu-kejadian"

// TestRawFileFormat checks the written file itself, as another tool sees it:
// column names and types, TIMESTAMP(MICROS, UTC), zstd, data page v1,
// bounded row groups, declared sort order, rows sorted.
func TestRawFileFormat(t *testing.T) { forEachStore(t, testRawFileFormat) }

func testRawFileFormat(t *testing.T, opts Options) {
	opts.RowGroupRows = 1000
	l := mustOpen(t, opts)
	rows := genRows(3500, 1, 7, 2, 100, 1)
	res, err := l.WriteRaw(t.Context(), topic, 2, 100, 3599, rows)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"raw/topic=m8-suhu-kejadian/event_date=2026-11-07/event_hour=00/m8-suhu-kejadian-2-100-3599.parquet"}
	if got := listFiles(t, l); !slices.Equal(got, want) {
		t.Fatalf("files = %v, want %v", got, want)
	}
	pf := openParquet(t, l, want[0])
	md := pf.Metadata()

	wantCols := []struct {
		name string
		typ  format.Type
	}{
		{"event_id", format.ByteArray}, {"event_type", format.ByteArray},
		{"occurred_at", format.Int64}, {"ingested_at", format.Int64},
		{"key", format.ByteArray}, {"value", format.Double}, {"data", format.ByteArray},
		{"kafka_partition", format.Int32}, {"kafka_offset", format.Int64},
	}
	leaves := md.Schema[1:]
	if len(leaves) != len(wantCols) {
		t.Fatalf("schema has %d columns, want %d", len(leaves), len(wantCols))
	}
	for i, c := range wantCols {
		e := leaves[i]
		if typ, ok := e.Type.Get(); e.Name != c.name || !ok || typ != c.typ {
			t.Errorf("column %d = %s %v, want %s %v", i, e.Name, e.Type, c.name, c.typ)
		}
		if rep, ok := e.RepetitionType.Get(); !ok || rep != format.Required {
			t.Errorf("column %s is not required", e.Name)
		}
		switch c.name {
		case "occurred_at", "ingested_at":
			if !isMicrosUTC(e.LogicalType) {
				t.Errorf("%s logical type = %+v, want TIMESTAMP(MICROS, isAdjustedToUTC=true)", c.name, e.LogicalType)
			}
		case "event_id", "event_type", "key", "data":
			if _, ok := e.LogicalType.Value.(*format.StringType); !ok {
				t.Errorf("%s logical type = %+v, want STRING", c.name, e.LogicalType)
			}
		}
	}
	if n := len(md.RowGroups); n != 4 {
		t.Errorf("row groups = %d, want 4 (3500 rows, 1000 per group)", n)
	}
	for _, rg := range md.RowGroups {
		for _, cc := range rg.Columns {
			if cc.MetaData.Codec != format.Zstd {
				t.Errorf("%v codec = %v, want ZSTD", cc.MetaData.PathInSchema, cc.MetaData.Codec)
			}
			for _, es := range cc.MetaData.EncodingStats {
				if es.PageType == format.DataPageV2 {
					t.Errorf("%v has a v2 data page", cc.MetaData.PathInSchema)
				}
			}
		}
		if got := len(rg.SortingColumns); got != 3 {
			t.Errorf("sorting columns = %v, want key, occurred_at, event_id", rg.SortingColumns)
		}
	}
	back := readParquet[RawRow](t, l, want[0])
	if !slices.IsSortedFunc(back, func(a, b RawRow) int { return compareRaw(&a, &b) }) {
		t.Error("rows are not sorted by key, occurred_at, event_id")
	}
	sorted := slices.Clone(rows)
	slices.SortFunc(sorted, func(a, b RawRow) int { return compareRaw(&a, &b) })
	if !slices.Equal(back, sorted) {
		t.Error("rows read back differ from rows written")
	}
	if res.Rows != 3500 || res.NextOffset != 3600 || len(res.Hours) != 1 || res.Hours[0].Rows != 3500 {
		t.Errorf("result = %+v", res)
	}
}

func TestWriteSplitsHoursAndIsIdempotent(t *testing.T) {
	forEachStore(t, testWriteSplitsHoursAndIsIdempotent)
}

func testWriteSplitsHoursAndIsIdempotent(t *testing.T, opts Options) {
	l := mustOpen(t, opts)
	rows := genRows(1000, 3, 5, 0, 0, 2) // spans hours 00, 01, 02
	res, err := l.WriteRaw(t.Context(), topic, 0, 0, 999, rows)
	if err != nil {
		t.Fatal(err)
	}
	first := listFiles(t, l)
	if len(first) != 3 || len(res.Hours) != 3 {
		t.Fatalf("files = %v, hours = %v; want one per hour", first, res.Hours)
	}
	for _, f := range first {
		if !declaresRawOrder(openParquet(t, l, f)) {
			t.Errorf("%s does not declare key, occurred_at, event_id order", f)
		}
	}
	for _, f := range first {
		if !strings.HasSuffix(f, "/m8-suhu-kejadian-0-0-999.parquet") {
			t.Errorf("file %s not named by the batch's offset range", f)
		}
	}
	var sum int64
	for i, h := range res.Hours {
		if !h.Hour.Equal(testStart.Add(time.Duration(i) * time.Hour)) {
			t.Errorf("hour %d = %v", i, h.Hour)
		}
		sum += h.Rows
	}
	if sum != 1000 {
		t.Errorf("per-hour counts sum to %d, want 1000", sum)
	}
	if _, err := l.WriteRaw(t.Context(), topic, 0, 0, 999, rows); err != nil {
		t.Fatal(err)
	}
	if again := listFiles(t, l); !slices.Equal(first, again) {
		t.Errorf("rewrite changed files: %v -> %v", first, again)
	}
	aggs, st, err := l.Aggregate(context.Background(), Query{Topic: topic, From: testStart, To: testStart.Add(3 * time.Hour)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if st.Rows != 1000 || st.Duplicates != 0 {
		t.Errorf("after rewrite: %d rows, %d duplicates; want 1000, 0", st.Rows, st.Duplicates)
	}
	checkAggs(t, aggs, rows, time.Hour)
}

// TestSupersede: a retried batch that read further replaces the shorter
// attempt's files; an overlapping (not covering) one does not.
func TestSupersede(t *testing.T) { forEachStore(t, testSupersede) }

func testSupersede(t *testing.T, opts Options) {
	l := mustOpen(t, opts)
	rows := genRows(300, 1, 3, 1, 0, 3)
	if _, err := l.WriteRaw(t.Context(), topic, 1, 0, 99, rows[:100]); err != nil {
		t.Fatal(err)
	}
	if _, err := l.WriteRaw(t.Context(), topic, 1, 50, 149, rows[50:150]); err != nil {
		t.Fatal(err)
	}
	res, err := l.WriteRaw(t.Context(), topic, 1, 0, 199, rows[:200])
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Superseded) != 2 {
		t.Errorf("superseded = %v, want both shorter files", res.Superseded)
	}
	if _, err := l.WriteRaw(t.Context(), topic, 1, 150, 299, rows[150:]); err != nil {
		t.Fatal(err)
	}
	got := listFiles(t, l)
	want := []string{
		"raw/topic=m8-suhu-kejadian/event_date=2026-11-07/event_hour=00/m8-suhu-kejadian-1-0-199.parquet",
		"raw/topic=m8-suhu-kejadian/event_date=2026-11-07/event_hour=00/m8-suhu-kejadian-1-150-299.parquet",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("files = %v, want %v", got, want)
	}
	// Offsets 150..199 are in two files: the reader counts them once.
	aggs, st, err := l.Aggregate(context.Background(), Query{Topic: topic, From: testStart, To: testStart.Add(time.Hour)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if st.Rows != 300 || st.Duplicates != 50 || st.HashDedupedHours != 0 {
		t.Errorf("stats = %+v, want 300 rows, 50 duplicates found by merging", st)
	}
	checkAggs(t, aggs, rows, time.Hour)
}

// TestDedupWithinFile: redeliveries of an event at later offsets land next
// to it in the file and are counted once.
func TestDedupWithinFile(t *testing.T) { forEachStore(t, testDedupWithinFile) }

func testDedupWithinFile(t *testing.T, opts Options) {
	l := mustOpen(t, opts)
	rows := genRows(500, 2, 4, 0, 0, 4)
	for i := 0; i < 500; i += 7 { // redeliver every 7th event at a new offset
		d := rows[i]
		d.KafkaOffset = int64(len(rows))
		d.IngestedAt += 5_000_000
		rows = append(rows, d)
	}
	if _, err := l.WriteRaw(t.Context(), topic, 0, 0, int64(len(rows)-1), rows); err != nil {
		t.Fatal(err)
	}
	aggs, st, err := l.Aggregate(context.Background(), Query{Topic: topic, From: testStart, To: testStart.Add(2 * time.Hour)}, 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if st.Rows != 500 || st.Duplicates != int64(len(rows)-500) || st.HashDedupedHours != 0 {
		t.Errorf("stats = %+v, want 500 rows, %d adjacent duplicates", st, len(rows)-500)
	}
	checkAggs(t, aggs, rows, 15*time.Minute)
}

// checkAggs compares Aggregate's output with a naive dedup-then-aggregate of
// rows (every row in range).
func checkAggs(t *testing.T, got []WindowAgg, rows []RawRow, window time.Duration) {
	t.Helper()
	want := naiveAggs(rows, window, nil)
	if len(got) != len(want) {
		t.Fatalf("%d windows, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Key != w.Key || !g.WindowStart.Equal(w.WindowStart) || !g.WindowEnd.Equal(w.WindowEnd) ||
			g.Count != w.Count || math.Abs(g.Sum-w.Sum) > 1e-9 || g.Min != w.Min || g.Max != w.Max {
			t.Errorf("window %d = %+v, want %+v", i, g, w)
		}
	}
}

func naiveAggs(rows []RawRow, window time.Duration, keep func(*RawRow) bool) []WindowAgg {
	seen := map[string]bool{}
	type cell struct {
		key string
		win int64
	}
	m := map[cell]*event.Agg{}
	// Sum in file order per window, like the reader, so float sums match.
	sorted := slices.Clone(rows)
	slices.SortFunc(sorted, func(a, b RawRow) int { return compareRaw(&a, &b) })
	for i := range sorted {
		r := &sorted[i]
		if seen[r.EventID] || keep != nil && !keep(r) {
			continue
		}
		seen[r.EventID] = true
		c := cell{r.Key, floorDiv(r.OccurredAt, int64(window/time.Microsecond))}
		if m[c] == nil {
			m[c] = new(event.Agg)
		}
		m[c].Add(r.Value)
	}
	var out []WindowAgg
	for c, a := range m {
		s := time.UnixMicro(c.win * int64(window/time.Microsecond)).UTC()
		out = append(out, WindowAgg{Key: c.key, WindowStart: s, WindowEnd: s.Add(window), Agg: *a})
	}
	slices.SortFunc(out, func(a, b WindowAgg) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return a.WindowStart.Compare(b.WindowStart)
	})
	return out
}

// TestPruning: a key filter skips row groups whose key range excludes it,
// a time range skips hour directories, and results stay exact.
func TestPruning(t *testing.T) { forEachStore(t, testPruning) }

func testPruning(t *testing.T, opts Options) {
	opts.RowGroupRows = 200
	l := mustOpen(t, opts)
	rows := genRows(4000, 4, 10, 0, 0, 5)
	if _, err := l.WriteRaw(t.Context(), topic, 0, 0, 3999, rows); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	q := Query{Topic: topic, From: testStart.Add(time.Hour), To: testStart.Add(3 * time.Hour), Keys: []string{"sensor-03"}}
	aggs, st, err := l.Aggregate(ctx, q, 30*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if st.HourDirs != 2 {
		t.Errorf("hour dirs = %d, want 2", st.HourDirs)
	}
	if st.RowGroupsPruned == 0 || st.RowGroups > 2*2 {
		t.Errorf("row groups read %d, pruned %d: want most pruned by key", st.RowGroups, st.RowGroupsPruned)
	}
	want := naiveAggs(rows, 30*time.Minute, func(r *RawRow) bool {
		return r.Key == "sensor-03" && r.OccurredAt >= q.From.UnixMicro() && r.OccurredAt < q.To.UnixMicro()
	})
	if len(aggs) != len(want) || len(aggs) != 4 {
		t.Fatalf("got %d windows, want %d (4)", len(aggs), len(want))
	}
	for i := range aggs {
		if aggs[i].Agg != want[i].Agg || aggs[i].Key != "sensor-03" {
			t.Errorf("window %d = %+v, want %+v", i, aggs[i], want[i])
		}
	}

	// Scan with projection: only the asked columns are filled.
	var n int
	_, err = l.Scan(ctx, Query{Topic: topic, From: testStart, To: testStart.Add(time.Hour), EventTypes: []string{"sensor.suhu.terbaca"}}, ColKafkaOffset|ColData, func(r *RawRow) error {
		if r.Data == "" || r.KafkaOffset < 0 || r.IngestedAt != 0 || r.Value != 0 {
			t.Fatalf("projection filled %+v", r)
		}
		n++
		return nil
	})
	if err != nil || n != 1000 {
		t.Errorf("scan hour 0: %d rows, err %v; want 1000", n, err)
	}
	_, st, err = l.Aggregate(ctx, Query{Topic: topic, From: testStart, To: testStart.Add(4 * time.Hour), EventTypes: []string{"other.type"}}, time.Hour)
	if err != nil || st.Rows != 0 || st.RowGroups != 0 {
		t.Errorf("unknown event type: stats %+v err %v, want every row group pruned", st, err)
	}
}

func TestAlignRangeAndBadQueries(t *testing.T) { forEachStore(t, testAlignRangeAndBadQueries) }

func testAlignRangeAndBadQueries(t *testing.T, opts Options) {
	from := time.Date(2026, 11, 7, 10, 30, 0, 0, time.UTC)
	to := time.Date(2026, 11, 7, 12, 0, 0, 1000, time.UTC)
	f, tt := AlignRange(from, to, time.Hour)
	if !f.Equal(time.Date(2026, 11, 7, 10, 0, 0, 0, time.UTC)) || !tt.Equal(time.Date(2026, 11, 7, 13, 0, 0, 0, time.UTC)) {
		t.Errorf("AlignRange = %v, %v", f, tt)
	}
	l := mustOpen(t, opts)
	ctx := context.Background()
	for _, w := range []time.Duration{0, 7 * time.Minute, 25 * time.Hour, time.Nanosecond} {
		if _, _, err := l.Aggregate(ctx, Query{Topic: topic, From: from, To: to}, w); !errors.Is(err, ErrBadQuery) {
			t.Errorf("window %v: err = %v, want ErrBadQuery", w, err)
		}
	}
	if _, _, err := l.Aggregate(ctx, Query{Topic: "../x", From: from, To: to}, time.Hour); !errors.Is(err, ErrBadName) {
		t.Errorf("bad topic: err = %v", err)
	}
	if _, _, err := l.Aggregate(ctx, Query{Topic: topic, From: to, To: from}, time.Hour); !errors.Is(err, ErrBadQuery) {
		t.Errorf("reversed range: err = %v", err)
	}
	aggs, _, err := l.Aggregate(ctx, Query{Topic: topic, From: from, To: to}, time.Hour)
	if err != nil || len(aggs) != 0 {
		t.Errorf("empty lake: %v, %v", aggs, err)
	}
}

func TestValidateTopic(t *testing.T) {
	for _, ok := range []string{"m8-suhu-kejadian", "a", "A.b_c-9"} {
		if err := ValidateTopic(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "_schemas", ".hidden", "a/b", "a b", "tópico", "a=b", strings.Repeat("x", 250)} {
		if err := ValidateTopic(bad); !errors.Is(err, ErrBadName) {
			t.Errorf("%q: err = %v, want ErrBadName", bad, err)
		}
	}
	r, err := ParseFileName("a-b", "a-b-3-10-20.parquet")
	if err != nil || r != (FileRange{"a-b", 3, 10, 20}) {
		t.Errorf("ParseFileName = %+v, %v", r, err)
	}
	for _, bad := range []string{"a-b-3-10.parquet", "a-b-3-20-10.parquet", "a-b-x-1-2.parquet", "a-b-3-10-20.json"} {
		if _, err := ParseFileName("a-b", bad); err == nil {
			t.Errorf("ParseFileName(%q) succeeded", bad)
		}
	}
}

func TestWriteRejectsBadRanges(t *testing.T) { forEachStore(t, testWriteRejectsBadRanges) }

func testWriteRejectsBadRanges(t *testing.T, opts Options) {
	l := mustOpen(t, opts)
	rows := genRows(10, 1, 1, 0, 5, 6)
	for _, c := range []struct {
		p           int32
		first, last int64
	}{{0, 6, 14}, {0, 5, 13}, {1, 5, 14}, {0, 14, 5}, {-1, 5, 14}} {
		if _, err := l.WriteRaw(t.Context(), topic, c.p, c.first, c.last, rows); !errors.Is(err, ErrBadRange) {
			t.Errorf("%+v: err = %v, want ErrBadRange", c, err)
		}
	}
	if got := listFiles(t, l); len(got) != 0 {
		t.Errorf("a refused write left files: %v", got)
	}
}

func TestProgress(t *testing.T) { forEachStore(t, testProgress) }

func testProgress(t *testing.T, opts Options) {
	l := mustOpen(t, opts)
	if _, err := l.ReadProgress(t.Context(), topic, 0); !errors.Is(err, ErrNoProgress) {
		t.Fatalf("err = %v, want ErrNoProgress", err)
	}
	t1 := time.Date(2026, 11, 7, 9, 0, 0, 0, time.UTC)
	for p := int32(0); p < 3; p++ {
		if _, err := l.WriteProgress(t.Context(), Progress{Topic: topic, Partition: p, NextOffset: 100 * int64(p+1), ArchivedThrough: t1.Add(time.Duration(p) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	// A stale write cannot move the cursor back.
	got, err := l.WriteProgress(t.Context(), Progress{Topic: topic, Partition: 2, NextOffset: 5, ArchivedThrough: t1.Add(time.Hour)})
	if err != nil || got.NextOffset != 300 {
		t.Errorf("stale write: %+v, %v", got, err)
	}
	ps, err := l.TopicProgress(t.Context(), topic)
	if err != nil || len(ps) != 3 || ps[2].NextOffset != 300 || !ps[1].ArchivedThrough.Equal(t1.Add(time.Minute)) {
		t.Fatalf("progress = %+v, %v", ps, err)
	}
	// Progress lives outside raw/, hidden from raw/**/*.parquet globs.
	want := []string{"_progress/topic=m8-suhu-kejadian/partition=0.json", "_progress/topic=m8-suhu-kejadian/partition=1.json", "_progress/topic=m8-suhu-kejadian/partition=2.json"}
	if got := listFiles(t, l); !slices.Equal(got, want) {
		t.Errorf("files = %v, want %v", got, want)
	}
	if ProgressPath("/lake", topic, 1) != filepath.FromSlash("/lake/"+want[1]) {
		t.Errorf("ProgressPath = %s", ProgressPath("/lake", topic, 1))
	}
}

func TestPanesRoundTrip(t *testing.T) { forEachStore(t, testPanesRoundTrip) }

func testPanesRoundTrip(t *testing.T, opts Options) {
	l := mustOpen(t, opts)
	w0 := time.Date(2026, 11, 7, 23, 0, 0, 0, time.UTC)
	panes := []event.Pane{
		{Stream: "suhu", Key: "sensor-02", WindowStart: w0, WindowEnd: w0.Add(time.Hour), Count: 3, Sum: 70.5, Min: 20, Max: 26, Version: 1, Timing: event.TimingOnTime, ComputedBy: event.ComputedByStream, Watermark: w0.Add(time.Hour + 5*time.Second), EmittedAt: w0.Add(time.Hour + 6*time.Second)},
		{Stream: "suhu", Key: "sensor-01", WindowStart: w0.Add(time.Hour), WindowEnd: w0.Add(2 * time.Hour), Count: 1, Sum: 21, Min: 21, Max: 21, Version: 2, Timing: event.TimingCorrection, ComputedBy: event.ComputedByBatch, EmittedAt: w0.Add(30 * time.Hour), Reason: "late events"},
	}
	files, err := l.WritePanes(t.Context(), "suhu", "recompute-1", panes)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].Path != "summaries/stream=suhu/window_date=2026-11-07/recompute-1.parquet" || files[1].Path != "summaries/stream=suhu/window_date=2026-11-08/recompute-1.parquet" {
		t.Errorf("files = %+v", files)
	}
	pf := openParquet(t, l, files[0].Path)
	for _, e := range pf.Metadata().Schema[1:] {
		if _, ts := e.LogicalType.Value.(*format.TimestampType); ts && !isMicrosUTC(e.LogicalType) {
			t.Errorf("%s is not TIMESTAMP(MICROS, UTC)", e.Name)
		}
	}
	got, err := l.ReadPanes(t.Context(), "suhu", w0, w0.Add(48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("read %d panes", len(got))
	}
	for i := range got {
		g, w := got[i], panes[i]
		if g.Key != w.Key || !g.WindowStart.Equal(w.WindowStart) || !g.Watermark.Equal(w.Watermark) || g.Watermark.IsZero() != w.Watermark.IsZero() || g.Timing != w.Timing || g.Sum != w.Sum || g.Reason != w.Reason {
			t.Errorf("pane %d = %+v, want %+v", i, g, w)
		}
	}
	if _, err := l.WritePanes(t.Context(), "suhu", "../x", panes); !errors.Is(err, ErrBadName) {
		t.Errorf("bad name: %v", err)
	}
	if _, err := l.WritePanes(t.Context(), "payments", "x", panes); !errors.Is(err, ErrBadQuery) {
		t.Errorf("wrong stream: %v", err)
	}
}

// isMicrosUTC reports whether lt is TIMESTAMP(MICROS, isAdjustedToUTC=true).
func isMicrosUTC(lt format.LogicalType) bool {
	ts, ok := lt.Value.(*format.TimestampType)
	if !ok || !ts.IsAdjustedToUTC {
		return false
	}
	_, micros := ts.Unit.Value.(*format.MicroSeconds)
	return micros
}

func TestParseUUID(t *testing.T) {
	u, ok := parseUUID([]byte("a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d"))
	want := [16]byte{0xa3, 0xf8, 0xe1, 0xd2, 0x7b, 0x4c, 0x4e, 0x2a, 0x9c, 0x1d, 0x5e, 0x6f, 0x7a, 0x8b, 0x9c, 0x0d}
	if !ok || u != want {
		t.Errorf("parseUUID = %x, %v", u, ok)
	}
	for _, bad := range []string{"a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0", "A3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d", "a3f8e1d2x7b4c-4e2a-9c1d-5e6f7a8b9c0d", "g3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d"} {
		if _, ok := parseUUID([]byte(bad)); ok {
			t.Errorf("parseUUID(%q) ok", bad)
		}
	}
}

// TestForeignFileFallsBackToHash: a file that does not declare the raw sort
// order (dropped in by another tool) still gets exact deduplication, by a
// hash set for its hour; Scan delivers merged hours in sort order.
func TestForeignFileFallsBackToHash(t *testing.T) { forEachStore(t, testForeignFileFallsBackToHash) }

func testForeignFileFallsBackToHash(t *testing.T, opts Options) {
	l := mustOpen(t, opts)
	rows := genRows(600, 1, 5, 0, 0, 21)
	if _, err := l.WriteRaw(t.Context(), topic, 0, 0, 399, rows[:400]); err != nil {
		t.Fatal(err)
	}
	foreign := slices.Clone(rows[300:]) // 300..399 repeat the first file
	slices.Reverse(foreign)
	key := storage.JoinKey(rawHourKey(topic, testStart), "other-tool.parquet")
	var buf bytes.Buffer
	if err := parquet.Write(&buf, foreign); err != nil {
		t.Fatal(err)
	}
	putFile(t, l, key, buf.Bytes())
	aggs, st, err := l.Aggregate(context.Background(), Query{Topic: topic, From: testStart, To: testStart.Add(time.Hour)}, 20*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if st.HashDedupedHours != 1 || st.Rows != 600 || st.Duplicates != 100 {
		t.Errorf("stats = %+v", st)
	}
	checkAggs(t, aggs, rows, 20*time.Minute)

	// Sorted files only: Scan merges them in file order.
	if err := l.store.Remove(context.Background(), rawHourKey(topic, testStart), []string{"other-tool.parquet"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.WriteRaw(t.Context(), topic, 0, 400, 599, rows[400:]); err != nil {
		t.Fatal(err)
	}
	var got []RawRow
	if _, err := l.Scan(context.Background(), Query{Topic: topic, From: testStart, To: testStart.Add(time.Hour)}, ColAll, func(r *RawRow) error {
		got = append(got, *r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(rows)
	slices.SortFunc(want, func(a, b RawRow) int { return compareRaw(&a, &b) })
	if !slices.Equal(got, want) {
		t.Errorf("Scan delivered %d rows not in merged file order", len(got))
	}
}

// TestRawHours: the event hours holding raw files, limited to the range.
func TestRawHours(t *testing.T) { forEachStore(t, testRawHours) }

func testRawHours(t *testing.T, opts Options) {
	l := mustOpen(t, opts)
	ctx := context.Background()
	if hs, err := l.RawHours(ctx, topic, testStart, testStart.Add(48*time.Hour)); err != nil || len(hs) != 0 {
		t.Fatalf("empty lake: %v, %v", hs, err)
	}
	rows := genRows(300, 3, 2, 0, 0, 34) // hours 00, 01, 02
	late := genRows(10, 1, 1, 0, 300, 35)
	for i := range late {
		late[i].OccurredAt += 26 * microsPerHour // 2026-11-08T02
	}
	if _, err := l.WriteRaw(ctx, topic, 0, 0, 309, append(rows, late...)); err != nil {
		t.Fatal(err)
	}
	hs, err := l.RawHours(ctx, topic, testStart.Add(90*time.Minute), testStart.Add(27*time.Hour))
	want := []time.Time{testStart.Add(time.Hour), testStart.Add(2 * time.Hour), testStart.Add(26 * time.Hour)}
	if err != nil || !slices.EqualFunc(hs, want, time.Time.Equal) {
		t.Errorf("RawHours = %v, %v; want %v", hs, err, want)
	}
	if _, err := l.RawHours(ctx, "../x", testStart, testStart.Add(time.Hour)); !errors.Is(err, ErrBadName) {
		t.Errorf("bad topic: %v", err)
	}
}
