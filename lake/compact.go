package lake

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"reckon/lake/storage"
)

// CompactOptions says how CompactHour treats one hour. The zero value of
// each field means its default.
type CompactOptions struct {
	// Open marks an hour the stream may still count events of: only the
	// archive files of a partition holding at least half of MaxOpenFiles
	// of them are merged, into one archive file keeping every offset (no
	// event_id deduplication). Default false: the hour is closed and all
	// its files are merged across partitions, duplicates removed.
	Open bool
	// MaxRows bounds the rows of each file a closed hour's compaction
	// writes. Default 1,000,000.
	MaxRows int64
	// MaxOpenFiles is how many raw files one (partition, open hour) may
	// hold; a partition reaching half of it is merged. Default 64.
	MaxOpenFiles int
	// LateDelay: a closed hour already compacted that receives archive
	// files again (events archived after it closed) is compacted again
	// once the oldest of them is this old, they number half of
	// MaxOpenFiles, or they hold a tenth of the hour's bytes (what a
	// killed compaction leaves), so a trickle of late events does not
	// rewrite the hour every pass. Default 10m.
	LateDelay time.Duration
	// Sweep removes stale temporaries (on S3 unfinished uploads) even when
	// there is nothing to merge, and compacts a closed hour's late files
	// at once: the manual tool. Default false: an hour is locked only when
	// it has work.
	Sweep bool
}

func (o *CompactOptions) fillDefaults() {
	if o.MaxRows <= 0 {
		o.MaxRows = 1_000_000
	}
	if o.MaxOpenFiles <= 0 {
		o.MaxOpenFiles = 64
	}
	if o.LateDelay <= 0 {
		o.LateDelay = 10 * time.Minute
	}
}

// openMergeAt is how many archive files of one partition make an open
// hour's merge worth doing: half the limit, so files written between two
// passes of the compaction workflow do not push the count past it.
func (o CompactOptions) openMergeAt() int { return max(2, o.MaxOpenFiles/2) }

// CompactResult reports what a compaction did to one hour.
type CompactResult struct {
	Hour time.Time `json:"hour"`
	// Closed is true when the hour was compacted as closed (merged across
	// partitions, duplicates removed), false for an open hour's merge.
	Closed bool `json:"closed"`
	// Written lists the files written: for a closed hour its compacted
	// files, for an open hour one archive file per merged partition.
	Written []FileInfo `json:"written"`
	// Removed lists the input files deleted after the written files were
	// durable.
	Removed []string `json:"removed"`
	// Rows is the number of rows in the written files; DuplicateOffsets the
	// rows dropped because another input held the same partition offset
	// (the same Kafka record archived twice).
	Rows             int64 `json:"rows"`
	DuplicateOffsets int64 `json:"duplicate_offsets"`
	// Dropped counts redeliveries removed from a closed hour: records at
	// other offsets with the event_id, key and event time of a kept one.
	// Each is recorded in the raw_dropped table (DroppedFile).
	Dropped     int64  `json:"dropped"`
	DroppedFile string `json:"dropped_file,omitempty"`
	// Files is how many raw files the hour holds afterwards (as far as this
	// compaction knows: files archived meanwhile are not counted), and
	// MaxPartitionFiles the most archive files one partition holds.
	Files             int `json:"files"`
	MaxPartitionFiles int `json:"max_partition_files"`
	// TempRemoved lists debris of crashed writes removed: stale temporary
	// files, on S3 stale multipart uploads.
	TempRemoved []string `json:"temp_removed,omitempty"`
}

// DroppedRow is one row of the raw_dropped table: a redelivery that a
// closed hour's compaction removed from the raw table, and the copy it
// kept. With it every Kafka offset of a raw topic stays in exactly one of
// raw, rejected and raw_dropped (docs/adr/0018-continuous-compaction.md).
type DroppedRow struct {
	EventID    string `parquet:"event_id"`
	Key        string `parquet:"key,dict"`
	OccurredAt int64  `parquet:"occurred_at,timestamp(microsecond:utc)"`
	// IngestedAt is the dropped copy's Kafka timestamp.
	IngestedAt     int64 `parquet:"ingested_at,timestamp(microsecond:utc)"`
	KafkaPartition int32 `parquet:"kafka_partition"`
	KafkaOffset    int64 `parquet:"kafka_offset"`
	// KeptPartition and KeptOffset locate the copy the raw table kept when
	// this one was dropped (the earliest ingested). A later compaction of
	// the hour that finds an even earlier copy drops the kept one too; the
	// chain of kept_* references then ends at the copy in raw.
	KeptPartition int32 `parquet:"kept_partition"`
	KeptOffset    int64 `parquet:"kept_offset"`
}

