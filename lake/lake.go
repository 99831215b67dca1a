package lake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"reckon/lake/storage"
)

// Options configures a Lake. The zero value of each field means its default.
type Options struct {
	// Root is where the lake lives: a local directory, or
	// s3://bucket[/prefix] on S3-compatible object storage, reached as S3
	// says (docs/adr/0011-lake-object-storage.md). Required.
	Root string
	// S3 configures the connection when Root is an s3:// URL; ignored
	// otherwise.
	S3 storage.S3Options
	// RowGroupRows bounds the rows per row group of raw files. Default
	// 131072: a few row groups per busy hour, so key-range statistics can
	// prune, each small enough to decode in a few MB.
	RowGroupRows int64
	// ZstdLevel is the zstd encoder level (1 fastest .. 4 best). Default 1:
	// the archive goal is 1M rows per CPU-second. On the raw schema
	// (BenchmarkWriteRaw, one core) level 1 writes ~1.1M rows/CPU-s at 51
	// bytes/event, level 2 ~0.7M at 39, level 3 ~0.4M at 33; the random
	// event_id UUIDs are most of the bytes.
	ZstdLevel int
	// TempMaxAge is how old a hidden temporary file (on S3: an unfinished
	// multipart upload) in an hour being compacted must be before Compact
	// removes it as debris of a crashed write. Default 1h.
	TempMaxAge time.Duration
	// CompactLease is how long one compaction of an hour may hold the
	// hour's lock: it works under a deadline of three quarters of it from
	// taking the lock, and a lock older than the lease is a killed
	// compaction's, taken over by the next one. Default 10m; an hour whose
	// compaction needs longer fails until it is raised.
	CompactLease time.Duration
	// Now is the clock used to age temporary files. Default time.Now.
	Now func() time.Time
	// Wrap, when set, wraps the lake's storage (the directory or the
	// bucket) inside its retries: the wiring injects storage faults with
	// it when lake.faults is set (lake/storage/errorfs, tests and `make
	// chaos` only, docs/adr/0022-lake-fault-injection.md), so injected
	// faults are retried like real ones. Default nil: the storage as is.
	Wrap func(storage.Store) storage.Store
	// Retry bounds the retries of transient storage failures (injected
	// ones included). The zero value means its defaults; see RetryOptions.
	Retry storage.RetryOptions
}

// Validate reports every problem with o at once.
func (o Options) Validate() error {
	var errs []error
	if o.Root == "" {
		errs = append(errs, errors.New("lake: options: Root is required"))
	} else if storage.IsS3Root(o.Root) {
		if _, _, err := storage.ParseS3Root(o.Root); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, o.S3.Validate())
	}
	if o.RowGroupRows < 0 {
		errs = append(errs, fmt.Errorf("lake: options: RowGroupRows %d is negative", o.RowGroupRows))
	}
	if o.ZstdLevel < 0 || o.ZstdLevel > 4 {
		errs = append(errs, fmt.Errorf("lake: options: ZstdLevel %d outside 1..4", o.ZstdLevel))
	}
	if o.TempMaxAge < 0 {
		errs = append(errs, fmt.Errorf("lake: options: TempMaxAge %v is negative", o.TempMaxAge))
	}
	if o.CompactLease < 0 {
		errs = append(errs, fmt.Errorf("lake: options: CompactLease %v is negative", o.CompactLease))
	}
	errs = append(errs, o.Retry.Validate())
	return errors.Join(errs...)
}

