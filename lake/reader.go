package lake

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

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
		errs = append(errs, fmt.Errorf("%w: from %s is not before to %s", ErrBadQuery, q.From.UTC().Format(time.RFC3339), q.To.UTC().Format(time.RFC3339)))
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
var columnNames = [...]string{"event_id", "event_type", "occurred_at", "ingested_at", "key", "value", "data", "kafka_partition", "kafka_offset"}

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
		return nil, ScanStats{}, fmt.Errorf("%w: window %v must be a positive whole number of microseconds dividing 24h", ErrBadQuery, window)
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

// scanner runs one query. Keys and event types are interned into small
// integers so the hot loop compares ints, not strings.
type scanner struct {
	lake   *Lake
	q      Query
	cols   Columns // columns decoded
	fromUS int64
	toUS   int64

	keys      []string
	keyIndex  map[string]int32
	wantKey   []bool // by key id; nil: all keys
	types     []string
	typeIndex map[string]int32
	wantType  []bool // by type id; nil: all types

	stats ScanStats
	pool  []*rgData // decode buffers of closed cursors, reused
	seen  idSet
	// prevID holds the previous delivered row's event_id across row group
	// boundaries for adjacent deduplication.
	prevID  []byte
	prevKey int32
	prevOcc int64
}

func (l *Lake) newScanner(q Query, cols Columns) (*scanner, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	s := &scanner{
		lake: l, q: q,
		cols:     cols | ColEventID | ColKey | ColOccurredAt,
		fromUS:   q.From.UnixMicro(),
		toUS:     q.To.UnixMicro(),
		keyIndex: make(map[string]int32), typeIndex: make(map[string]int32),
	}
	if len(q.Keys) > 0 {
		for _, k := range q.Keys {
			s.internKey(k)
		}
		s.wantKey = make([]bool, len(s.keys))
		for i := range s.wantKey {
			s.wantKey[i] = true
		}
	}
	if len(q.EventTypes) > 0 {
		s.cols |= ColEventType
		for _, t := range q.EventTypes {
			s.internType(t)
		}
		s.wantType = make([]bool, len(s.types))
		for i := range s.wantType {
			s.wantType[i] = true
		}
	}
	return s, nil
}

func (s *scanner) internKey(k string) int32 {
	if id, ok := s.keyIndex[k]; ok {
		return id
	}
	id := int32(len(s.keys))
	s.keys = append(s.keys, k)
	s.keyIndex[k] = id
	if s.wantKey != nil {
		s.wantKey = append(s.wantKey, false)
	}
	return id
}

func (s *scanner) internType(t string) int32 {
	if id, ok := s.typeIndex[t]; ok {
		return id
	}
	id := int32(len(s.types))
	s.types = append(s.types, t)
	s.typeIndex[t] = id
	if s.wantType != nil {
		s.wantType = append(s.wantType, false)
	}
	return id
}

// hourDir is one event_hour directory of the range.
type hourDir struct {
	start time.Time
	key   string
}

// hourDirs lists the topic's event_hour directories overlapping the range,
// in time order. Only date directories in range are listed.
func (s *scanner) hourDirs(ctx context.Context) ([]hourDir, error) {
	return s.lake.rawHourDirs(ctx, s.q.Topic, s.fromUS, s.toUS)
}

// rawHourDirs lists topic's event_hour directories overlapping
// [fromUS, toUS), in time order: one listing of the topic's dates and one
// per date in range.
func (l *Lake) rawHourDirs(ctx context.Context, topic string, fromUS, toUS int64) ([]hourDir, error) {
	base := RawDir + "/topic=" + topic
	days, err := l.store.list(ctx, base)
	if err != nil {
		return nil, err
	}
	var out []hourDir
	for _, d := range days {
		day, ok := parseDateDir("event_date", d.name)
		if !ok || !d.dir {
			continue
		}
		if dUS := day.UnixMicro(); dUS >= toUS || dUS+microsPerDay <= fromUS {
			continue
		}
		hours, err := l.store.list(ctx, joinKey(base, d.name))
		if err != nil {
			return nil, err
		}
		for _, h := range hours {
			hh, ok := parseHourDir(h.name)
			if !ok || !h.dir {
				continue
			}
			start := day.Add(time.Duration(hh) * time.Hour)
			if sUS := start.UnixMicro(); sUS >= toUS || sUS+microsPerHour <= fromUS {
				continue
			}
			out = append(out, hourDir{start, joinKey(base, d.name, h.name)})
		}
	}
	slices.SortFunc(out, func(a, b hourDir) int { return a.start.Compare(b.start) })
	return out, nil
}

