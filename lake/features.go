package lake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"reckon/internal/event"
	"reckon/lake/storage"
)

// FeaturesDir holds every rolling feature the stream served, as the
// features topic carried it (docs/adr/0036-features-archive.md):
// features/stream=<s>/event_date=YYYY-MM-DD/<topic>-<partition>-<first>-<last>.parquet,
// the date of event_time (UTC), the offsets those of the features topic.
const FeaturesDir = "features"

// FeatureRow is one row of the features table: an event.Feature with
// timestamps in microseconds (UTC) and its place on the features topic
// (KafkaPartition, KafkaOffset: each offset is archived exactly once).
//
// Column order and names are the table's contract with DuckDB, Spark and
// pandas users; change them only with a migration.
type FeatureRow struct {
	Stream    string `parquet:"stream,dict"`
	Key       string `parquet:"key,dict"`
	EventID   string `parquet:"event_id"`
	EventTime int64  `parquet:"event_time,timestamp(microsecond:utc)"`
	// SizeNS is the rolling size in nanoseconds: the feature counts the
	// key's events in (event_time - size, event_time].
	SizeNS int64   `parquet:"size_ns"`
	Count  int64   `parquet:"count"`
	Sum    float64 `parquet:"sum"`
	// Watermark is the partition's watermark before the event; zero (the
	// epoch) before its first event.
	Watermark int64 `parquet:"watermark,timestamp(microsecond:utc)"`
	// EmittedAt is when the stream produced the feature, ArrivedAt when
	// its source record arrived (event.Feature).
	EmittedAt int64 `parquet:"emitted_at,timestamp(microsecond:utc)"`
	ArrivedAt int64 `parquet:"arrived_at,timestamp(microsecond:utc)"`
	// SourceTopic, SourcePartition and SourceOffset are the source event's
	// raw record (the raw table's topic, kafka_partition, kafka_offset).
	SourceTopic     string `parquet:"source_topic,dict"`
	SourcePartition int32  `parquet:"source_partition"`
	SourceOffset    int64  `parquet:"source_offset"`
	// KafkaPartition and KafkaOffset are the feature's own record on the
	// features topic.
	KafkaPartition int32 `parquet:"kafka_partition"`
	KafkaOffset    int64 `parquet:"kafka_offset"`
}

// FeatureRowOf converts a features-topic record at partition/offset to its
// lake row.
func FeatureRowOf(f event.Feature, partition int32, offset int64) FeatureRow {
	return FeatureRow{
		Stream: f.Stream, Key: f.Key, EventID: f.EventID, EventTime: micros(f.EventTime), SizeNS: int64(f.Size),
		Count: f.Count, Sum: f.Sum, Watermark: micros(f.Watermark),
		EmittedAt: micros(f.EmittedAt), ArrivedAt: micros(f.ArrivedAt),
		SourceTopic: f.SourceTopic, SourcePartition: f.SourcePartition, SourceOffset: f.SourceOffset,
		KafkaPartition: partition, KafkaOffset: offset,
	}
}

// Feature converts a row back to the record it was archived from; a zero
// watermark or emitted_at becomes the zero time.Time.
func (r FeatureRow) Feature() event.Feature {
	t := func(us int64) time.Time {
		if us == 0 {
			return time.Time{}
		}
		return time.UnixMicro(us).UTC()
	}
	return event.Feature{
		Stream: r.Stream, Key: r.Key, EventID: r.EventID,
		EventTime: time.UnixMicro(r.EventTime).UTC(), Size: time.Duration(r.SizeNS),
		Count: r.Count, Sum: r.Sum, Watermark: t(r.Watermark), EmittedAt: t(r.EmittedAt), ArrivedAt: t(r.ArrivedAt),
		SourceTopic: r.SourceTopic, SourcePartition: r.SourcePartition, SourceOffset: r.SourceOffset,
	}
}

// featureSorting declares the features files' row order.
var featureSorting = []parquet.SortingColumn{
	parquet.Ascending("key"),
	parquet.Ascending("event_time"),
	parquet.Ascending("kafka_offset"),
}

// compareFeatureRows orders rows as the files hold them: stream, event
// date (a file each), key, event_time, offset.
func compareFeatureRows(a, b *FeatureRow) int {
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
	if c := cmpInt64(int64(a.KafkaPartition), int64(b.KafkaPartition)); c != 0 {
		return c
	}
	return cmpInt64(a.KafkaOffset, b.KafkaOffset)
}

