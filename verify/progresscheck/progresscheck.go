// Package progresscheck checks, over everything committed to the stream's
// progress and summaries topics, the invariants the batch relies on when it
// decides from the stream's published progress that a window is final
// (docs/adr/0015-stream-progress.md, docs/requirements.md R-TRUTH-5):
//
//   - per progress key (stream|topic|partition), in offset order, no field
//     goes backwards: next_offset, watermark (once there is one),
//     max_event_time, purged_through and processing_time;
//   - no stream pane is of a window that a progress record of its
//     partition, committed in an earlier transaction, declared purged
//     (window_end ≤ purged_through): the batch may already have corrected
//     that window;
//   - no (stream, key, window_start, version) is published twice, by the
//     stream or the batch.
//
// It is for integration tests on real components (kfake, the stream worker,
// the batch on Temporal); it reads with read-committed consumers up to the
// last stable offsets, so it sees exactly what consumers see.
package progresscheck

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
)

// Committed is what the stream and the batch have committed, read back.
type Committed struct {
	// Progress holds every committed progress record, in offset order
	// within each partition of the progress topic.
	Progress []event.StreamProgress
	// Panes holds every committed pane, in offset order within each
	// partition of the summaries topic.
	Panes []event.Pane
	// Raw holds, per raw topic and partition, every committed raw record
	// in offset order.
	Raw map[string]map[int32][]*kgo.Record
	// partitions maps stream|key to the raw partitions holding that
	// stream's events of key.
	partitions map[string][]int32
}

