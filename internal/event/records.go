package event

import "time"

// Timing says why a pane was emitted.
type Timing string

// Pane timings. A window's panes carry increasing versions; consumers keep the
// highest version per (stream, key, window_start).
const (
	TimingEarly      Timing = "early"      // window still open, emitted every emit_interval while dirty
	TimingOnTime     Timing = "on_time"    // watermark passed the window end
	TimingLate       Timing = "late"       // accepted event for an already fired window, within allowed lateness
	TimingCorrection Timing = "correction" // batch recompute found the truth differs
)

// Producers of panes.
const (
	ComputedByStream = "stream"
	ComputedByBatch  = "batch"
)

// Pane is one emission of a tumbling window's aggregate. It is the value of
// the summaries topic (compacted by RecordKey) and a row of the lake's
// summaries table.
type Pane struct {
	Stream      string    `json:"stream"`
	Key         string    `json:"key"`
	WindowStart time.Time `json:"window_start"`
	WindowEnd   time.Time `json:"window_end"`
	Count       int64     `json:"count"`
	Sum         float64   `json:"sum"`
	Min         float64   `json:"min"`
	Max         float64   `json:"max"`
	Version     int64     `json:"version"`
	Timing      Timing    `json:"timing"`
	ComputedBy  string    `json:"computed_by"`
	// Watermark is the partition watermark when the pane was emitted; zero
	// for batch corrections.
	Watermark time.Time `json:"watermark"`
	// EmittedAt is when the pane was published: for a stream pane the
	// stream worker's clock as it handed the record to its transaction
	// (also the Kafka record timestamp), for a correction the batch's clock
	// when it published. Latency is measured from it.
	EmittedAt time.Time `json:"emitted_at"`
	// ProcessedAt is the clock the pane's content stands on: for a stream
	// pane the stream's processing clock when the operator made it (the
	// arrival, Kafka timestamp, of the latest record the partition had
	// received, or the idle tick's instant on that clock — the clock of
	// progress records' processing_time); for a correction the same instant
	// as EmittedAt. The batch compares event arrivals with it (which events
	// came after the pane) and the verification with progress records.
	// Records written before it existed lack it: read it with Processed.
	// (docs/ARCHITECTURE.md "Output times".)
	ProcessedAt time.Time `json:"processed_at"`
	// Reason explains a correction (late events beyond lateness, missing
	// pane, duplicates); empty for stream panes.
	Reason string `json:"reason,omitempty"`
}

// Processed is the pane's processing clock: ProcessedAt, or EmittedAt for
// a pane published before processed_at existed (then emitted_at was that
// clock).
func (p Pane) Processed() time.Time {
	if p.ProcessedAt.IsZero() {
		return p.EmittedAt
	}
	return p.ProcessedAt
}

// RecordKey is the Kafka record key of a pane: stream|key|window_start, with
// window_start in RFC 3339 UTC. Compaction keeps the latest pane per window.
func (p Pane) RecordKey() string {
	return WindowKey(p.Stream, p.Key, p.WindowStart)
}

// WindowKey builds the identity of a window as used for pane record keys.
func WindowKey(stream, key string, windowStart time.Time) string {
	return stream + "|" + key + "|" + windowStart.UTC().Format(time.RFC3339)
}

// Feature is a rolling feature value computed for one accepted event (seed
// 000): count and sum of the key's accepted events in (EventTime-Size, EventTime].
type Feature struct {
	Stream    string        `json:"stream"`
	Key       string        `json:"key"`
	EventID   string        `json:"event_id"`
	EventTime time.Time     `json:"event_time"`
	Size      time.Duration `json:"size_ns"`
	Count     int64         `json:"count"`
	Sum       float64       `json:"sum"`
	Watermark time.Time     `json:"watermark"`
	// EmittedAt is when the feature was produced: the stream worker's clock
	// as it hands the record to its transaction (also the Kafka record
	// timestamp). Latency from an event to its feature is EmittedAt (or
	// when a reader sees it) minus the event's time, not ArrivedAt.
	EmittedAt time.Time `json:"emitted_at"`
	// ArrivedAt is the source record's arrival: its Kafka record timestamp
	// (the broker's append time on reckon's raw topics).
	ArrivedAt time.Time `json:"arrived_at"`
	// SourceTopic, SourcePartition and SourceOffset are the source record's
	// place on its raw topic: the lake's raw row of the event the feature
	// was served for (kafka_partition, kafka_offset).
	SourceTopic     string `json:"source_topic"`
	SourcePartition int32  `json:"source_partition"`
	SourceOffset    int64  `json:"source_offset"`
}
