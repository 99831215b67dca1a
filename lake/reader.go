package lake

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"reckon/internal/event"
)

// Query selects raw rows of one topic.
type Query struct {
	// Topic is the raw table's topic. Required.
	Topic string
	// From and To bound event time (occurred_at) as [From, To). Both are
	// required.
	From, To time.Time
	// Keys keeps only these keys; empty keeps all.
	Keys []string
	// EventTypes keeps only these event types; empty keeps all.
	EventTypes []string
}

// Validate reports every problem with q at once.
func (q Query) Validate() error {
	var errs []error
	if err := ValidateTopic(q.Topic); err != nil {
		errs = append(errs, err)
	}
	if q.From.IsZero() || q.To.IsZero() {
		errs = append(errs, fmt.Errorf("%w: from and to are required", ErrBadQuery))
	} else if !q.From.Before(q.To) {
		errs = append(errs,
			fmt.Errorf("%w: from %s is not before to %s", ErrBadQuery, q.From.UTC().Format(time.RFC3339),
				q.To.UTC().Format(time.RFC3339)))
	}
	return errors.Join(errs...)
}

// Columns is a set of raw table columns to read (a projection).
type Columns uint16

// Raw table columns.
const (
	ColEventID Columns = 1 << iota
	ColEventType
	ColOccurredAt
	ColIngestedAt
	ColKey
	ColValue
	ColData
	ColKafkaPartition
	ColKafkaOffset

	// ColAll is every column.
	ColAll = ColEventID | ColEventType | ColOccurredAt | ColIngestedAt | ColKey | ColValue | ColData | ColKafkaPartition | ColKafkaOffset
)

// columnNames maps each column bit (by position) to its name.
var columnNames = [...]string{"event_id", "event_type", "occurred_at", "ingested_at", "key", "value", "data",
	"kafka_partition", "kafka_offset"}

// ScanStats says how much a scan read and how much pruning saved.
type ScanStats struct {
	HourDirs         int   // event_hour directories overlapping the range
	Files            int   // files opened
	RowGroups        int   // row groups decoded
	RowGroupsPruned  int   // row groups skipped by their statistics
	RowsRead         int64 // rows decoded
	Rows             int64 // rows delivered (in range, filtered, deduplicated)
	Duplicates       int64 // rows dropped as repeated event_ids
	HashDedupedHours int   // hours with a file not in raw sort order: deduplicated with a hash set
}

// Scan calls fn for every raw row of q, each event_id once, with the
// columns in cols filled (others are zero). Rows come hour by hour, each
// hour in the raw sort order (key, occurred_at, event_id) merged across
// its files. fn must not keep r: it is reused.
//
// Pruning: only event_hour directories overlapping [From, To) are listed,
// and row groups whose occurred_at, key or event_type statistics exclude the
// query are not decoded. Deduplication needs event_id, key and occurred_at,
// which are read whatever cols says. Duplicates of an event share its event
// time and so its hour directory; the hour's files are merged in sort
// order, which makes them adjacent.
func (l *Lake) Scan(ctx context.Context, q Query, cols Columns, fn func(r *RawRow) error) (ScanStats, error) {
	var row RawRow
	s, err := l.newScanner(q, cols)
	if err != nil {
		return ScanStats{}, err
	}
	err = s.run(ctx, func(b *rgData, i int) error {
		b.fill(&row, i, s)
		return fn(&row)
	})
	return s.stats, err
}

// RowView is one row of a ScanRows scan, read in place from the decoded
// columns: nothing is copied or converted until asked for. It is valid only
// during the callback that received it.
type RowView struct {
	s *scanner
	b *rgData
	i int
}

// KeyID is the row's key as a small integer, the same for the same key
// throughout one scan (and only one): Key returns the string.
func (r *RowView) KeyID() int32 { return r.b.key[r.i] }

// Key is the row's key.
func (r *RowView) Key() string { return r.s.keys[r.b.key[r.i]] }

// OccurredAt is the row's event time, microseconds since the epoch.
func (r *RowView) OccurredAt() int64 { return r.b.occ[r.i] }

// IngestedAt is the row's ingest time, microseconds since the epoch; zero
// unless the scan reads ColIngestedAt.
func (r *RowView) IngestedAt() int64 {
	if r.s.cols&ColIngestedAt == 0 {
		return 0
	}
	return r.b.ing[r.i]
}

// Value is the row's value; zero unless the scan reads ColValue.
func (r *RowView) Value() float64 {
	if r.s.cols&ColValue == 0 {
		return 0
	}
	return r.b.val[r.i]
}