func (o *Options) fillDefaults() {
	if o.RowGroupRows == 0 {
		o.RowGroupRows = 131072
	}
	if o.ZstdLevel == 0 {
		o.ZstdLevel = 1
	}
	if o.TempMaxAge == 0 {
		o.TempMaxAge = time.Hour
	}
	if o.CompactLease == 0 {
		o.CompactLease = 10 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Lake is a handle on a lake. It holds no open files; every method is safe
// for concurrent use. Concurrent writers of the same offset range are
// harmless (same names, same content); Compact locks the hour it compacts.
type Lake struct {
	opts  Options
	codec *zstd.Codec
	store storage.Store
}

// Open returns a Lake at opts.Root. A local directory is created on the
// first write, not here, so a read-only user of a missing lake gets empty
// results rather than a new directory. An S3 lake's bucket must exist; Open
// sends no request.
func Open(opts Options) (*Lake, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.fillDefaults()
	l := &Lake{opts: opts, codec: &zstd.Codec{Level: zstd.Level(opts.ZstdLevel)}}
	if storage.IsS3Root(opts.Root) {
		s, err := storage.NewS3(opts.Root, opts.S3)
		if err != nil {
			return nil, err
		}
		l.store = s
	} else {
		l.store = storage.NewLocal(opts.Root)
	}
	if opts.Wrap != nil {
		l.store = opts.Wrap(l.store)
	}
	// Outside the fault injector: injected faults are retried like real ones.
	l.store = storage.NewRetry(l.store, opts.Retry)
	return l, nil
}

// Root returns the lake's location as given: a directory or an s3:// URL.
func (l *Lake) Root() string { return l.opts.Root }

// LocalDir returns the lake's directory, and false when the lake is not on
// the local file system.
func (l *Lake) LocalDir() (string, bool) {
	s, ok := l.base().(*storage.Local)
	if !ok {
		return "", false
	}
	return s.Root(), true
}

// base returns the storage under the lake's retries and fault injection:
// the directory or the bucket.
func (l *Lake) base() storage.Store {
	st := l.store
	for next := unwrapStore(st); next != nil; next = unwrapStore(st) {
		st = next
	}
	return st
}

// unwrapStore returns the storage st wraps, or nil.
func unwrapStore(st storage.Store) storage.Store {
	if w, ok := st.(interface{ Unwrap() storage.Store }); ok {
		return w.Unwrap()
	}
	return nil
}

// putOnce is put without the lake's retries, for a write func that
// cannot run twice (it streams from a source it consumes).
func (l *Lake) putOnce(ctx context.Context, key string, write func(w io.Writer) error) (int64, error) {
	if r, ok := l.store.(*storage.Retry); ok {
		return r.PutOnce(ctx, key, write)
	}
	return l.store.Put(ctx, key, write)
}

// writerOptions are the parquet writer settings of every lake file:
// zstd, data page v1, bounded row groups, declared sort order.
func (l *Lake) writerOptions(sorting ...parquet.SortingColumn) []parquet.WriterOption {
	opts := []parquet.WriterOption{
		parquet.Compression(l.codec),
		parquet.DataPageVersion(1),
		parquet.MaxRowsPerRowGroup(l.opts.RowGroupRows),
		parquet.CreatedBy("reckon", "", ""),
	}
	if len(sorting) > 0 {
		opts = append(opts, parquet.SortingWriterConfig(parquet.SortingColumns(sorting...)))
	}
	return opts
}

// rawSorting declares the raw files' row order in their metadata.
var rawSorting = []parquet.SortingColumn{
	parquet.Ascending("key"),
	parquet.Ascending("occurred_at"),
	parquet.Ascending("event_id"),
}

// FaultsInjected returns how many faults the lake's storage injected so
// far: the count of a wrapper (Options.Wrap) that reports one, as
// lake/storage/errorfs does; 0 without one.
func (l *Lake) FaultsInjected() int64 {
	for st := l.store; st != nil; st = unwrapStore(st) {
		if s, ok := st.(interface{ Injected() int64 }); ok {
			return s.Injected()
		}
	}
	return 0
}

// StorageStats returns the retry counters of this lake's storage, one per
// operation in storage.Ops order, for metrics (the batch worker's /metrics
// exposes them as counters labelled by op). Each Lake counts its own.
// Safe for concurrent use.
func (l *Lake) StorageStats() []storage.OpStats {
	if r, ok := l.store.(*storage.Retry); ok {
		return r.Stats()
	}
	return nil
}
