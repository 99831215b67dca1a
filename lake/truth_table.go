package lake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"time"

	"reckon/internal/event"
	"reckon/lake/storage"
)

// Tables of the batch truth (docs/adr/0008-batch-truth.md).
const (
	// TruthDir holds what the batch recompute computed for every window it
	// checked: truth/stream=<s>/window_date=YYYY-MM-DD/<name>.parquet, in
	// the summaries schema. Version is the version that carries the truth
	// on the summaries topic (the latest when it already matched, the
	// correction's otherwise); Timing is "truth"; Reason says matched,
	// corrected or why. summaries/ stays the history of what was published.
	TruthDir = "truth"
	// ReportsDir holds the price-of-speed reports as JSON:
	// reports/<kind>/<name>.json.
	ReportsDir = "reports"
)

// TruthDateDir is the directory of stream's truth rows for the UTC window
// date holding t.
func TruthDateDir(root, stream string, t time.Time) string {
	return localPath(root, paneDateKey(TruthDir, stream, t))
}

// WriteTruth writes panes of stream to the truth table, one file
// <name>.parquet per UTC window date, rows sorted by key, window_start,
// version. Writing the same name again replaces the files, so a retried
// recompute is idempotent. Every pane must belong to stream.
func (l *Lake) WriteTruth(ctx context.Context, stream, name string, panes []event.Pane) ([]FileInfo, error) {
	return l.writePaneTable(ctx, TruthDir, stream, name, panes)
}

// WriteTruthRows is WriteTruth for rows already in the table's schema
// (stream's, Timing "truth"), which a recompute builds without a Pane
// each. Rows in file order are written as they are; others are sorted in
// place.
func (l *Lake) WriteTruthRows(ctx context.Context, stream, name string, rows []SummaryRow) ([]FileInfo, error) {
	return l.writeSummaryRows(ctx, TruthDir, stream, name, rows)
}

// MergeTruthRows is WriteTruthRows into files that grow: the rows the
// file <name>.parquet of each window date already holds are kept, except
// those of a (key, window_start) that rows carry again, which rows
// replace. The finalizer adds each step's windows to its hour's file this
// way, so a day holds a file per hour, not per step, and a retried step
// writes the same file again.
func (l *Lake) MergeTruthRows(ctx context.Context, stream, name string, rows []SummaryRow) ([]FileInfo, error) {
	if err := errors.Join(ValidateName(stream), ValidateName(name)); err != nil {
		return nil, err
	}
	type cell struct {
		key   string
		start int64
	}
	fresh := make(map[cell]bool, len(rows))
	days := map[int64]bool{}
	for i := range rows {
		fresh[cell{rows[i].Key, rows[i].WindowStart}] = true
		days[floorDiv(rows[i].WindowStart, microsPerDay)] = true
	}
	merged := slices.Clip(rows)
	for day := range days {
		key := storage.JoinKey(paneDateKey(TruthDir, stream, time.UnixMicro(day*microsPerDay)), name+".parquet")
		old, err := readSummaryRows(ctx, l, key, -1)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("lake: merge truth rows into %s: %w", key, err)
		}
		for _, r := range old {
			if !fresh[cell{r.Key, r.WindowStart}] {
				merged = append(merged, r)
			}
		}
	}
	return l.writeSummaryRows(ctx, TruthDir, stream, name, merged)
}

// ReadTruth returns every truth row of stream whose window_start lies in
// [from, to), file by file.
func (l *Lake) ReadTruth(ctx context.Context, stream string, from, to time.Time) ([]event.Pane, error) {
	return l.readPaneTable(ctx, TruthDir, stream, from, to)
}

func reportKey(kind, name string) string { return ReportsDir + "/" + kind + "/" + name + ".json" }

// ReportPath is the file of report name of kind (e.g. "reconcile",
// "2026-11-07") in a lake at the local directory root.
func ReportPath(root, kind, name string) string {
	return localPath(root, reportKey(kind, name))
}

// WriteReport writes data (JSON) atomically as reports/<kind>/<name>.json,
// replacing an earlier report of the same name, and returns its path
// relative to the lake root.
func (l *Lake) WriteReport(ctx context.Context, kind, name string, data []byte) (string, error) {
	if err := errors.Join(ValidateName(kind), ValidateName(name)); err != nil {
		return "", err
	}
	key := reportKey(kind, name)
	if _, err := l.store.Put(ctx, key, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}); err != nil {
		return "", err
	}
	return key, nil
}

// ReadReport reads reports/<kind>/<name>.json.
func (l *Lake) ReadReport(ctx context.Context, kind, name string) ([]byte, error) {
	if err := errors.Join(ValidateName(kind), ValidateName(name)); err != nil {
		return nil, err
	}
	return l.store.ReadFile(ctx, reportKey(kind, name))
}
