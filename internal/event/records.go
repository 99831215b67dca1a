package event

import (
	"strconv"
	"strings"
	"time"
)

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
	EmittedAt time.Time `json:"emitted_at"`
	// Reason explains a correction (late events beyond lateness, missing
	// pane, duplicates); empty for stream panes.
	Reason string `json:"reason,omitempty"`
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
	EmittedAt time.Time     `json:"emitted_at"`
}

// DeadLetter describes a record that reckon refused or could not process.
// The dead-letter topic carries the original bytes unchanged as the value,
// the original key, and these fields as headers (see Headers), so nothing
// about the source is lost.
type DeadLetter struct {
	Reason          string    // machine-readable first reason, e.g. "data.suhu_c: above max 60"
	Reasons         []string  // every reason found
	Fields          []string  // failing fields: envelope names, data.<name>
	SourceTopic     string    //
	SourcePartition int32     //
	SourceOffset    int64     //
	SourceTimestamp time.Time // the record's Kafka timestamp (arrival)
	DeadAt          time.Time // when reckon dead-lettered it
	Attempts        int       // processing attempts before giving up (1 for gate rejections)
	Stage           string    // "gate" or "process"
}

// Dead-letter header names.
const (
	HeaderReason          = "reckon.reason"
	HeaderReasons         = "reckon.reasons"
	HeaderFields          = "reckon.fields"
	HeaderSourceTopic     = "reckon.source.topic"
	HeaderSourcePartition = "reckon.source.partition"
	HeaderSourceOffset    = "reckon.source.offset"
	HeaderSourceTimestamp = "reckon.source.timestamp"
	HeaderDeadAt          = "reckon.dead_at"
	HeaderAttempts        = "reckon.attempts"
	HeaderStage           = "reckon.stage"
	// HeaderTruncated marks a dead letter whose key or value was cut to fit
	// the broker's record limit (the original stays at the source offset).
	HeaderTruncated = "reckon.truncated"
)

// Header is a transport-neutral key/value header.
type Header struct {
	Key   string
	Value []byte
}

// Headers renders d as record headers. Lists are joined with "; " for
// reasons and "," for fields.
func (d DeadLetter) Headers() []Header {
	h := []Header{
		{HeaderReason, []byte(d.Reason)},
		{HeaderReasons, []byte(strings.Join(d.Reasons, "; "))},
		{HeaderFields, []byte(strings.Join(d.Fields, ","))},
		{HeaderSourceTopic, []byte(d.SourceTopic)},
		{HeaderSourcePartition, []byte(strconv.FormatInt(int64(d.SourcePartition), 10))},
		{HeaderSourceOffset, []byte(strconv.FormatInt(d.SourceOffset, 10))},
		{HeaderSourceTimestamp, []byte(d.SourceTimestamp.UTC().Format(time.RFC3339Nano))},
		{HeaderDeadAt, []byte(d.DeadAt.UTC().Format(time.RFC3339Nano))},
		{HeaderAttempts, []byte(strconv.Itoa(d.Attempts))},
		{HeaderStage, []byte(d.Stage)},
	}
	return h
}
