package lake

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"reckon/lake/storage"
)

// FileInfo describes one file a write produced or removed.
type FileInfo struct {
	// Path is relative to the lake root, with forward slashes.
	Path  string `json:"path"`
	Rows  int64  `json:"rows"`
	Bytes int64  `json:"bytes"`
}

// HourCount is how many raw rows of one batch fell into one event hour.
type HourCount struct {
	Hour time.Time `json:"hour"` // start of the UTC hour
	Rows int64     `json:"rows"`
}

// WriteResult reports what one batch write did. It is small and
// JSON-friendly so an archive activity can return it to its workflow.
type WriteResult struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	FirstOffset int64  `json:"first_offset"`
	LastOffset  int64  `json:"last_offset"`
	// NextOffset is LastOffset+1: where the next batch starts.
	NextOffset int64 `json:"next_offset"`
	// Rows is the number of raw rows written, Rejected the number of
	// rejected rows.
	Rows     int64 `json:"rows"`
	Rejected int64 `json:"rejected"`
	// Hours counts raw rows per event hour, in hour order.
	Hours []HourCount `json:"hours"`
	// MaxIngestedAt is the latest Kafka timestamp in the batch.
	MaxIngestedAt time.Time `json:"max_ingested_at"`
	// Files lists raw files then rejected files written.
	Files []FileInfo `json:"files"`
	// Superseded lists older files of the same partition whose offset
	// range this batch covers and which were therefore removed.
	Superseded []string `json:"superseded,omitempty"`
}

// WriteRaw writes pre-decoded rows of topic/partition read from the offset
// range [firstOffset, lastOffset] as one file per event hour, named
// FileName(topic, partition, firstOffset, lastOffset). The range is the
// range the caller read, which may be wider than the rows' offsets (rejected
// records, Kafka's offset gaps); it must contain every row's offset. rows is
// not modified.
//
// Writing the same range again replaces the same files. Older files of the
// partition whose range lies inside [firstOffset, lastOffset] (a retried
// batch that read less) are removed after the new files are durable, so
// each offset stays archived once.
func (l *Lake) WriteRaw(ctx context.Context, topic string, partition int32, firstOffset, lastOffset int64, rows []RawRow) (WriteResult, error) {
	return l.writeBatch(ctx, topic, partition, firstOffset, lastOffset, rows, nil)
}

