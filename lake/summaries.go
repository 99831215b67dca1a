package lake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"reckon/internal/event"
	"reckon/lake/storage"
)

// summarySorting declares the summaries files' row order.
var summarySorting = []parquet.SortingColumn{
	parquet.Ascending("key"),
	parquet.Ascending("window_start"),
	parquet.Ascending("version"),
}

// WritePanes archives panes of stream as
// summaries/stream=<stream>/window_date=YYYY-MM-DD/<name>.parquet, one file
// per UTC date of window_start, rows sorted by key, window_start, version.
// name identifies the writer's run (e.g. "recompute-2026-11-07T08-v3") and
// must pass ValidateName; writing the same name again replaces the files,
// so a retried activity is idempotent. Every pane must belong to stream.
func (l *Lake) WritePanes(ctx context.Context, stream, name string, panes []event.Pane) ([]FileInfo, error) {
	return l.writePaneTable(ctx, SummariesDir, stream, name, panes)
}

// ReadPanes returns every pane of stream in the summaries table whose
// window_start lies in [from, to), in file order per date. It reads whole
// files: the table is small (one row per key and window and version).
func (l *Lake) ReadPanes(ctx context.Context, stream string, from, to time.Time) ([]event.Pane, error) {
	return l.readPaneTable(ctx, SummariesDir, stream, from, to)
}

// writePaneTable writes panes of stream into table (summaries/ or truth/)
// as <table>/stream=<stream>/window_date=YYYY-MM-DD/<name>.parquet, one file
// per UTC date of window_start, rows sorted by key, window_start, version.
// Writing the same name again replaces the files.
func (l *Lake) writePaneTable(ctx context.Context, table, stream, name string, panes []event.Pane) ([]FileInfo, error) {
	rows := make([]SummaryRow, 0, len(panes))
	for _, p := range panes {
		rows = append(rows, SummaryRowOf(p))
	}
	return l.writeSummaryRows(ctx, table, stream, name, rows)
}

// compareSummaryRows orders rows as the pane tables' files hold them:
// window date (a file each), key, window_start, version.
func compareSummaryRows(a, b *SummaryRow) int {
	if c := cmpInt64(floorDiv(a.WindowStart, microsPerDay), floorDiv(b.WindowStart, microsPerDay)); c != 0 {
		return c
	}
	if c := strings.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	if c := cmpInt64(a.WindowStart, b.WindowStart); c != 0 {
		return c
	}
	return cmpInt64(a.Version, b.Version)
}

// writeSummaryRows is writePaneTable for rows already converted; rows in
// file order are written as they are (one pass checks), others are sorted
// in place.
func (l *Lake) writeSummaryRows(ctx context.Context, table, stream, name string, rows []SummaryRow) ([]FileInfo, error) {
	if err := ValidateName(stream); err != nil {
		return nil, err
	}
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	sorted := true
	for i := range rows {
		if rows[i].Stream != stream {
			return nil, fmt.Errorf("%w: %s row %d is of stream %q, not %q", ErrBadQuery, table, i, rows[i].Stream, stream)
		}
		if i > 0 && sorted && compareSummaryRows(&rows[i-1], &rows[i]) > 0 {
			sorted = false
		}
	}
	if !sorted {
		slices.SortFunc(rows, func(a, b SummaryRow) int { return compareSummaryRows(&a, &b) })
	}
	var files []FileInfo
	file := name + ".parquet"
	for lo := 0; lo < len(rows); {
		day := floorDiv(rows[lo].WindowStart, microsPerDay)
		hi := lo + 1
		for hi < len(rows) && floorDiv(rows[hi].WindowStart, microsPerDay) == day {
			hi++
		}
		dir := paneDateKey(table, stream, time.UnixMicro(day*microsPerDay))
		part := rows[lo:hi]
		size, err := putRows(ctx, l, storage.JoinKey(dir, file), part, l.writerOptions(summarySorting...)...)
		if err != nil {
			return files, err
		}
		files = append(files, FileInfo{Path: storage.JoinKey(dir, file), Rows: int64(len(part)), Bytes: size})
		lo = hi
	}
	return files, nil
}

// readPaneTable returns every row of stream in table whose window_start
// lies in [from, to), file by file.
func (l *Lake) readPaneTable(ctx context.Context, table, stream string, from, to time.Time) ([]event.Pane, error) {
	files, err := l.paneTableFiles(ctx, table, stream, from, to)
	if err != nil {
		return nil, err
	}
	fromUS, toUS := from.UnixMicro(), to.UnixMicro()
	var out []event.Pane
	for _, f := range files {
		rows, err := readSummaryRows(ctx, l, f.key, f.size)
		if err != nil {
			return nil, err
		}
		out = slices.Grow(out, len(rows))
		for _, r := range rows {
			if r.WindowStart >= fromUS && r.WindowStart < toUS {
				out = append(out, r.Pane())
			}
		}
	}
	return out, nil
}

