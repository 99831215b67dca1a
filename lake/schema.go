package lake

import (
	"time"

	"reckon/internal/event"
)

// RawRow is one row of the raw table: an accepted event with its typed key
// and value, its payload unchanged, and its Kafka lineage. Timestamps are
// microseconds since the Unix epoch, UTC; the file schema annotates them as
// TIMESTAMP(MICROS, isAdjustedToUTC=true).
//
// Column order and names are the table's contract with DuckDB, Spark and
// pandas users; change them only with a migration.
type RawRow struct {
	EventID   string `parquet:"event_id"`
	EventType string `parquet:"event_type,dict"`
	// OccurredAt is the event time in microseconds (UTC).
	OccurredAt int64 `parquet:"occurred_at,timestamp(microsecond:utc)"`
	// IngestedAt is the Kafka record timestamp (arrival) in microseconds (UTC).
	IngestedAt int64 `parquet:"ingested_at,timestamp(microsecond:utc)"`
	// Key is the entity key taken from the stream's key path.
	Key string `parquet:"key,dict"`
	// Value is the number taken from the stream's value path (0 when the
	// table has no value path).
	Value float64 `parquet:"value"`
	// Data is the envelope's data object, byte for byte as it arrived.
	Data           string `parquet:"data"`
	KafkaPartition int32  `parquet:"kafka_partition"`
	KafkaOffset    int64  `parquet:"kafka_offset"`
}

// OccurredTime returns OccurredAt as a time.Time in UTC.
func (r *RawRow) OccurredTime() time.Time { return time.UnixMicro(r.OccurredAt).UTC() }

// IngestedTime returns IngestedAt as a time.Time in UTC.
func (r *RawRow) IngestedTime() time.Time { return time.UnixMicro(r.IngestedAt).UTC() }

// compareRaw orders rows by key, event time, event_id, then offset: the
// order of every raw file. Redeliveries of one event (same event_id, key and
// event time) are adjacent in it.
func compareRaw(a, b *RawRow) int {
	if a.Key != b.Key {
		if a.Key < b.Key {
			return -1
		}
		return 1
	}
	if a.OccurredAt != b.OccurredAt {
		if a.OccurredAt < b.OccurredAt {
			return -1
		}
		return 1
	}
	if a.EventID != b.EventID {
		if a.EventID < b.EventID {
			return -1
		}
		return 1
	}
	switch {
	case a.KafkaPartition != b.KafkaPartition:
		if a.KafkaPartition < b.KafkaPartition {
			return -1
		}
		return 1
	case a.KafkaOffset < b.KafkaOffset:
		return -1
	case a.KafkaOffset > b.KafkaOffset:
		return 1
	}
	return 0
}

// RejectedRow is one row of the rejected table: a record the quality gate
// refused, kept byte for byte with why it was refused, up to
// event.MaxKeptPrefix bytes of its value and of its key (the rule of the
// dead-letter topic's key): an oversized record keeps its first 64 KiB,
// with its size and hash, and the original stays in its topic.
type RejectedRow struct {
	// Raw is the record value as it arrived, its first
	// event.MaxKeptPrefix bytes when longer.
	Raw []byte `parquet:"raw"`
	// RecordKey is the Kafka record key as it arrived (empty when none),
	// its first event.MaxKeptPrefix bytes when longer.
	RecordKey []byte `parquet:"record_key"`
	// Reason is the first reason, machine-readable (e.g. "event_id: not a UUID").
	Reason string `parquet:"reason,dict"`
	// Reasons lists every reason found, joined with "; ".
	Reasons string `parquet:"reasons"`
	// Fields lists the failing fields, joined with ",".
	Fields         string `parquet:"fields,dict"`
	KafkaPartition int32  `parquet:"kafka_partition"`
	KafkaOffset    int64  `parquet:"kafka_offset"`
	IngestedAt     int64  `parquet:"ingested_at,timestamp(microsecond:utc)"`
	// RawBytes is the size of the whole value as it arrived, RawSHA256
	// its SHA-256: what identifies a cut value's original.
	RawBytes  int64  `parquet:"raw_bytes"`
	RawSHA256 []byte `parquet:"raw_sha256"`
	// Truncated says what was cut, as the dead-letter header does
	// ("value: N bytes, first M kept"; "; " between two cuts); empty when
	// the row holds the record whole.
	Truncated string `parquet:"truncated"`
}

// SummaryRow is one row of the summaries table: an event.Pane with
// timestamps in microseconds (UTC).
type SummaryRow struct {
	Stream      string  `parquet:"stream,dict"`
	Key         string  `parquet:"key,dict"`
	WindowStart int64   `parquet:"window_start,timestamp(microsecond:utc)"`
	WindowEnd   int64   `parquet:"window_end,timestamp(microsecond:utc)"`
	Count       int64   `parquet:"count"`
	Sum         float64 `parquet:"sum"`
	Min         float64 `parquet:"min"`
	Max         float64 `parquet:"max"`
	Version     int64   `parquet:"version"`
	Timing      string  `parquet:"timing,dict"`
	ComputedBy  string  `parquet:"computed_by,dict"`
	// Watermark is zero (the epoch) for batch corrections.
	Watermark int64 `parquet:"watermark,timestamp(microsecond:utc)"`
	EmittedAt int64 `parquet:"emitted_at,timestamp(microsecond:utc)"`
	// ProcessedAt is the pane's processing clock (event.Pane.Processed:
	// emitted_at for a pane published before processed_at existed, and
	// for batch rows); 0 in a file written before the column existed,
	// read as emitted_at (Pane, ReadPaneFigures).
	ProcessedAt int64  `parquet:"processed_at,timestamp(microsecond:utc)"`
	Reason      string `parquet:"reason"`
}

// SummaryRowOf converts a pane to its lake row.
func SummaryRowOf(p event.Pane) SummaryRow {
	return SummaryRow{
		Stream:      p.Stream,
		Key:         p.Key,
		WindowStart: micros(p.WindowStart),
		WindowEnd:   micros(p.WindowEnd),
		Count:       p.Count,
		Sum:         p.Sum,
		Min:         p.Min,
		Max:         p.Max,
		Version:     p.Version,
		Timing:      string(p.Timing),
		ComputedBy:  p.ComputedBy,
		Watermark:   micros(p.Watermark),
		EmittedAt:   micros(p.EmittedAt),
		ProcessedAt: micros(p.Processed()),
		Reason:      p.Reason,
	}
}

// Pane converts a lake row back to a pane; a zero watermark or
// processed_at becomes the zero time.Time (Pane.Processed then reads
// emitted_at).
func (r SummaryRow) Pane() event.Pane {
	p := event.Pane{
		Stream:      r.Stream,
		Key:         r.Key,
		WindowStart: time.UnixMicro(r.WindowStart).UTC(),
		WindowEnd:   time.UnixMicro(r.WindowEnd).UTC(),
		Count:       r.Count,
		Sum:         r.Sum,
		Min:         r.Min,
		Max:         r.Max,
		Version:     r.Version,
		Timing:      event.Timing(r.Timing),
		ComputedBy:  r.ComputedBy,
		EmittedAt:   time.UnixMicro(r.EmittedAt).UTC(),
		Reason:      r.Reason,
	}
	if r.Watermark != 0 {
		p.Watermark = time.UnixMicro(r.Watermark).UTC()
	}
	if r.ProcessedAt != 0 {
		p.ProcessedAt = time.UnixMicro(r.ProcessedAt).UTC()
	}
	return p
}

// micros converts t to microseconds since the epoch; the zero time.Time
// becomes 0 so "no watermark" survives a round trip.
func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}