// Read reads everything committed to cfg's progress and summaries topics
// and to the raw topics of its streams.
func Read(ctx context.Context, cfg *config.Config) (*Committed, error) {
	c := &Committed{Raw: map[string]map[int32][]*kgo.Record{}, partitions: map[string][]int32{}}
	err := kafkaconn.ReadTopic(ctx, cfg.Kafka, "progresscheck", cfg.Topics.StreamProgress, func(r *kgo.Record) error {
		p, err := event.DecodeProgress(r.Value)
		if err != nil {
			return fmt.Errorf("progress record %d/%d: %w", r.Partition, r.Offset, err)
		}
		c.Progress = append(c.Progress, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = kafkaconn.ReadTopic(ctx, cfg.Kafka, "progresscheck", cfg.Topics.Summaries, func(r *kgo.Record) error {
		var p event.Pane
		if err := json.Unmarshal(r.Value, &p); err != nil {
			return fmt.Errorf("pane %d/%d: %w", r.Partition, r.Offset, err)
		}
		c.Panes = append(c.Panes, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, s := range cfg.Streams {
		if _, done := c.Raw[s.Topic]; done {
			continue
		}
		byPart := map[int32][]*kgo.Record{}
		c.Raw[s.Topic] = byPart
		if err := kafkaconn.ReadTopic(ctx, cfg.Kafka, "progresscheck", s.Topic, func(r *kgo.Record) error {
			byPart[r.Partition] = append(byPart[r.Partition], r)
			return nil
		}); err != nil {
			return nil, err
		}
	}
	for _, s := range cfg.Streams {
		for p, recs := range c.Raw[s.Topic] {
			for _, r := range recs {
				e, ok := decode(r.Value)
				if !ok || !slices.Contains(s.EventTypes, e.EventType) {
					continue
				}
				key, ok := e.Data[s.KeyField].(string)
				if !ok {
					continue
				}
				k := s.Name + "|" + key
				if !slices.Contains(c.partitions[k], p) {
					c.partitions[k] = append(c.partitions[k], p)
				}
			}
		}
	}
	return c, nil
}

// Envelope is the part of a raw event the checks read.
type Envelope struct {
	EventID    string         `json:"event_id"`
	EventType  string         `json:"event_type"`
	OccurredAt time.Time      `json:"occurred_at"`
	Data       map[string]any `json:"data"`
}

func decode(b []byte) (Envelope, bool) {
	var e Envelope
	return e, json.Unmarshal(b, &e) == nil
}

// Decode decodes a raw record's envelope; ok is false for a record that is
// not one (poison).
func Decode(r *kgo.Record) (Envelope, bool) { return decode(r.Value) }

// Of returns the committed progress records of one key, in offset order.
func (c *Committed) Of(stream, topic string, partition int32) []event.StreamProgress {
	var out []event.StreamProgress
	for _, p := range c.Progress {
		if p.Stream == stream && p.Topic == topic && p.Partition == partition {
			out = append(out, p)
		}
	}
	return out
}

// Violations returns every broken invariant (see the package doc), one
// line each; cfg gives each stream's topic.
func (c *Committed) Violations(cfg *config.Config) []string {
	var out []string
	byKey := map[string][]event.StreamProgress{}
	var keys []string
	for _, p := range c.Progress {
		k := p.Key()
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], p)
	}
	for _, k := range keys {
		out = append(out, monotonic(k, byKey[k])...)
	}

	type version struct {
		window  string
		version int64
	}
	seen := map[version]event.Pane{}
	for _, p := range c.Panes {
		v := version{p.RecordKey(), p.Version}
		if prev, dup := seen[v]; dup {
			out = append(out, fmt.Sprintf("%s: version %d published twice (%s %s count %d, then %s %s count %d)",
				v.window, v.version, prev.ComputedBy, prev.Timing, prev.Count, p.ComputedBy, p.Timing, p.Count))
		}
		seen[v] = p
	}

	for _, p := range c.Panes {
		if p.ComputedBy != event.ComputedByStream {
			continue
		}
		st, ok := cfg.StreamByName(p.Stream)
		if !ok {
			out = append(out, fmt.Sprintf("%s: pane of a stream not in the config", p.RecordKey()))
			continue
		}
		parts := c.partitions[p.Stream+"|"+p.Key]
		if len(parts) != 1 {
			// The stream keys windows per partition; a key on several
			// partitions (or none) has no one progress to compare with.
			out = append(out, fmt.Sprintf("%s: key %q is on raw partitions %v of %s: cannot tell which progress it follows", p.RecordKey(), p.Key, parts, st.Topic))
			continue
		}
		// Which progress records were committed in an earlier transaction
		// than the pane's? Kafka orders records across two topics for
		// nobody, so the order is taken from the operator's processing
		// clock, which never goes back on a partition (the first check
		// holds it to that) and is restored with the state: the pane's
		// processed_at (event.Pane.Processed) is the clock when it was made,
		// and a progress record carries the clock when its transaction
		// committed. A record of the pane's own transaction, or a later
		// one, therefore has processing_time ≥ processed_at; one with
		// processing_time < processed_at was committed before. (Records of earlier transactions
		// with the same clock are not compared: the check is sound, never
		// complete.) The pane's own watermark field cannot serve instead:
		// an advance that fires a window and purges it in one step (or
		// flushes a held late pane as it purges) emits a pane whose
		// watermark is already past end + allowed_lateness, committed in
		// the same transaction as the purge, which is safe.
		for _, r := range byKey[event.ProgressKey(p.Stream, st.Topic, parts[0])] {
			if !r.ProcessingTime.Before(p.Processed()) || r.PurgedThrough.IsZero() {
				continue
			}
			if !p.WindowEnd.After(r.PurgedThrough) {
				out = append(out, fmt.Sprintf("%s: stream pane v%d (%s, processed at %s, watermark %s) of a window ending %s, which %s/%d's progress had declared purged through %s (committed at processing time %s, next_offset %d)",
					p.RecordKey(), p.Version, p.Timing, stamp(p.Processed()), stamp(p.Watermark), stamp(p.WindowEnd),
					st.Topic, parts[0], stamp(r.PurgedThrough), stamp(r.ProcessingTime), r.NextOffset))
				break
			}
		}
	}
	return out
}

// monotonic checks that no field of key's records goes backwards.
func monotonic(key string, rs []event.StreamProgress) []string {
	var out []string
	for i := 1; i < len(rs); i++ {
		a, b := rs[i-1], rs[i]
		back := func(field string, x, y time.Time) {
			if y.Before(x) {
				out = append(out, fmt.Sprintf("%s: %s went back from %s to %s (next_offset %d → %d)", key, field, stamp(x), stamp(y), a.NextOffset, b.NextOffset))
			}
		}
		if b.NextOffset < a.NextOffset {
			out = append(out, fmt.Sprintf("%s: next_offset went back from %d to %d", key, a.NextOffset, b.NextOffset))
		}
		if !a.Watermark.IsZero() && b.Watermark.IsZero() {
			out = append(out, fmt.Sprintf("%s: watermark %s lost (next_offset %d → %d)", key, stamp(a.Watermark), a.NextOffset, b.NextOffset))
		}
		back("watermark", a.Watermark, b.Watermark)
		back("max_event_time", a.MaxEventTime, b.MaxEventTime)
		back("purged_through", a.PurgedThrough, b.PurgedThrough)
		back("processing_time", a.ProcessingTime, b.ProcessingTime)
	}
	return out
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "(none)"
	}
	return t.UTC().Format("15:04:05.000")
}