func (l *Lake) writeBatch(ctx context.Context, topic string, partition int32, first, last int64, rows []RawRow, rejected []RejectedRow) (WriteResult, error) {
	res := WriteResult{Topic: topic, Partition: partition, FirstOffset: first, LastOffset: last, NextOffset: last + 1}
	if err := ValidateTopic(topic); err != nil {
		return res, err
	}
	if partition < 0 || first < 0 || last < first {
		return res, fmt.Errorf("%w: partition %d offsets %d..%d", ErrBadRange, partition, first, last)
	}
	for i := range rows {
		r := &rows[i]
		if r.KafkaOffset < first || r.KafkaOffset > last || r.KafkaPartition != partition {
			return res, fmt.Errorf("%w: row %d is %d/%d, batch is %d/%d..%d", ErrBadRange, i, r.KafkaPartition, r.KafkaOffset, partition, first, last)
		}
		res.MaxIngestedAt = maxTime(res.MaxIngestedAt, r.IngestedAt)
	}
	for i := range rejected {
		r := &rejected[i]
		if r.KafkaOffset < first || r.KafkaOffset > last || r.KafkaPartition != partition {
			return res, fmt.Errorf("%w: rejected row %d is %d/%d, batch is %d/%d..%d", ErrBadRange, i, r.KafkaPartition, r.KafkaOffset, partition, first, last)
		}
		res.MaxIngestedAt = maxTime(res.MaxIngestedAt, r.IngestedAt)
	}
	name := FileName(topic, partition, first, last)
	var dirs []string // every directory written, for superseding

	// Raw: one file per event hour, rows in file order.
	buckets := bucketRaw(rows)
	buf := make([]RawRow, 0, 4096)
	for lo := 0; lo < len(buckets); {
		hour := buckets[lo].hour
		hi := lo + 1
		for hi < len(buckets) && buckets[hi].hour == hour {
			hi++
		}
		var n int64
		t := time.UnixMicro(hour * microsPerHour).UTC()
		dir := rawHourKey(topic, t)
		size, err := l.store.Put(ctx, storage.JoinKey(dir, name), func(out io.Writer) error {
			// A new writer per file: parquet-go v0.32.0's Reset clears the
			// declared sorting columns of every later file.
			w := parquet.NewGenericWriter[RawRow](out, l.writerOptions(rawSorting...)...)
			var err error
			if buf, n, err = writeRows(w, rows, buckets[lo:hi], buf); err != nil {
				return err
			}
			return w.Close()
		})
		if err != nil {
			return res, err
		}
		dirs = append(dirs, dir)
		res.Files = append(res.Files, FileInfo{Path: storage.JoinKey(dir, name), Rows: n, Bytes: size})
		res.Hours = append(res.Hours, HourCount{Hour: t, Rows: n})
		res.Rows += n
		lo = hi
	}

	// Rejected: one file per ingest date, in offset order.
	slices.SortFunc(rejected, func(a, b RejectedRow) int {
		da, db := floorDiv(a.IngestedAt, microsPerDay), floorDiv(b.IngestedAt, microsPerDay)
		if da != db {
			if da < db {
				return -1
			}
			return 1
		}
		return cmpInt64(a.KafkaOffset, b.KafkaOffset)
	})
	for lo := 0; lo < len(rejected); {
		day := floorDiv(rejected[lo].IngestedAt, microsPerDay)
		hi := lo + 1
		for hi < len(rejected) && floorDiv(rejected[hi].IngestedAt, microsPerDay) == day {
			hi++
		}
		dayRows := rejected[lo:hi]
		dir := rejectedDateKey(topic, time.UnixMicro(day*microsPerDay))
		size, err := l.store.Put(ctx, storage.JoinKey(dir, name), func(out io.Writer) error {
			rw := parquet.NewGenericWriter[RejectedRow](out, append(l.writerOptions(), rejectedBlobs...)...)
			if _, err := rw.Write(dayRows); err != nil {
				return err
			}
			return rw.Close()
		})
		if err != nil {
			return res, err
		}
		dirs = append(dirs, dir)
		res.Files = append(res.Files, FileInfo{Path: storage.JoinKey(dir, name), Rows: int64(len(dayRows)), Bytes: size})
		res.Rejected += int64(len(dayRows))
		lo = hi
	}

	// Only now that the new files are durable, remove what they supersede.
	batch := FileRange{Topic: topic, Partition: partition, FirstOffset: first, LastOffset: last}
	for _, dir := range dirs {
		gone, err := l.removeSuperseded(ctx, dir, batch)
		res.Superseded = append(res.Superseded, gone...)
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// rawBucket is one (hour, key) of a batch: indexes into the batch's rows in
// file order.
type rawBucket struct {
	hour int64 // hours since the epoch
	key  string
	idx  []int32
}

// bucketRaw groups rows by (event hour, key) and returns the buckets in
// file order (hour, key), each an index list sorted by compareRaw. rows is
// not modified.
//
// A batch arrives roughly in event-time order per key, so each bucket is
// nearly sorted already and is sorted (or found sorted) on its own with
// mostly sequential access. Sorting all rows at once, or copying the wide
// rows into buckets, was 2-5x slower on a million rows (random access,
// and GC write barriers on every copied string).
func bucketRaw(rows []RawRow) []rawBucket {
	type bucketID struct {
		hour int64
		key  string
	}
	// Counting sort of indexes: assign each row its bucket, size the
	// buckets, then place every index once.
	ids := make(map[bucketID]int32)
	var buckets []rawBucket
	var counts []int
	of := make([]int32, len(rows))
	last, lastB := bucketID{hour: -1 << 62}, int32(-1)
	for i := range rows {
		r := &rows[i]
		id := bucketID{floorDiv(r.OccurredAt, microsPerHour), r.Key}
		b := lastB
		if id != last {
			var ok bool
			if b, ok = ids[id]; !ok {
				b = int32(len(buckets))
				ids[id] = b
				buckets = append(buckets, rawBucket{hour: id.hour, key: id.key})
				counts = append(counts, 0)
			}
			last, lastB = id, b
		}
		of[i] = b
		counts[b]++
	}
	all := make([]int32, len(rows))
	start := 0
	for b := range buckets {
		buckets[b].idx = all[start : start : start+counts[b]]
		start += counts[b]
	}
	for i, b := range of {
		buckets[b].idx = append(buckets[b].idx, int32(i))
	}
	slices.SortFunc(buckets, func(a, b rawBucket) int {
		if a.hour != b.hour {
			return cmpInt64(a.hour, b.hour)
		}
		return strings.Compare(a.key, b.key)
	})
	for i := range buckets {
		sortIndex(rows, buckets[i].idx)
	}
	return buckets
}

// sortIndex sorts idx by compareRaw of the rows it points at. Already
// sorted input costs one pass.
func sortIndex(rows []RawRow, idx []int32) {
	for k := 1; k < len(idx); k++ {
		if compareRaw(&rows[idx[k-1]], &rows[idx[k]]) > 0 {
			slices.SortFunc(idx, func(i, j int32) int { return compareRaw(&rows[i], &rows[j]) })
			return
		}
	}
}

// writeRows writes rows[idx...] of buckets to w in order, gathering them in
// chunks into buf (returned for reuse).
func writeRows(w *parquet.GenericWriter[RawRow], rows []RawRow, buckets []rawBucket, buf []RawRow) ([]RawRow, int64, error) {
	var n int64
	for _, b := range buckets {
		for lo := 0; lo < len(b.idx); lo += cap(buf) {
			buf = buf[:0]
			for _, i := range b.idx[lo:min(lo+cap(buf), len(b.idx))] {
				buf = append(buf, rows[i])
			}
			if _, err := w.Write(buf); err != nil {
				return buf, n, err
			}
			n += int64(len(buf))
		}
	}
	clear(buf[:cap(buf)])
	return buf, n, nil
}

// removeSuperseded removes files in dir of batch's partition whose offset
// range lies strictly inside batch's.
func (l *Lake) removeSuperseded(ctx context.Context, dir string, batch FileRange) ([]string, error) {
	es, err := l.store.List(ctx, dir)
	if err != nil {
		return nil, err
	}
	var names, gone []string
	for _, e := range es {
		if e.Dir || hidden(e.Name) {
			continue
		}
		r, err := ParseFileName(batch.Topic, e.Name)
		if err != nil || r == batch || !batch.Contains(r) {
			continue
		}
		names = append(names, e.Name)
		gone = append(gone, storage.JoinKey(dir, e.Name))
	}
	return gone, l.store.Remove(ctx, dir, names)
}

const (
	microsPerHour = int64(time.Hour / time.Microsecond)
	microsPerDay  = 24 * microsPerHour
)

// floorDiv divides rounding toward negative infinity, so instants before
// the epoch fall into the right hour.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func maxTime(t time.Time, us int64) time.Time {
	if u := time.UnixMicro(us).UTC(); u.After(t) {
		return u
	}
	return t
}

// rejectedBlobs keeps the rejected table's byte columns out of page
// statistics and the column index: min/max of a 64 KiB value are stored
// uncompressed, six copies per page, and mean nothing for a blob.
var rejectedBlobs = []parquet.WriterOption{
	parquet.SkipPageBounds("raw"), parquet.SkipPageStatistics("raw"),
	parquet.SkipPageBounds("record_key"), parquet.SkipPageStatistics("record_key"),
	parquet.SkipPageBounds("raw_sha256"), parquet.SkipPageStatistics("raw_sha256"),
}
