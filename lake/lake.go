package lake

import (
	"errors"
	"fmt"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// Options configures a Lake. The zero value of each field means its default.
type Options struct {
	// Root is the lake's root directory. Required.
	Root string
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
	// TempMaxAge is how old a hidden temporary file in an hour being
	// compacted must be before Compact removes it as debris of a crashed
	// write. Default 1h.
	TempMaxAge time.Duration
	// Now is the clock used to age temporary files. Default time.Now.
	Now func() time.Time
}

// Validate reports every problem with o at once.
func (o Options) Validate() error {
	var errs []error
	if o.Root == "" {
		errs = append(errs, errors.New("lake: options: Root is required"))
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
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Lake is a handle on a lake directory. It holds no open files; every method
// is safe for concurrent use. Concurrent writers of the same offset range
// are harmless (same names, same content); compaction of an hour must not
// run concurrently with itself for the same hour.
type Lake struct {
	opts  Options
	codec *zstd.Codec
}

// Open returns a Lake rooted at opts.Root. The directory is created on the
// first write, not here, so a read-only user of a missing lake gets empty
// results rather than a new directory.
func Open(opts Options) (*Lake, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.fillDefaults()
	return &Lake{opts: opts, codec: &zstd.Codec{Level: zstd.Level(opts.ZstdLevel)}}, nil
}

// Root returns the lake's root directory.
func (l *Lake) Root() string { return l.opts.Root }

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
