package lake

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/parquet-go/parquet-go"

	"reckon/internal/event"
	"reckon/lake/storage"
)

// This file holds the hour scan: the hour directories of a query, the files
// of an hour opened as cursors and merged in (key, event time) order with a
// heap, each event_id once.

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
	days, err := l.store.List(ctx, base)
	if err != nil {
		return nil, err
	}
	var out []hourDir
	for _, d := range days {
		day, ok := parseDateDir("event_date", d.Name)
		if !ok || !d.Dir {
			continue
		}
		if dUS := day.UnixMicro(); dUS >= toUS || dUS+microsPerDay <= fromUS {
			continue
		}
		hours, err := l.store.List(ctx, storage.JoinKey(base, d.Name))
		if err != nil {
			return nil, err
		}
		for _, h := range hours {
			hh, ok := parseHourDir(h.Name)
			if !ok || !h.Dir {
				continue
			}
			start := day.Add(time.Duration(hh) * time.Hour)
			if sUS := start.UnixMicro(); sUS >= toUS || sUS+microsPerHour <= fromUS {
				continue
			}
			out = append(out, hourDir{start, storage.JoinKey(base, d.Name, h.Name)})
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
func (l *Lake) lakeFiles(ctx context.Context, dir string) ([]storage.Entry, error) {
	es, err := l.store.List(ctx, dir)
	if err != nil {
		return nil, err
	}
	out := es[:0]
	for _, e := range es {
		if !e.Dir && !hidden(e.Name) && strings.HasSuffix(e.Name, ".parquet") {
			out = append(out, e)
		}
	}
	return out, nil
}

// openParquet opens key as a parquet file, reading its footer only. size
// is the file's size from a listing, or -1.
func (l *Lake) openParquet(ctx context.Context, key string, size int64) (storage.ObjectReader, *parquet.File, error) {
	f, err := l.store.Open(ctx, key, size)
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
	if l.store.Remote() {
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
		c, err := s.openCursor(ctx, storage.JoinKey(dir, f.Name), f.Size)
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
	f      storage.ObjectReader
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
	p, ok := c.f.(storage.Prefetcher)
	if !ok {
		return nil
	}
	cc := c.pf.Metadata().RowGroups[rgi].Columns
	var rs []storage.ByteRange
	for i := range columnNames {
		if c.s.cols&(1<<i) == 0 || c.cols[i] < 0 {
			continue
		}
		md := &cc[c.cols[i]].MetaData
		off := md.DataPageOffset
		if md.DictionaryPageOffset > 0 && md.DictionaryPageOffset < off {
			off = md.DictionaryPageOffset
		}
		rs = append(rs, storage.ByteRange{Off: off, N: md.TotalCompressedSize})
	}
	return p.Prefetch(rs)
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