// RawHours returns the start of every UTC hour in [from, to) for which the
// raw table of topic has an event_hour directory, in time order. An hour
// listed may hold no rows of the range (its files may start after from or
// be filtered by a query); an hour not listed holds none.
func (l *Lake) RawHours(ctx context.Context, topic string, from, to time.Time) ([]time.Time, error) {
	if err := ValidateTopic(topic); err != nil {
		return nil, err
	}
	hs, err := l.rawHourDirs(ctx, topic, from.UnixMicro(), to.UnixMicro())
	if err != nil {
		return nil, err
	}
	out := make([]time.Time, len(hs))
	for i, h := range hs {
		out[i] = h.start
	}
	return out, nil
}

// lakeFiles lists the visible .parquet files of dir in name order.
func (l *Lake) lakeFiles(ctx context.Context, dir string) ([]entry, error) {
	es, err := l.store.list(ctx, dir)
	if err != nil {
		return nil, err
	}
	out := es[:0]
	for _, e := range es {
		if !e.dir && !hidden(e.name) && strings.HasSuffix(e.name, ".parquet") {
			out = append(out, e)
		}
	}
	return out, nil
}

// openParquet opens key as a parquet file, reading its footer only. size
// is the file's size from a listing, or -1.
func (l *Lake) openParquet(ctx context.Context, key string, size int64) (objectReader, *parquet.File, error) {
	f, err := l.store.open(ctx, key, size)
	if err != nil {
		return nil, nil, err
	}
	// parquet-go allocates the footer length the file claims before
	// reading it; a corrupt file must not make that gigabytes.
	var tail [8]byte
	if f.Size() < 12 {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %s: %d bytes is too small for parquet", ErrBadFile, key, f.Size())
	}
	if _, err := f.ReadAt(tail[:], f.Size()-8); err != nil {
		f.Close()
		return nil, nil, badFile(key, err)
	}
	if n := int64(binary.LittleEndian.Uint32(tail[:4])); n > f.Size()-12 {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %s: footer length %d exceeds the file's %d bytes", ErrBadFile, key, n, f.Size())
	}
	opts := []parquet.FileOption{parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true)}
	if l.store.remote() {
		// The footer's magic is still checked; the header's would cost a
		// request of its own.
		opts = append(opts, parquet.SkipMagicBytes(true))
	}
	var pf *parquet.File
	if err := openFile(key, func() (err error) { pf, err = parquet.OpenFile(f, f.Size(), opts...); return err }); err != nil {
		f.Close()
		if errors.Is(err, ErrBadFile) {
			return nil, nil, err
		}
		return nil, nil, badFile(key, err)
	}
	return f, pf, nil
}

// run visits every selected, deduplicated row, hour by hour.
func (s *scanner) run(ctx context.Context, visit func(b *rgData, i int) error) error {
	hours, err := s.hourDirs(ctx)
	if err != nil {
		return err
	}
	s.stats.HourDirs = len(hours)
	for _, h := range hours {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.scanHour(ctx, h.key, visit); err != nil {
			return err
		}
	}
	return nil
}

