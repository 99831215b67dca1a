package lake

import (
	"container/heap"
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/parquet-go/parquet-go"
)

// CompactResult reports what Compact did to one hour.
type CompactResult struct {
	Hour time.Time `json:"hour"`
	// Written lists the compacted files, one per partition that had more
	// than one file.
	Written []FileInfo `json:"written"`
	// Removed lists the input files deleted after the compacted file was
	// durable (an input named like its output is replaced, not removed).
	Removed []string `json:"removed"`
	// Rows is the number of rows in the written files; DuplicateOffsets the
	// rows dropped because another input held the same partition offset.
	Rows             int64 `json:"rows"`
	DuplicateOffsets int64 `json:"duplicate_offsets"`
	// TempRemoved lists debris of crashed writes removed: stale temporary
	// files, on S3 stale multipart uploads.
	TempRemoved []string `json:"temp_removed,omitempty"`
}

// Compact merges the raw files of topic in the UTC hour starting at hour
// into one file per Kafka partition (see docs/adr/0004-lake-compaction.md).
//
// For each partition with two or more files it streams a k-way merge of the
// files (each already sorted) into FileName(topic, partition, lowest first
// offset, highest last offset), keeping each (partition, offset) once, writes
// it atomically, and only then deletes the inputs. A crash in between leaves
// inputs and output side by side: reckon's reader still counts every
// event_id once, and running Compact again finishes the job, producing the
// same file. Partitions with a single file are left alone. Files written
// into the hour while Compact runs are not touched.
//
// Compact takes a lock in the hour directory (a lock file; on S3 an object
// created with a conditional PUT, docs/adr/0011-lake-object-storage.md), so
// two compactions of the same hour do not interleave; a lock older than
// Options.TempMaxAge is considered left by a crash and taken over. It is
// meant for finalized hours (archive progress past the hour plus the
// allowed lateness), run by the daily reconciliation; on an hour still
// being archived it is correct but wasted work.
func (l *Lake) Compact(ctx context.Context, topic string, hour time.Time) (CompactResult, error) {
	res := CompactResult{Hour: hour.UTC()}
	if err := ValidateTopic(topic); err != nil {
		return res, err
	}
	if hour.UnixMicro()%microsPerHour != 0 {
		return res, fmt.Errorf("%w: compact hour %s is not the start of an hour", ErrBadQuery, hour.UTC().Format(time.RFC3339Nano))
	}
	dir := rawHourKey(topic, hour)
	if es, err := l.store.list(ctx, dir); err != nil || len(es) == 0 {
		return res, err // a missing hour has nothing to compact
	}
	unlock, err := l.store.lock(ctx, dir, l.opts.Now(), l.opts.TempMaxAge)
	if err != nil {
		return res, err
	}
	defer unlock()

	tmpGone, err := l.store.removeStale(ctx, dir, l.opts.Now(), l.opts.TempMaxAge)
	res.TempRemoved = tmpGone
	if err != nil {
		return res, err
	}
	files, err := l.lakeFiles(ctx, dir)
	if err != nil {
		return res, err
	}
	byPartition := map[int32][]compactInput{}
	for _, f := range files {
		r, err := ParseFileName(topic, f.name)
		if err != nil {
			continue // not ours: leave it
		}
		byPartition[r.Partition] = append(byPartition[r.Partition], compactInput{r, f.size})
	}
	parts := make([]int32, 0, len(byPartition))
	for p := range byPartition {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	for _, p := range parts {
		inputs := byPartition[p]
		if len(inputs) < 2 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		out := inputs[0].FileRange
		for _, in := range inputs[1:] {
			out.FirstOffset = min(out.FirstOffset, in.FirstOffset)
			out.LastOffset = max(out.LastOffset, in.LastOffset)
		}
		outName := FileName(topic, p, out.FirstOffset, out.LastOffset)
		var rows, dups int64
		size, err := l.store.put(ctx, joinKey(dir, outName), func(w io.Writer) error {
			var err error
			rows, dups, err = l.mergeFiles(ctx, dir, inputs, w)
			return err
		})
		if err != nil {
			return res, err
		}
		res.Written = append(res.Written, FileInfo{Path: joinKey(dir, outName), Rows: rows, Bytes: size})
		res.Rows += rows
		res.DuplicateOffsets += dups
		var gone []string
		for _, in := range inputs {
			if n := in.name(); n != outName {
				gone = append(gone, n)
				res.Removed = append(res.Removed, joinKey(dir, n))
			}
		}
		if err := l.store.remove(ctx, dir, gone); err != nil {
			return res, err
		}
	}
	return res, nil
}

// compactInput is one file of a partition being compacted.
type compactInput struct {
	FileRange
	size int64
}

func (in compactInput) name() string {
	return FileName(in.Topic, in.Partition, in.FirstOffset, in.LastOffset)
}

// mergeFiles streams the rows of inputs (each sorted by compareRaw) in
// compareRaw order into w, dropping rows whose (partition, offset) repeats.
// compareRaw ends with partition and offset, and a given offset is always
// the same record, so repeats are adjacent in the merge.
func (l *Lake) mergeFiles(ctx context.Context, dir string, inputs []compactInput, w io.Writer) (rows, dups int64, err error) {
	h := &mergeHeap{}
	defer func() {
		for _, c := range h.cursors {
			c.close()
		}
	}()
	for _, in := range inputs {
		c, err := l.openCursor(ctx, joinKey(dir, in.name()), in.size)
		if err != nil {
			return 0, 0, err
		}
		if ok, err := c.next(); err != nil {
			c.close()
			return 0, 0, err
		} else if !ok {
			c.close()
			continue
		}
		h.cursors = append(h.cursors, c)
	}
	heap.Init(h)
	pw := parquet.NewGenericWriter[RawRow](w, l.writerOptions(rawSorting...)...)
	buf := make([]RawRow, 0, 1024)
	var last RawRow
	haveLast := false
	for h.Len() > 0 {
		c := h.cursors[0]
		r := c.row()
		if haveLast && r.KafkaPartition == last.KafkaPartition && r.KafkaOffset == last.KafkaOffset {
			dups++
		} else {
			buf = append(buf, *r)
			last, haveLast = *r, true
			if len(buf) == cap(buf) {
				if _, err := pw.Write(buf); err != nil {
					return rows, dups, err
				}
				rows += int64(len(buf))
				buf = buf[:0]
			}
		}
		ok, err := c.next()
		if err != nil {
			return rows, dups, err
		}
		if ok {
			heap.Fix(h, 0)
		} else {
			c.close()
			heap.Pop(h)
		}
	}
	if _, err := pw.Write(buf); err != nil {
		return rows, dups, err
	}
	rows += int64(len(buf))
	return rows, dups, pw.Close()
}

// cursor reads one sorted raw file in chunks.
type cursor struct {
	key string
	f   objectReader
	r   *parquet.GenericReader[RawRow]
	buf []RawRow
	i   int
}

func (l *Lake) openCursor(ctx context.Context, key string, size int64) (*cursor, error) {
	f, pf, err := l.openParquet(ctx, key, size)
	if err != nil {
		return nil, fmt.Errorf("lake: compact: %w", err)
	}
	return &cursor{key: key, f: f, r: parquet.NewGenericReader[RawRow](pf), buf: make([]RawRow, 0, 1024)}, nil
}

func (c *cursor) row() *RawRow { return &c.buf[c.i] }

// next advances to the next row; false at the end of the file.
func (c *cursor) next() (bool, error) {
	c.i++
	if c.i < len(c.buf) {
		return true, nil
	}
	c.buf = c.buf[:cap(c.buf)]
	n, err := c.r.Read(c.buf)
	c.buf, c.i = c.buf[:n], 0
	if n > 0 {
		return true, nil
	}
	if err == nil || err == io.EOF {
		return false, nil
	}
	return false, fmt.Errorf("%w: %s: %v", ErrBadFile, c.key, err)
}

func (c *cursor) close() {
	if c.r != nil {
		c.r.Close()
		c.f.Close()
		c.r = nil
	}
}

type mergeHeap struct{ cursors []*cursor }

func (h *mergeHeap) Len() int { return len(h.cursors) }
func (h *mergeHeap) Less(i, j int) bool {
	return compareRaw(h.cursors[i].row(), h.cursors[j].row()) < 0
}
func (h *mergeHeap) Swap(i, j int) { h.cursors[i], h.cursors[j] = h.cursors[j], h.cursors[i] }
func (h *mergeHeap) Push(x any)    { h.cursors = append(h.cursors, x.(*cursor)) }
func (h *mergeHeap) Pop() any {
	c := h.cursors[len(h.cursors)-1]
	h.cursors = h.cursors[:len(h.cursors)-1]
	return c
}
