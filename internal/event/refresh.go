package event

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// RefreshFormat is the version of the StreamRefresh record.
const RefreshFormat = 1

// StreamRefresh is a state-refresh record (topic reckon-stream-refresh,
// key RefreshKey): a too-late event the lake holds, for the stream worker
// owning its raw partition to fold into its rolling features inside its
// own transaction, once, deduplicated by event_id
// (docs/adr/0040-feature-lookups.md).
type StreamRefresh struct {
	Format    int       `json:"format"`
	Stream    string    `json:"stream"`
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"` // the raw record's offset
	EventID   string    `json:"event_id"`
	Key       string    `json:"key"`
	EventTime time.Time `json:"event_time"`
	Value     float64   `json:"value"`
	// LateAt is when the stream sent the event to the late topic: the
	// start of the time to fold it back.
	LateAt time.Time `json:"late_at,omitzero"`
}

// RefreshKey is the refresh topic's record key: stream|topic|partition.
func RefreshKey(stream, topic string, partition int32) string {
	return stream + "|" + topic + "|" + strconv.FormatInt(int64(partition), 10)
}

// ErrRefresh marks a refresh record that cannot be used.
var ErrRefresh = errors.New("stream refresh record")

// DecodeRefresh decodes and checks a refresh record's value.
func DecodeRefresh(b []byte) (StreamRefresh, error) {
	var r StreamRefresh
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%w: %v", ErrRefresh, err)
	}
	switch {
	case r.Format < 1 || r.Format > RefreshFormat:
		return r, fmt.Errorf("%w: format %d (this reader knows 1 to %d)", ErrRefresh, r.Format, RefreshFormat)
	case r.Stream == "" || r.Topic == "" || r.Partition < 0 || r.Key == "" || r.EventTime.IsZero():
		return r, fmt.Errorf("%w: stream %q topic %q partition %d key %q event_time %v", ErrRefresh,
			r.Stream, r.Topic, r.Partition, r.Key, r.EventTime)
	case math.IsNaN(r.Value) || math.IsInf(r.Value, 0):
		return r, fmt.Errorf("%w: value %v", ErrRefresh, r.Value)
	}
	return r, nil
}