// scanHour visits the rows of one hour directory. Every file is sorted by
// key, occurred_at, event_id, so a k-way merge of the files yields the hour
// in that order, where all copies of an event are adjacent: deduplication
// compares each row with the previous one and needs no hash set. A file
// that does not declare that order (not written by reckon) switches the
// hour to a hash set of event_ids.
//
// A file listed but gone when opened was replaced by a compaction, whose
// outputs are durable before it deletes its inputs
// (docs/adr/0018-continuous-compaction.md): the hour is listed and opened
// again. No row of the hour has been delivered by then.
func (s *scanner) scanHour(ctx context.Context, dir string, visit func(b *rgData, i int) error) error {
	var cursors []*fileCursor
	defer func() {
		for _, c := range cursors {
			c.close()
		}
	}()
	sorted := true
	for attempt := 0; ; attempt++ {
		var err error
		cursors, sorted, err = s.openHour(ctx, dir)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || attempt == 4 {
			return err
		}
	}
	s.prevKey, s.prevOcc, s.prevID = -1, math.MinInt64, s.prevID[:0]
	sorted = sorted && !hashDedupForBench
	if !sorted {
		s.stats.HashDedupedHours++
		s.seen.reset()
	}
	emit := func(c *fileCursor) error {
		b, i := c.b, c.i
		k, occ, id := b.key[i], b.occ[i], b.id.at(i)
		if sorted {
			if k == s.prevKey && occ == s.prevOcc && bytes.Equal(id, s.prevID) {
				s.stats.Duplicates++
				return nil
			}
			s.prevKey, s.prevOcc = k, occ
			s.prevID = append(s.prevID[:0], id...)
		} else if !s.seen.add(id) {
			s.stats.Duplicates++
			return nil
		}
		s.stats.Rows++
		return visit(b, i)
	}

	// Fast path: one file (or an unsorted hour) needs no merge.
	if len(cursors) == 1 || !sorted {
		for _, c := range cursors {
			for {
				ok, err := c.next(ctx)
				if err != nil || !ok {
					if err != nil {
						return err
					}
					break
				}
				if err := emit(c); err != nil {
					return err
				}
			}
		}
		return nil
	}

	h := &cursorHeap{s: s}
	for _, c := range cursors {
		ok, err := c.next(ctx)
		if err != nil {
			return err
		}
		if ok {
			h.c = append(h.c, c)
		}
	}
	heap.Init(h)
	for len(h.c) > 0 {
		c := h.c[0]
		if err := emit(c); err != nil {
			return err
		}
		ok, err := c.next(ctx)
		if err != nil {
			return err
		}
		if ok {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
	}
	return nil
}

// openHour lists dir and opens a cursor on each of its files; on an error
// it closes the ones it opened.
func (s *scanner) openHour(ctx context.Context, dir string) ([]*fileCursor, bool, error) {
	files, err := s.lake.lakeFiles(ctx, dir)
	if err != nil {
		return nil, false, err
	}
	cursors := make([]*fileCursor, 0, len(files))
	sorted := true
	for _, f := range files {
		c, err := s.openCursor(ctx, joinKey(dir, f.name), f.size)
		if err != nil {
			for _, c := range cursors {
				c.close()
			}
			return nil, false, err
		}
		cursors = append(cursors, c)
		sorted = sorted && c.sorted
	}
	return cursors, sorted, nil
}

// hashDedupForBench makes every hour use the hash set, so a benchmark can
// compare it with the merge on the same files (ADR 0003).
var hashDedupForBench = false

// fileCursor walks the selected rows of one file, one decoded row group at
// a time.
type fileCursor struct {
	s      *scanner
	path   string
	f      objectReader
	pf     *parquet.File
	cols   fileColumns
	sorted bool // the file declares the raw sort order
	rg     int  // next row group to decode
	b      *rgData
	i      int // current row in b; -1 before the first
}

func (s *scanner) openCursor(ctx context.Context, key string, size int64) (*fileCursor, error) {
	f, pf, err := s.lake.openParquet(ctx, key, size)
	if err != nil {
		return nil, err
	}
	cols, err := s.resolveColumns(pf, key)
	if err != nil {
		f.Close()
		return nil, err
	}
	s.stats.Files++
	c := &fileCursor{s: s, path: key, f: f, pf: pf, cols: cols, sorted: declaresRawOrder(pf), i: -1}
	if len(s.pool) > 0 {
		c.b, s.pool = s.pool[len(s.pool)-1], s.pool[:len(s.pool)-1]
	} else {
		c.b = new(rgData)
	}
	c.b.n = 0
	return c, nil
}

func (c *fileCursor) close() {
	if c.f != nil {
		c.f.Close()
		c.f = nil
		c.s.pool = append(c.s.pool, c.b)
	}
}

// prefetch asks a remote file for the column chunks of row group rgi that
// decode reads, so they arrive in a few ranged GETs instead of one per
// buffer refill; chunks of other columns and pruned row groups are never
// fetched.
func (c *fileCursor) prefetch(rgi int) error {
	p, ok := c.f.(prefetcher)
	if !ok {
		return nil
	}
	cc := c.pf.Metadata().RowGroups[rgi].Columns
	var rs []byteRange
	for i := range columnNames {
		if c.s.cols&(1<<i) == 0 || c.cols[i] < 0 {
			continue
		}
		md := &cc[c.cols[i]].MetaData
		off := md.DataPageOffset
		if md.DictionaryPageOffset > 0 && md.DictionaryPageOffset < off {
			off = md.DictionaryPageOffset
		}
		rs = append(rs, byteRange{off, md.TotalCompressedSize})
	}
	return p.prefetch(rs)
}

// next moves to the next row that passes the query's filters, decoding
// (and pruning) row groups as needed; false at the end of the file.
func (c *fileCursor) next(ctx context.Context) (bool, error) {
	s := c.s
	for {
		b := c.b
		for c.i++; c.i < b.n; c.i++ {
			i := c.i
			if occ := b.occ[i]; occ < s.fromUS || occ >= s.toUS {
				continue
			}
			if s.wantKey != nil && !s.wantKey[b.key[i]] {
				continue
			}
			if s.wantType != nil && !s.wantType[b.typ[i]] {
				continue
			}
			return true, nil
		}
		if c.rg >= len(c.pf.RowGroups()) {
			return false, nil
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		rgi := c.rg
		c.rg++
		if s.prune(c.pf, rgi, c.cols) {
			s.stats.RowGroupsPruned++
			continue
		}
		s.stats.RowGroups++
		if err := c.prefetch(rgi); err != nil {
			return false, err
		}
		if err := c.decode(s, b, rgi); err != nil {
			return false, badFile(fmt.Sprintf("%s row group %d", c.path, rgi), err)
		}
		s.stats.RowsRead += int64(b.n)
		c.i = -1
	}
}

// declaresRawOrder reports whether every row group of pf declares the sort
// order key, occurred_at, event_id (ascending).
func declaresRawOrder(pf *parquet.File) bool {
	md := pf.Metadata()
	for _, rg := range md.RowGroups {
		sc := rg.SortingColumns
		if len(sc) < len(rawSorting) {
			return false
		}
		for j, want := range rawSorting {
			leaf, ok := pf.Schema().Lookup(want.Path()...)
			if !ok || int(sc[j].ColumnIdx) != leaf.ColumnIndex || sc[j].Descending {
				return false
			}
		}
	}
	return true
}

// cursorHeap orders cursors by their current row: key (as a string), then
// occurred_at, then event_id.
type cursorHeap struct {
	s *scanner
	c []*fileCursor
}

func (h *cursorHeap) Len() int      { return len(h.c) }
func (h *cursorHeap) Swap(i, j int) { h.c[i], h.c[j] = h.c[j], h.c[i] }
func (h *cursorHeap) Less(i, j int) bool {
	a, b := h.c[i], h.c[j]
	ka, kb := a.b.key[a.i], b.b.key[b.i]
	if ka != kb {
		return h.s.keys[ka] < h.s.keys[kb]
	}
	oa, ob := a.b.occ[a.i], b.b.occ[b.i]
	if oa != ob {
		return oa < ob
	}
	return bytes.Compare(a.b.id.at(a.i), b.b.id.at(b.i)) < 0
}
func (h *cursorHeap) Push(x any) { h.c = append(h.c, x.(*fileCursor)) }
func (h *cursorHeap) Pop() any {
	c := h.c[len(h.c)-1]
	h.c = h.c[:len(h.c)-1]
	return c
}

// fileColumns maps each raw column (by bit position) to its leaf index in
// one file, -1 when not read.
type fileColumns [len(columnNames)]int

func (s *scanner) resolveColumns(pf *parquet.File, path string) (fileColumns, error) {
	var fc fileColumns
	for i, name := range columnNames {
		fc[i] = -1
		if s.cols&(1<<i) == 0 && !s.prunesOn(i) {
			continue
		}
		leaf, ok := pf.Schema().Lookup(name)
		if !ok {
			return fc, fmt.Errorf("%w: %s has no column %q", ErrBadFile, path, name)
		}
		fc[i] = leaf.ColumnIndex
	}
	return fc, nil
}

// prunesOn reports whether row-group pruning looks at column bit i.
func (s *scanner) prunesOn(i int) bool {
	switch Columns(1 << i) {
	case ColOccurredAt:
		return true
	case ColKey:
		return len(s.q.Keys) > 0
	case ColEventType:
		return len(s.q.EventTypes) > 0
	}
	return false
}

// prune reports whether row group rgi cannot hold a selected row, judging by
// its column statistics. Missing statistics never prune.
func (s *scanner) prune(pf *parquet.File, rgi int, fc fileColumns) bool {
	cc := pf.Metadata().RowGroups[rgi].Columns
	if st := &cc[fc[bitPos(ColOccurredAt)]].MetaData.Statistics; len(st.MinValue) == 8 && len(st.MaxValue) == 8 {
		lo := int64(binary.LittleEndian.Uint64(st.MinValue))
		hi := int64(binary.LittleEndian.Uint64(st.MaxValue))
		if hi < s.fromUS || lo >= s.toUS {
			return true
		}
	}
	if len(s.q.Keys) > 0 && !anyInRange(cc[fc[bitPos(ColKey)]].MetaData.Statistics, s.q.Keys) {
		return true
	}
	if len(s.q.EventTypes) > 0 && !anyInRange(cc[fc[bitPos(ColEventType)]].MetaData.Statistics, s.q.EventTypes) {
		return true
	}
	return false
}

// anyInRange reports whether any of vals may lie within the byte-array
// statistics' [min, max]; true when there are no statistics.
func anyInRange(st format.Statistics, vals []string) bool {
	lo, hi := st.MinValue, st.MaxValue
	if lo == nil || hi == nil {
		return true
	}
	for _, v := range vals {
		if bytes.Compare([]byte(v), lo) >= 0 && bytes.Compare([]byte(v), hi) <= 0 {
			return true
		}
	}
	return false
}

func bitPos(c Columns) int {
	for i := 0; i < len(columnNames); i++ {
		if c == 1<<i {
			return i
		}
	}
	panic("lake: not a single column")
}

// rgData is one row group's projected columns, decoded. String columns are
// kept as one byte buffer with offsets; key and event_type as interned ids.
type rgData struct {
	n    int
	id   byteColumn
	typ  []int32
	occ  []int64
	ing  []int64
	key  []int32
	val  []float64
	data byteColumn
	part []int32
	off  []int64

	dictMap map[parquet.Dictionary][]int32 // dictionary index -> interned id
}

type byteColumn struct {
	buf  []byte
	offs []uint32 // n+1 offsets into buf
}

func (c *byteColumn) reset() { c.buf, c.offs = c.buf[:0], append(c.offs[:0], 0) }

func (c *byteColumn) at(i int) []byte { return c.buf[c.offs[i]:c.offs[i+1]] }

func (c *byteColumn) appendValue(v []byte) {
	c.buf = append(c.buf, v...)
	c.offs = append(c.offs, uint32(len(c.buf)))
}

// fill copies row i's projected columns into r.
func (b *rgData) fill(r *RawRow, i int, s *scanner) {
	*r = RawRow{}
	c := s.cols
	if c&ColEventID != 0 {
		r.EventID = string(b.id.at(i))
	}
	if c&ColEventType != 0 {
		r.EventType = s.types[b.typ[i]]
	}
	if c&ColOccurredAt != 0 {
		r.OccurredAt = b.occ[i]
	}
	if c&ColIngestedAt != 0 {
		r.IngestedAt = b.ing[i]
	}
	if c&ColKey != 0 {
		r.Key = s.keys[b.key[i]]
	}
	if c&ColValue != 0 {
		r.Value = b.val[i]
	}
	if c&ColData != 0 {
		r.Data = string(b.data.at(i))
	}
	if c&ColKafkaPartition != 0 {
		r.KafkaPartition = b.part[i]
	}
	if c&ColKafkaOffset != 0 {
		r.KafkaOffset = b.off[i]
	}
}

// decode reads the projected columns of rg.
func (b *rgData) decode(s *scanner, rg parquet.RowGroup, fc fileColumns) error {
	b.n = int(rg.NumRows())
	chunks := rg.ColumnChunks()
	if b.dictMap == nil {
		b.dictMap = make(map[parquet.Dictionary][]int32)
	}
	clear(b.dictMap)
	var errs []error
	col := func(c Columns) parquet.ColumnChunk {
		if s.cols&c == 0 {
			return nil
		}
		return chunks[fc[bitPos(c)]]
	}
	if cc := col(ColEventID); cc != nil {
		b.id.reset()
		errs = append(errs, readBytes(cc, &b.id))
	}
	if cc := col(ColData); cc != nil {
		b.data.reset()
		errs = append(errs, readBytes(cc, &b.data))
	}
	if cc := col(ColKey); cc != nil {
		b.key = b.key[:0]
		errs = append(errs, b.readInterned(cc, &b.key, s.internKey))
	}
	if cc := col(ColEventType); cc != nil {
		b.typ = b.typ[:0]
		errs = append(errs, b.readInterned(cc, &b.typ, s.internType))
	}
	if cc := col(ColOccurredAt); cc != nil {
		b.occ = b.occ[:0]
		errs = append(errs, readFixed(cc, &b.occ, func(v []parquet.Value, i int) int64 { return v[i].Int64() }, int64Data))
	}
	if cc := col(ColIngestedAt); cc != nil {
		b.ing = b.ing[:0]
		errs = append(errs, readFixed(cc, &b.ing, func(v []parquet.Value, i int) int64 { return v[i].Int64() }, int64Data))
	}
	if cc := col(ColValue); cc != nil {
		b.val = b.val[:0]
		errs = append(errs, readFixed(cc, &b.val, func(v []parquet.Value, i int) float64 { return v[i].Double() }, doubleData))
	}
	if cc := col(ColKafkaPartition); cc != nil {
		b.part = b.part[:0]
		errs = append(errs, readFixed(cc, &b.part, func(v []parquet.Value, i int) int32 { return v[i].Int32() }, int32Data))
	}
	if cc := col(ColKafkaOffset); cc != nil {
		b.off = b.off[:0]
		errs = append(errs, readFixed(cc, &b.off, func(v []parquet.Value, i int) int64 { return v[i].Int64() }, int64Data))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, l := range []int{len(b.id.offs) - 1, len(b.key), len(b.occ)} {
		if l != b.n {
			return fmt.Errorf("column has %d values for %d rows", l, b.n)
		}
	}
	return nil
}

func int64Data(p parquet.Page) []int64    { d := p.Data(); return d.Int64() }
func int32Data(p parquet.Page) []int32    { d := p.Data(); return d.Int32() }
func doubleData(p parquet.Page) []float64 { d := p.Data(); return d.Double() }
func pageNulls(p parquet.Page) error {
	if p.NumNulls() > 0 {
		return errors.New("unexpected nulls")
	}
	return nil
}

// eachPage calls fn with every page of cc and releases it afterwards.
func eachPage(cc parquet.ColumnChunk, fn func(p parquet.Page) error) error {
	pages := cc.Pages()
	defer pages.Close()
	for {
		p, err := pages.ReadPage()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		err = pageNulls(p)
		if err == nil {
			err = fn(p)
		}
		parquet.Release(p)
		if err != nil {
			return err
		}
	}
}

// readFixed appends a fixed-width column's values to dst. Plain pages are
// copied in bulk; dictionary pages are looked up value by value.
func readFixed[T any](cc parquet.ColumnChunk, dst *[]T, conv func([]parquet.Value, int) T, plain func(parquet.Page) []T) error {
	var vals []parquet.Value
	return eachPage(cc, func(p parquet.Page) error {
		if dict := p.Dictionary(); dict != nil {
			d := p.Data()
			idx := d.Int32()
			vals = slices.Grow(vals[:0], len(idx))[:len(idx)]
			dict.Lookup(idx, vals)
			for i := range idx {
				*dst = append(*dst, conv(vals, i))
			}
			return nil
		}
		*dst = append(*dst, plain(p)...)
		return nil
	})
}

// readBytes appends a byte-array column's values to dst.
func readBytes(cc parquet.ColumnChunk, dst *byteColumn) error {
	return eachPage(cc, func(p parquet.Page) error {
		d := p.Data()
		if dict := p.Dictionary(); dict != nil {
			dd := dict.Page().Data()
			data, offs := dd.ByteArray()
			for _, j := range d.Int32() {
				dst.appendValue(data[offs[j]:offs[j+1]])
			}
			return nil
		}
		data, offs := d.ByteArray()
		if len(offs) == 0 {
			return nil
		}
		base := uint32(len(dst.buf)) - offs[0]
		dst.buf = append(dst.buf, data[offs[0]:offs[len(offs)-1]]...)
		for _, o := range offs[1:] {
			dst.offs = append(dst.offs, o+base)
		}
		return nil
	})
}

// readInterned appends a low-cardinality string column as interned ids.
// Dictionary pages map each dictionary entry once.
func (b *rgData) readInterned(cc parquet.ColumnChunk, dst *[]int32, intern func(string) int32) error {
	return readInterned(cc, dst, b.dictMap, intern)
}

// readInterned appends a low-cardinality string column as interned ids;
// dictMap caches each dictionary's ids.
func readInterned(cc parquet.ColumnChunk, dst *[]int32, dictMap map[parquet.Dictionary][]int32, intern func(string) int32) error {
	return eachPage(cc, func(p parquet.Page) error {
		d := p.Data()
		if dict := p.Dictionary(); dict != nil {
			m, ok := dictMap[dict]
			if !ok {
				dd := dict.Page().Data()
				data, offs := dd.ByteArray()
				m = make([]int32, len(offs)-1)
				for j := range m {
					m[j] = intern(string(data[offs[j]:offs[j+1]]))
				}
				dictMap[dict] = m
			}
			for _, j := range d.Int32() {
				*dst = append(*dst, m[j])
			}
			return nil
		}
		data, offs := d.ByteArray()
		var last []byte
		lastID := int32(-1)
		for j := 0; j+1 < len(offs); j++ {
			v := data[offs[j]:offs[j+1]]
			if lastID < 0 || !bytes.Equal(v, last) {
				lastID, last = intern(string(v)), v
			}
			*dst = append(*dst, lastID)
		}
		return nil
	})
}

// idSet remembers event_ids of one hour. Canonical UUIDs (what the gate
// admits) are stored as 16 bytes; anything else as a string.
type idSet struct {
	uuids map[[16]byte]struct{}
	other map[string]struct{}
}

func (s *idSet) reset() {
	if s.uuids == nil {
		s.uuids = make(map[[16]byte]struct{})
		s.other = make(map[string]struct{})
	}
	clear(s.uuids)
	clear(s.other)
}

// add inserts id and reports whether it was new.
func (s *idSet) add(id []byte) bool {
	if u, ok := parseUUID(id); ok {
		if _, dup := s.uuids[u]; dup {
			return false
		}
		s.uuids[u] = struct{}{}
		return true
	}
	if _, dup := s.other[string(id)]; dup {
		return false
	}
	s.other[string(id)] = struct{}{}
	return true
}

// parseUUID decodes a canonical 8-4-4-4-12 lowercase hex UUID, with the
// gate's own decoder (eight digits at a time).
func parseUUID(b []byte) (u [16]byte, ok bool) {
	// The string lives only for the call: ParseUUID keeps nothing.
	return event.ParseUUID(unsafe.String(unsafe.SliceData(b), len(b)))
}
