package lake

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"reckon/internal/event"
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
	return filepath.Join(root, TruthDir, "stream="+stream, "window_date="+t.UTC().Format(time.DateOnly))
}

// WriteTruth writes panes of stream to the truth table, one file
// <name>.parquet per UTC window date, rows sorted by key, window_start,
// version. Writing the same name again replaces the files, so a retried
// recompute is idempotent. Every pane must belong to stream.
func (l *Lake) WriteTruth(stream, name string, panes []event.Pane) ([]FileInfo, error) {
	if err := ValidateName(stream); err != nil {
		return nil, err
	}
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	const usPerDay = int64(24 * time.Hour / time.Microsecond)
	day := func(us int64) int64 {
		d := us / usPerDay
		if us%usPerDay < 0 {
			d--
		}
		return d
	}
	rows := make([]SummaryRow, 0, len(panes))
	for i, p := range panes {
		if p.Stream != stream {
			return nil, fmt.Errorf("%w: truth row %d is of stream %q, not %q", ErrBadQuery, i, p.Stream, stream)
		}
		rows = append(rows, SummaryRowOf(p))
	}
	slices.SortFunc(rows, func(a, b SummaryRow) int {
		if c := cmpInt64(day(a.WindowStart), day(b.WindowStart)); c != 0 {
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
		d := day(rows[lo].WindowStart)
		hi := lo + 1
		for hi < len(rows) && day(rows[hi].WindowStart) == d {
			hi++
		}
		dir := TruthDateDir(l.opts.Root, stream, time.UnixMicro(d*usPerDay))
		part := rows[lo:hi]
		size, err := writeAtomic(dir, file, func(out io.Writer) error {
			w := parquet.NewGenericWriter[SummaryRow](out, l.writerOptions(summarySorting...)...)
			if _, err := w.Write(part); err != nil {
				return err
			}
			return w.Close()
		})
		if err != nil {
			return files, err
		}
		files = append(files, FileInfo{Path: l.rel(filepath.Join(dir, file)), Rows: int64(len(part)), Bytes: size})
		lo = hi
	}
	return files, nil
}

// ReadTruth returns every truth row of stream whose window_start lies in
// [from, to), file by file.
func (l *Lake) ReadTruth(stream string, from, to time.Time) ([]event.Pane, error) {
	if err := ValidateName(stream); err != nil {
		return nil, err
	}
	base := filepath.Join(l.opts.Root, TruthDir, "stream="+stream)
	days, err := os.ReadDir(base)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lake: truth: %w", err)
	}
	fromUS, toUS := from.UnixMicro(), to.UnixMicro()
	var out []event.Pane
	for _, d := range days {
		v, ok := strings.CutPrefix(d.Name(), "window_date=")
		if !ok || !d.IsDir() {
			continue
		}
		day, err := time.Parse(time.DateOnly, v)
		if err != nil || day.UnixMicro() >= toUS || day.Add(24*time.Hour).UnixMicro() <= fromUS {
			continue
		}
		dir := filepath.Join(base, d.Name())
		files, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("lake: truth: %w", err)
		}
		for _, f := range files {
			if f.IsDir() || hidden(f.Name()) || !strings.HasSuffix(f.Name(), ".parquet") {
				continue
			}
			rows, err := parquet.ReadFile[SummaryRow](filepath.Join(dir, f.Name()))
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %v", ErrBadFile, filepath.Join(dir, f.Name()), err)
			}
			for _, r := range rows {
				if r.WindowStart >= fromUS && r.WindowStart < toUS {
					out = append(out, r.Pane())
				}
			}
		}
	}
	return out, nil
}

// ReportPath is the file of report name of kind (e.g. "reconcile",
// "2026-11-07").
func ReportPath(root, kind, name string) string {
	return filepath.Join(root, ReportsDir, kind, name+".json")
}

// WriteReport writes data (JSON) atomically as reports/<kind>/<name>.json,
// replacing an earlier report of the same name, and returns its path
// relative to the lake root.
func (l *Lake) WriteReport(kind, name string, data []byte) (string, error) {
	if err := errors.Join(ValidateName(kind), ValidateName(name)); err != nil {
		return "", err
	}
	path := ReportPath(l.opts.Root, kind, name)
	if _, err := writeAtomic(filepath.Dir(path), filepath.Base(path), func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}); err != nil {
		return "", err
	}
	return l.rel(path), nil
}

// ReadReport reads reports/<kind>/<name>.json.
func (l *Lake) ReadReport(kind, name string) ([]byte, error) {
	if err := errors.Join(ValidateName(kind), ValidateName(name)); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(ReportPath(l.opts.Root, kind, name))
	if err != nil {
		return nil, fmt.Errorf("lake: report: %w", err)
	}
	return b, nil
}