// Compact compacts topic's hour starting at hour as closed, whatever the
// stream's progress says: `reckon lake compact`, the manual tool. It also
// removes stale temporaries when there is nothing to merge. See
// CompactHour.
func (l *Lake) Compact(ctx context.Context, topic string, hour time.Time) (CompactResult, error) {
	return l.CompactHour(ctx, topic, hour, CompactOptions{Sweep: true})
}

// CompactHour compacts the raw files of topic in the UTC hour starting at
// hour (docs/adr/0018-continuous-compaction.md, which extends
// docs/adr/0004-lake-compaction.md).
//
// A closed hour (o.Open false) with any archive file is merged whole: a
// k-way merge of all its files (each sorted by key, occurred_at, event_id)
// keeps each (partition, offset) once and, of the copies of one event
// (same event_id, key and event time: what the reader deduplicates), the
// earliest ingested; it writes the kept rows, sorted as before, into files
// <topic>-c<generation>-<n>.parquet of at most o.MaxRows rows, then the
// dropped copies, with the copy kept, to the raw_dropped table, and only
// then deletes the inputs. The generation exceeds every generation in the
// hour, so an output never replaces an input.
//
// A closed hour already compacted whose new archive files are few and
// small waits until the oldest is o.LateDelay old.
//
// An open hour has each partition with at least o.MaxOpenFiles/2 archive
// files merged, every offset kept: its newest files, from the first in
// offset order that is smaller than all the files after it together (see
// openMergeRun), into one archive file <topic>-<p>-<first>-<last>.parquet
// named by their offset range. Older, larger files stay as they are, so a
// row is rewritten only when the file holding it at least doubles, and an
// hour's merges write O(n log n) rows for n archived, not O(n²).
//
// A crash at any point leaves readable files: inputs and outputs side by
// side hold the same events, which reckon's reader counts once, and
// running CompactHour again finishes the job. Files archived into the hour
// meanwhile are not inputs and are not touched.
//
// CompactHour locks the hour (a lock file; on S3 an object created with a
// conditional PUT, docs/adr/0011-lake-object-storage.md), so compactions
// of one hour do not interleave. The lock is a lease of
// Options.CompactLease: the holder works under a deadline of three quarters
// of it from taking the lock (its writes and removals stop there), so a lock
// older than the lease is a killed compaction's and is taken over. A
// compaction that takes over writes a generation two above the highest it
// sees, so no output of a holder still finishing a write shares its name.
func (l *Lake) CompactHour(ctx context.Context, topic string, hour time.Time, o CompactOptions) (CompactResult, error) {
	o.fillDefaults()
	res := CompactResult{Hour: hour.UTC(), Closed: !o.Open}
	if err := ValidateTopic(topic); err != nil {
		return res, err
	}
	if hour.UnixMicro()%microsPerHour != 0 {
		return res, fmt.Errorf("%w: compact hour %s is not the start of an hour", ErrBadQuery,
			hour.UTC().Format(time.RFC3339Nano))
	}
	dir := rawHourKey(topic, hour)
	es, err := l.store.List(ctx, dir)
	if err != nil || len(es) == 0 {
		return res, err // a missing hour has nothing to compact
	}
	hf := classify(topic, es)
	res.Files, res.MaxPartitionFiles = hf.files(), hf.maxPartitionFiles()
	// A lock left by a killed compaction is taken over and removed once
	// stale, work or not.
	staleLock := slices.ContainsFunc(es, func(e storage.Entry) bool {
		return e.Name == storage.LockName && l.opts.Now().Sub(e.ModTime) >= l.opts.CompactLease
	})
	if !hf.needsWork(o, l.opts.Now()) && !o.Sweep && !staleLock {
		return res, nil
	}
	taken := l.opts.Now()
	unlock, err := l.store.Lock(ctx, dir, taken, l.opts.CompactLease)
	if err != nil {
		return res, err
	}
	defer unlock()
	// The lease: no write or removal of this compaction after it, so
	// the next one may take a lock as old over.
	ctx, cancel := context.WithDeadline(ctx, time.Now().Add(l.opts.CompactLease*3/4))
	defer cancel()
	tmpGone, err := l.store.RemoveStale(ctx, dir, l.opts.Now(), l.opts.TempMaxAge)
	res.TempRemoved = tmpGone
	if err != nil {
		return res, err
	}
	// List again under the lock: another compaction may have finished.
	if es, err = l.store.List(ctx, dir); err != nil {
		return res, err
	}
	hf = classify(topic, es)
	res.Files, res.MaxPartitionFiles = hf.files(), hf.maxPartitionFiles()
	if !hf.needsWork(o, l.opts.Now()) {
		return res, nil
	}
	if o.Open {
		err = l.mergeOpen(ctx, topic, dir, hf, o, &res)
	} else {
		err = l.compactClosed(ctx, topic, hour, dir, hf, o, staleLock, &res)
	}
	return res, err
}

