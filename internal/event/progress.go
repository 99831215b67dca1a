package event

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ProgressFormat is the version of the StreamProgress record. A reader
// refuses a record of a newer format instead of guessing at it.
const ProgressFormat = 1

// StreamProgress is the stream's published progress on one raw partition
// for one stream: the value of the compacted progress topic (key
// ProgressKey), written in the same Kafka transaction as the outputs, the
// operator state and the consumer offsets it describes
// (docs/adr/0015-stream-progress.md). A committed record is therefore a
// true statement about the stream at NextOffset; the next record for the
// same key never goes backwards.
type StreamProgress struct {
	Format    int    `json:"format"`
	Stream    string `json:"stream"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// NextOffset is the consumer offset committed with this record: every
	// record before it has been processed.
	NextOffset int64 `json:"next_offset"`
	// Watermark is the partition watermark (zero: none yet, no record of
	// the stream's event types processed).
	Watermark time.Time `json:"watermark,omitzero"`
	// MaxEventTime is the watermark's basis: the maximum over processed
	// records of min(occurred_at, record timestamp).
	MaxEventTime time.Time `json:"max_event_time,omitzero"`
	// ProcessingTime is the operator's processing clock (record timestamps
	// and ticks).
	ProcessingTime time.Time `json:"processing_time,omitzero"`
	// PurgedThrough is watermark − allowed_lateness: every window ending at
	// or before it has been purged for good; the stream will publish no
	// pane of it again and sends its events to the late topic. Zero while
	// there is no watermark or the lateness is unbounded.
	PurgedThrough time.Time `json:"purged_through,omitzero"`
	// Settings is the digest of the stream's window settings
	// (config.Stream.SettingsDigest): a batch with other settings must not
	// use this progress.
	Settings string `json:"settings"`
	// PublishedAt is the worker's wall clock when it wrote the record.
	PublishedAt time.Time `json:"published_at"`
	// Serve is the feature-lookup address of the worker that owns the
	// partition (stream_worker.serve_advertise), where other workers
	// forward a lookup of a key in it; "" when that worker serves none
	// (docs/adr/0040-feature-lookups.md).
	Serve string `json:"serve,omitempty"`
}

// ProgressKey is the progress topic's record key: stream|topic|partition.
func ProgressKey(stream, topic string, partition int32) string {
	return stream + "|" + topic + "|" + strconv.FormatInt(int64(partition), 10)
}

// Key returns p's record key.
func (p StreamProgress) Key() string { return ProgressKey(p.Stream, p.Topic, p.Partition) }

// ErrProgress marks a progress record that cannot be used.
var ErrProgress = errors.New("stream progress record")

// DecodeProgress decodes and checks a progress record's value.
func DecodeProgress(b []byte) (StreamProgress, error) {
	var p StreamProgress
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("%w: %v", ErrProgress, err)
	}
	switch {
	case p.Format < 1:
		return p, fmt.Errorf("%w: format %d", ErrProgress, p.Format)
	case p.Format > ProgressFormat:
		return p, fmt.Errorf("%w: format %d is newer than this reader's %d: upgrade the batch worker", ErrProgress, p.Format, ProgressFormat)
	case p.Stream == "" || p.Topic == "" || p.Partition < 0 || p.NextOffset < 0:
		return p, fmt.Errorf("%w: stream %q topic %q partition %d next_offset %d", ErrProgress, p.Stream, p.Topic, p.Partition, p.NextOffset)
	case !p.PurgedThrough.IsZero() && p.Watermark.IsZero():
		return p, fmt.Errorf("%w: purged_through without a watermark", ErrProgress)
	}
	return p, nil
}