// tableFile is one file of a table partitioned by date: its key and size,
// its name and partition date (UTC midnight).
type tableFile struct {
	key  string
	size int64
	name string
	day  time.Time
}

// paneTableFiles lists the files of stream in table (a pane table or a
// curated one) whose window dates overlap [from, to), date by date, each
// date's in name order.
func (l *Lake) paneTableFiles(ctx context.Context, table, stream string, from, to time.Time) ([]tableFile, error) {
	return l.datedFiles(ctx, table, "window_date", stream, from, to)
}

// datedFiles lists the files of stream in table, partitioned by the date
// column dateCol (window_date, event_date), whose dates overlap [from, to),
// date by date, each date's in name order.
func (l *Lake) datedFiles(ctx context.Context, table, dateCol, stream string, from, to time.Time) ([]tableFile, error) {
	if err := ValidateName(stream); err != nil {
		return nil, err
	}
	base := table + "/stream=" + stream
	days, err := l.store.List(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("lake: %s: %w", table, err)
	}
	fromUS, toUS := from.UnixMicro(), to.UnixMicro()
	var out []tableFile
	for _, d := range days {
		day, ok := parseDateDir(dateCol, d.Name)
		if !ok || !d.Dir || day.UnixMicro() >= toUS || day.UnixMicro()+microsPerDay <= fromUS {
			continue
		}
		dir := storage.JoinKey(base, d.Name)
		files, err := l.lakeFiles(ctx, dir)
		if err != nil {
			return nil, fmt.Errorf("lake: %s: %w", table, err)
		}
		for _, f := range files {
			out = append(out, tableFile{storage.JoinKey(dir, f.Name), f.Size, f.Name, day})
		}
	}
	return out, nil
}

// PaneFigures holds, column by column, what decides the latest published
// pane of a window: one element per summaries row, in ReadPanes' order.
// Strings of few distinct values come as indexes into a table of them.
type PaneFigures struct {
	// Keys are the distinct keys; Key[i] indexes it.
	Keys []string
	Key  []int32
	// ComputedBys are the distinct computed_by values; ComputedBy[i]
	// indexes it.
	ComputedBys []string
	ComputedBy  []int32
	// WindowStart and ProcessedAt are microseconds since the epoch.
	// ProcessedAt is the pane's processing clock: processed_at, or
	// emitted_at in a file written before processed_at existed (then it
	// was that clock).
	WindowStart, ProcessedAt []int64
	Version, Count           []int64
	Sum, Min, Max            []float64
}

// Len is the number of rows.
func (f *PaneFigures) Len() int { return len(f.Key) }

// paneFigureColumns are the summaries columns PaneFigures reads.
// The fourth is read as emitted_at where a file has no processed_at.
var paneFigureColumns = [...]string{"key", "computed_by", "window_start", "processed_at", "version", "count", "sum", "min", "max"}