// EventUUID decodes the row's event_id as a lowercase canonical UUID (the
// only form the gate admits); ok is false for any other text.
func (r *RowView) EventUUID() (id [16]byte, ok bool) { return parseUUID(r.b.id.at(r.i)) }

// ScanRows is Scan without copying each row into a RawRow: fn sees the
// row in place (RowView), keys as ids. Rows, order, deduplication and
// pruning are Scan's; cols says which of ColIngestedAt and ColValue to
// read (event_id, key and occurred_at are always read).
func (l *Lake) ScanRows(ctx context.Context, q Query, cols Columns, fn func(r *RowView) error) (ScanStats, error) {
	return l.NewRowScanner().Scan(ctx, q, cols, fn)
}

// RowScanner runs ScanRows queries one after another and keeps its decode
// buffers (a few MB a row group) from one to the next: a recompute scans
// a day hour by hour. It is not safe for concurrent use.
type RowScanner struct {
	l    *Lake
	pool []*rgData
}

// NewRowScanner returns a RowScanner of l.
func (l *Lake) NewRowScanner() *RowScanner { return &RowScanner{l: l} }

// Scan is Lake.ScanRows.
func (rs *RowScanner) Scan(ctx context.Context, q Query, cols Columns, fn func(r *RowView) error) (ScanStats, error) {
	s, err := rs.l.newScanner(q, cols)
	if err != nil {
		return ScanStats{}, err
	}
	s.pool = rs.pool
	v := RowView{s: s}
	err = s.run(ctx, func(b *rgData, i int) error {
		v.b, v.i = b, i
		return fn(&v)
	})
	rs.pool = s.pool
	return s.stats, err
}

// WindowAgg is the aggregate of one key in one window.
type WindowAgg struct {
	Key         string
	WindowStart time.Time
	WindowEnd   time.Time
	event.Agg
}

// Aggregate returns count, sum, min and max of value per key per tumbling
// window of size window (which must divide a day) over q's rows, each
// event_id counted once, sorted by key then window start. The range is
// widened to whole windows so every window returned is complete. It
// aggregates with event.Agg, the stream operator's own code.
func (l *Lake) Aggregate(ctx context.Context, q Query, window time.Duration) ([]WindowAgg, ScanStats, error) {
	if window <= 0 || window%time.Microsecond != 0 || (24*time.Hour)%window != 0 {
		return nil, ScanStats{}, fmt.Errorf("%w: window %v must be a positive whole number of microseconds dividing 24h",
			ErrBadQuery, window)
	}
	q.From, q.To = AlignRange(q.From, q.To, window)
	s, err := l.newScanner(q, ColKey|ColOccurredAt|ColValue)
	if err != nil {
		return nil, ScanStats{}, err
	}
	winUS := int64(window / time.Microsecond)
	type cell struct {
		key int32
		win int64
	}
	aggs := make(map[cell]*event.Agg)
	curKey, curWin := int32(-1), int64(math.MinInt64)
	var cur *event.Agg
	err = s.run(ctx, func(b *rgData, i int) error {
		k, w := b.key[i], floorDiv(b.occ[i], winUS)
		if k != curKey || w != curWin {
			c := cell{k, w}
			if cur = aggs[c]; cur == nil {
				cur = new(event.Agg)
				aggs[c] = cur
			}
			curKey, curWin = k, w
		}
		cur.Add(b.val[i])
		return nil
	})
	if err != nil {
		return nil, s.stats, err
	}
	out := make([]WindowAgg, 0, len(aggs))
	for c, a := range aggs {
		start := time.UnixMicro(c.win * winUS).UTC()
		out = append(out, WindowAgg{Key: s.keys[c.key], WindowStart: start, WindowEnd: start.Add(window), Agg: *a})
	}
	slices.SortFunc(out, func(a, b WindowAgg) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return a.WindowStart.Compare(b.WindowStart)
	})
	return out, s.stats, nil
}

// AlignRange widens [from, to) to whole windows of size window (which must
// divide a day, so windows align with UTC midnight and the epoch).
func AlignRange(from, to time.Time, window time.Duration) (time.Time, time.Time) {
	w := int64(window / time.Microsecond)
	f := floorDiv(from.UnixMicro(), w) * w
	t := -floorDiv(-to.UnixMicro(), w) * w
	return time.UnixMicro(f).UTC(), time.UnixMicro(t).UTC()
}
