package lake

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"reckon/lake/storage"
)

// FeatureTruthDir holds what the batch recompute computed as the true
// rolling feature of every event it checked
// (docs/adr/0038-feature-truth.md):
// feature_truth/stream=<s>/event_date=YYYY-MM-DD/<name>.parquet, the date
// of event_time (UTC), <name> the recompute's truth file name. It is a
// history: a later recompute of the same event adds a row, and the latest
// computed_at is the truth (FeatureStatusDir curates it).
const FeatureTruthDir = "feature_truth"

// FeatureTruthRow is one row of the feature_truth table: the true count
// and sum of stream's valid unique events of Key in (EventTime − SizeNS,
// EventTime], computed from the lake at ComputedAt by a recompute
// triggered by Trigger.
//
// Column order and names are the table's contract with DuckDB, Spark and
// pandas users; change them only with a migration.
type FeatureTruthRow struct {
	Stream     string  `parquet:"stream,dict"`
	Key        string  `parquet:"key,dict"`
	EventID    string  `parquet:"event_id"`
	EventTime  int64   `parquet:"event_time,timestamp(microsecond:utc)"`
	SizeNS     int64   `parquet:"size_ns"`
	Count      int64   `parquet:"count"`
	Sum        float64 `parquet:"sum"`
	ComputedAt int64   `parquet:"computed_at,timestamp(microsecond:utc)"`
	Trigger    string  `parquet:"trigger,dict"`
}

var featureTruthSorting = []parquet.SortingColumn{
	parquet.Ascending("key"),
	parquet.Ascending("event_time"),
	parquet.Ascending("event_id"),
}

func compareFeatureTruthRows(a, b *FeatureTruthRow) int {
	if c := strings.Compare(a.Stream, b.Stream); c != 0 {
		return c
	}
	if c := cmpInt64(floorDiv(a.EventTime, microsPerDay), floorDiv(b.EventTime, microsPerDay)); c != 0 {
		return c
	}
	if c := strings.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	if c := cmpInt64(a.EventTime, b.EventTime); c != 0 {
		return c
	}
	return strings.Compare(a.EventID, b.EventID)
}

// eventDateKey is the directory of stream's rows of table for the UTC
// event date day (days since the epoch).
func eventDateKey(table, stream string, day int64) string {
	return table + "/stream=" + stream + "/event_date=" + dateString(time.UnixMicro(day*microsPerDay))
}

// WriteFeatureTruth writes rows of stream to the feature_truth table, one
// file <name>.parquet per UTC date of event_time, sorted by key,
// event_time, event_id (rows are sorted in place). Writing the same name
// again replaces the files, so a retried recompute is idempotent. With
// merge, the rows each file already holds are kept, except those of an
// event_id rows carry again: the finalizer's steps of one hour share a
// file this way, as MergeTruthRows does for windows.
func (l *Lake) WriteFeatureTruth(ctx context.Context, stream, name string, rows []FeatureTruthRow,
	merge bool) ([]FileInfo, error) {
	if err := errors.Join(ValidateName(stream), ValidateName(name)); err != nil {
		return nil, err
	}
	for i := range rows {
		if rows[i].Stream != stream {
			return nil, fmt.Errorf("%w: feature truth row %d of stream %q, not %q", ErrBadQuery, i, rows[i].Stream, stream)
		}
	}
	file := name + ".parquet"
	if merge {
		fresh := make(map[string]bool, len(rows))
		days := map[int64]bool{}
		for i := range rows {
			fresh[rows[i].EventID] = true
			days[floorDiv(rows[i].EventTime, microsPerDay)] = true
		}
		for day := range days {
			key := storage.JoinKey(eventDateKey(FeatureTruthDir, stream, day), file)
			old, err := readRows[FeatureTruthRow](ctx, l, key, -1)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("lake: merge feature truth into %s: %w", key, err)
			}
			for _, r := range old {
				if !fresh[r.EventID] {
					rows = append(rows, r)
				}
			}
		}
	}
	slices.SortFunc(rows, func(a, b FeatureTruthRow) int { return compareFeatureTruthRows(&a, &b) })
	var files []FileInfo
	for lo := 0; lo < len(rows); {
		day := floorDiv(rows[lo].EventTime, microsPerDay)
		hi := lo + 1
		for hi < len(rows) && floorDiv(rows[hi].EventTime, microsPerDay) == day {
			hi++
		}
		key := storage.JoinKey(eventDateKey(FeatureTruthDir, stream, day), file)
		part := rows[lo:hi]
		size, err := putRows(ctx, l, key, part, l.writerOptions(featureTruthSorting...)...)
		if err != nil {
			return files, err
		}
		files = append(files, FileInfo{Path: key, Rows: int64(len(part)), Bytes: size})
		lo = hi
	}
	return files, nil
}

// ReadFeatureTruth returns every row of stream in the feature_truth table
// whose event_time lies in [from, to), file by file.
func (l *Lake) ReadFeatureTruth(ctx context.Context, stream string, from, to time.Time) ([]FeatureTruthRow, error) {
	return readEventDateTable(ctx, l, FeatureTruthDir, stream, from, to,
		func(r *FeatureTruthRow) int64 { return r.EventTime })
}

func readEventDateTable[T any](ctx context.Context, l *Lake, table, stream string, from, to time.Time,
	et func(*T) int64) ([]T, error) {
	files, err := l.datedFiles(ctx, table, "event_date", stream, from, to)
	if err != nil {
		return nil, err
	}
	fromUS, toUS := from.UnixMicro(), to.UnixMicro()
	var out []T
	for _, f := range files {
		rows, err := readRows[T](ctx, l, f.key, f.size)
		if err != nil {
			return nil, err
		}
		for i := range rows {
			if t := et(&rows[i]); t >= fromUS && t < toUS {
				out = append(out, rows[i])
			}
		}
	}
	return out, nil
}
