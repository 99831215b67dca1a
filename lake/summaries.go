package lake

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"reckon/internal/event"
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
	if err := ValidateName(stream); err != nil {
		return nil, err
	}
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	rows := make([]SummaryRow, 0, len(panes))
	for i, p := range panes {
		if p.Stream != stream {
			return nil, fmt.Errorf("%w: %s row %d is of stream %q, not %q", ErrBadQuery, table, i, p.Stream, stream)
		}
		rows = append(rows, SummaryRowOf(p))
	}
	slices.SortFunc(rows, func(a, b SummaryRow) int {
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
	})
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
		size, err := l.store.put(ctx, joinKey(dir, file), func(out io.Writer) error {
			w := parquet.NewGenericWriter[SummaryRow](out, l.writerOptions(summarySorting...)...)
			if _, err := w.Write(part); err != nil {
				return err
			}
			return w.Close()
		})
		if err != nil {
			return files, err
		}
		files = append(files, FileInfo{Path: joinKey(dir, file), Rows: int64(len(part)), Bytes: size})
		lo = hi
	}
	return files, nil
}

// readPaneTable returns every row of stream in table whose window_start
// lies in [from, to), file by file.
func (l *Lake) readPaneTable(ctx context.Context, table, stream string, from, to time.Time) ([]event.Pane, error) {
	if err := ValidateName(stream); err != nil {
		return nil, err
	}
	base := table + "/stream=" + stream
	days, err := l.store.list(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("lake: %s: %w", table, err)
	}
	fromUS, toUS := from.UnixMicro(), to.UnixMicro()
	var out []event.Pane
	for _, d := range days {
		day, ok := parseDateDir("window_date", d.name)
		if !ok || !d.dir || day.UnixMicro() >= toUS || day.UnixMicro()+microsPerDay <= fromUS {
			continue
		}
		dir := joinKey(base, d.name)
		files, err := l.lakeFiles(ctx, dir)
		if err != nil {
			return nil, fmt.Errorf("lake: %s: %w", table, err)
		}
		for _, f := range files {
			rows, err := readRows[SummaryRow](ctx, l, joinKey(dir, f.name), f.size)
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
	}
	return out, nil
}

// readRows reads every row of the parquet file key as T.
func readRows[T any](ctx context.Context, l *Lake, key string, size int64) (_ []T, err error) {
	defer DecodePanic(key, &err)
	f, err := l.store.open(ctx, key, size)
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