func featureDateKey(stream string, day int64) string {
	return FeaturesDir + "/stream=" + stream + "/event_date=" + dateString(time.UnixMicro(day*microsPerDay))
}

// WriteFeatures writes rows to the features table, one file <name>.parquet
// per stream and UTC date of event_time, rows sorted by key, event_time,
// offset; rows are sorted in place. name must pass ValidateName, and so
// must every row's stream. Each file appears whole or not at all, and
// writing the same name again replaces the files, so a retried archive
// step that writes the same rows under the same name is idempotent.
func (l *Lake) WriteFeatures(ctx context.Context, name string, rows []FeatureRow) ([]FileInfo, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	for i := range rows {
		if err := ValidateName(rows[i].Stream); err != nil {
			return nil, fmt.Errorf("%w: features row %d: %w", ErrBadQuery, i, err)
		}
	}
	slices.SortFunc(rows, func(a, b FeatureRow) int { return compareFeatureRows(&a, &b) })
	var files []FileInfo
	file := name + ".parquet"
	for lo := 0; lo < len(rows); {
		day := floorDiv(rows[lo].EventTime, microsPerDay)
		hi := lo + 1
		for hi < len(rows) && rows[hi].Stream == rows[lo].Stream && floorDiv(rows[hi].EventTime, microsPerDay) == day {
			hi++
		}
		key := storage.JoinKey(featureDateKey(rows[lo].Stream, day), file)
		part := rows[lo:hi]
		size, err := putRows(ctx, l, key, part, l.writerOptions(featureSorting...)...)
		if err != nil {
			return files, err
		}
		files = append(files, FileInfo{Path: key, Rows: int64(len(part)), Bytes: size})
		lo = hi
	}
	return files, nil
}

// ReadFeatures returns every row of stream in the features table whose
// event_time lies in [from, to), file by file (date order, then name
// order), each file's rows in its order.
func (l *Lake) ReadFeatures(ctx context.Context, stream string, from, to time.Time) ([]FeatureRow, error) {
	return readEventDateTable(ctx, l, FeaturesDir, stream, from, to, func(r *FeatureRow) int64 { return r.EventTime })
}

// FeatureStreams lists the streams the features table holds, in name
// order.
func (l *Lake) FeatureStreams(ctx context.Context) ([]string, error) {
	es, err := l.store.List(ctx, FeaturesDir)
	if err != nil {
		return nil, fmt.Errorf("lake: features: %w", err)
	}
	var out []string
	for _, e := range es {
		if s, ok := strings.CutPrefix(e.Name, "stream="); ok && e.Dir {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out, nil
}

// StepIntent is the offset range [From, To) an archive step of
// Topic/Partition is about to write, recorded before its files. Its files
// are named by the range, so a step that dies after writing some of them
// and before recording progress must be done again with the same range, or
// the next range's files would hold its offsets a second time: the
// archive reads the intent when it resumes (docs/adr/0036-features-archive.md).
type StepIntent struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	From      int64  `json:"from"`
	To        int64  `json:"to"`
}

func stepIntentKey(topic string, partition int32) string {
	return progressDirKey(topic) + "/partition=" + strconv.FormatInt(int64(partition), 10) + ".step.json"
}

// WriteStepIntent records s atomically, replacing the previous intent of
// its partition.
func (l *Lake) WriteStepIntent(ctx context.Context, s StepIntent) error {
	if err := ValidateTopic(s.Topic); err != nil {
		return err
	}
	if s.Partition < 0 || s.From < 0 || s.To < s.From {
		return fmt.Errorf("%w: step intent %s/%d [%d, %d)", ErrBadRange, s.Topic, s.Partition, s.From, s.To)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("lake: step intent: %w", err)
	}
	_, err = l.store.Put(ctx, stepIntentKey(s.Topic, s.Partition), func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	})
	return err
}

// ReadStepIntent returns the recorded intent of topic/partition; ok is
// false when none was recorded.
func (l *Lake) ReadStepIntent(ctx context.Context, topic string, partition int32) (s StepIntent, ok bool, err error) {
	if err := ValidateTopic(topic); err != nil {
		return s, false, err
	}
	b, err := l.store.ReadFile(ctx, stepIntentKey(topic, partition))
	if errors.Is(err, fs.ErrNotExist) {
		return s, false, nil
	}
	if err != nil {
		return s, false, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, false, fmt.Errorf("%w: step intent %s/%d: %v", ErrBadFile, topic, partition, err)
	}
	return s, true, nil
}