// ReadPaneFigures is ReadPanes reduced to the columns that decide which
// pane of a window is the latest, read column by column: the rows are the
// same, in the same order, without building a Pane each.
func (l *Lake) ReadPaneFigures(ctx context.Context, stream string, from, to time.Time) (*PaneFigures, error) {
	files, err := l.paneTableFiles(ctx, SummariesDir, stream, from, to)
	if err != nil {
		return nil, err
	}
	out := &PaneFigures{}
	keys, bys := map[string]int32{}, map[string]int32{}
	intern := func(m map[string]int32, tab *[]string) func(string) int32 {
		return func(v string) int32 {
			id, ok := m[v]
			if !ok {
				id = int32(len(*tab))
				m[v] = id
				*tab = append(*tab, v)
			}
			return id
		}
	}
	internKey, internBy := intern(keys, &out.Keys), intern(bys, &out.ComputedBys)
	dicts := map[parquet.Dictionary][]int32{}
	fromUS, toUS := from.UnixMicro(), to.UnixMicro()
	for _, tf := range files {
		if err := l.readPaneFigures(ctx, tf, out, dicts, internKey, internBy, fromUS, toUS); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (l *Lake) readPaneFigures(ctx context.Context, tf tableFile, out *PaneFigures, dicts map[parquet.Dictionary][]int32, internKey, internBy func(string) int32, fromUS, toUS int64) error {
	f, pf, err := l.openParquet(ctx, tf.key, tf.size)
	if err != nil {
		return err
	}
	defer f.Close()
	var leaf [len(paneFigureColumns)]int
	for i, name := range paneFigureColumns {
		c, ok := pf.Schema().Lookup(name)
		if !ok && name == "processed_at" {
			c, ok = pf.Schema().Lookup("emitted_at")
		}
		if !ok {
			return fmt.Errorf("%w: %s has no column %q", ErrBadFile, tf.key, name)
		}
		leaf[i] = c.ColumnIndex
	}
	if n := int(pf.NumRows()); n > 0 {
		out.grow(n)
	}
	i64 := func(v []parquet.Value, i int) int64 { return v[i].Int64() }
	f64 := func(v []parquet.Value, i int) float64 { return v[i].Double() }
	for rgi, rg := range pf.RowGroups() {
		if err := ctx.Err(); err != nil {
			return err
		}
		n0 := out.Len()
		cc := rg.ColumnChunks()
		clear(dicts)
		err := errors.Join(
			readInterned(cc[leaf[0]], &out.Key, dicts, internKey),
			readInterned(cc[leaf[1]], &out.ComputedBy, dicts, internBy),
			readFixed(cc[leaf[2]], &out.WindowStart, i64, int64Data),
			readFixed(cc[leaf[3]], &out.ProcessedAt, i64, int64Data),
			readFixed(cc[leaf[4]], &out.Version, i64, int64Data),
			readFixed(cc[leaf[5]], &out.Count, i64, int64Data),
			readFixed(cc[leaf[6]], &out.Sum, f64, doubleData),
			readFixed(cc[leaf[7]], &out.Min, f64, doubleData),
			readFixed(cc[leaf[8]], &out.Max, f64, doubleData),
		)
		if err == nil {
			n := n0 + int(rg.NumRows())
			for _, l := range []int{len(out.Key), len(out.ComputedBy), len(out.WindowStart), len(out.ProcessedAt), len(out.Version), len(out.Count), len(out.Sum), len(out.Min), len(out.Max)} {
				if l != n {
					err = fmt.Errorf("a column has %d values for %d rows", l-n0, n-n0)
				}
			}
		}
		if err != nil {
			return fmt.Errorf("%w: %s row group %d: %v", ErrBadFile, tf.key, rgi, err)
		}
		out.keep(n0, func(i int) bool { return out.WindowStart[i] >= fromUS && out.WindowStart[i] < toUS })
	}
	return nil
}

// grow makes room for n more rows in every column.
func (f *PaneFigures) grow(n int) {
	f.Key, f.ComputedBy = slices.Grow(f.Key, n), slices.Grow(f.ComputedBy, n)
	f.WindowStart, f.ProcessedAt = slices.Grow(f.WindowStart, n), slices.Grow(f.ProcessedAt, n)
	f.Version, f.Count = slices.Grow(f.Version, n), slices.Grow(f.Count, n)
	f.Sum, f.Min, f.Max = slices.Grow(f.Sum, n), slices.Grow(f.Min, n), slices.Grow(f.Max, n)
}

// keep drops the rows from n0 on for which ok is false, keeping the order.
func (f *PaneFigures) keep(n0 int, ok func(i int) bool) {
	j := n0
	for i := n0; i < f.Len(); i++ {
		if !ok(i) {
			continue
		}
		if i != j {
			f.Key[j], f.ComputedBy[j], f.WindowStart[j], f.ProcessedAt[j] = f.Key[i], f.ComputedBy[i], f.WindowStart[i], f.ProcessedAt[i]
			f.Version[j], f.Count[j], f.Sum[j], f.Min[j], f.Max[j] = f.Version[i], f.Count[i], f.Sum[i], f.Min[i], f.Max[i]
		}
		j++
	}
	f.Key, f.ComputedBy, f.WindowStart, f.ProcessedAt = f.Key[:j], f.ComputedBy[:j], f.WindowStart[:j], f.ProcessedAt[:j]
	f.Version, f.Count, f.Sum, f.Min, f.Max = f.Version[:j], f.Count[:j], f.Sum[:j], f.Min[:j], f.Max[:j]
}

// readSummaryRows reads a summaries or truth file: a file written before
// processed_at existed gets emitted_at there (then that was the
// processing clock, and a batch row's is its emitted_at).
func readSummaryRows(ctx context.Context, l *Lake, key string, size int64) ([]SummaryRow, error) {
	rows, err := readRows[SummaryRow](ctx, l, key, size)
	for i := range rows {
		if rows[i].ProcessedAt == 0 {
			rows[i].ProcessedAt = rows[i].EmittedAt
		}
	}
	return rows, err
}

// readRows reads every row of the parquet file key as T.
func readRows[T any](ctx context.Context, l *Lake, key string, size int64) (_ []T, err error) {
	defer DecodePanic(key, &err)
	f, err := l.store.Open(ctx, key, size)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := parquet.Read[T](f, f.Size())
	if err != nil {
		return nil, badFile(key, err)
	}
	return rows, nil
}

// putRows writes rows as the parquet file key, atomically, and returns
// its size.
func putRows[T any](ctx context.Context, l *Lake, key string, rows []T, opts ...parquet.WriterOption) (int64, error) {
	return l.store.Put(ctx, key, func(out io.Writer) error {
		w := parquet.NewGenericWriter[T](out, opts...)
		if _, err := w.Write(rows); err != nil {
			return err
		}
		return w.Close()
	})
}