// hourFiles is what one hour directory holds, by kind.
type hourFiles struct {
	archive   map[int32][]compactInput // archive files by partition
	compacted []compactInput           // files of closed-hour compactions
	maxGen    int64                    // highest compacted generation

	archiveBytes, compactedBytes int64
	oldestArchive                time.Time // modification time
}

func classify(topic string, es []storage.Entry) hourFiles {
	hf := hourFiles{archive: map[int32][]compactInput{}}
	for _, e := range es {
		if e.Dir || hidden(e.Name) {
			continue
		}
		if r, err := ParseFileName(topic, e.Name); err == nil {
			hf.archive[r.Partition] = append(hf.archive[r.Partition], compactInput{name: e.Name, size: e.Size, FileRange: r})
			hf.archiveBytes += e.Size
			if hf.oldestArchive.IsZero() || e.ModTime.Before(hf.oldestArchive) {
				hf.oldestArchive = e.ModTime
			}
			continue
		}
		if gen, ok := parseCompactedName(topic, e.Name); ok {
			hf.compacted = append(hf.compacted, compactInput{name: e.Name, size: e.Size})
			hf.compactedBytes += e.Size
			hf.maxGen = max(hf.maxGen, gen)
		}
	}
	return hf
}

func (hf hourFiles) files() int {
	n := len(hf.compacted)
	for _, in := range hf.archive {
		n += len(in)
	}
	return n
}

func (hf hourFiles) maxPartitionFiles() int {
	n := 0
	for _, in := range hf.archive {
		n = max(n, len(in))
	}
	return n
}

func (hf hourFiles) needsWork(o CompactOptions, now time.Time) bool {
	if o.Open {
		return hf.maxPartitionFiles() >= o.openMergeAt()
	}
	if len(hf.archive) == 0 {
		return false
	}
	if len(hf.compacted) == 0 || o.Sweep {
		return true
	}
	// Late files in a compacted hour (o.LateDelay).
	n := 0
	for _, in := range hf.archive {
		n += len(in)
	}
	return n >= o.openMergeAt() || hf.archiveBytes*10 >= hf.compactedBytes || now.Sub(hf.oldestArchive) >= o.LateDelay
}

// compactInput is one input file of a compaction.
type compactInput struct {
	FileRange // archive files only
	name      string
	size      int64
}

// CompactedName is the name of file n (from 0) of generation gen of a
// closed hour's compaction of topic. It is not an archive name: the
// archiver's superseding never removes it.
func CompactedName(topic string, gen int64, n int) string {
	return topic + "-c" + strconv.FormatInt(gen, 10) + "-" + strconv.Itoa(n) + ".parquet"
}

func parseCompactedName(topic, name string) (gen int64, ok bool) {
	rest, ok := strings.CutSuffix(name, ".parquet")
	if !ok {
		return 0, false
	}
	if rest, ok = strings.CutPrefix(rest, topic+"-c"); !ok {
		return 0, false
	}
	g, n, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	gen, err1 := strconv.ParseInt(g, 10, 64)
	_, err2 := strconv.Atoi(n)
	return gen, err1 == nil && err2 == nil && gen > 0
}

// droppedName is the raw_dropped file of generation gen of an hour.
func droppedName(topic string, gen int64) string {
	return topic + "-c" + strconv.FormatInt(gen, 10) + ".parquet"
}

func parseDroppedName(topic, name string) (int64, bool) {
	rest, ok := strings.CutSuffix(name, ".parquet")
	if !ok {
		return 0, false
	}
	if rest, ok = strings.CutPrefix(rest, topic+"-c"); !ok {
		return 0, false
	}
	gen, err := strconv.ParseInt(rest, 10, 64)
	return gen, err == nil && gen > 0
}
