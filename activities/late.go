package activities

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/sdk/temporal"

	"reckon/internal/event"
)

// LateItem is one too-late event: the window it belongs to and where the
// lake must have archived it before the window can be recomputed.
type LateItem struct {
	Key         string    `json:"key"`
	WindowStart time.Time `json:"window_start"`
	WindowEnd   time.Time `json:"window_end"`
	// SourcePartition/SourceOffset locate the raw record.
	SourcePartition int32 `json:"source_partition"`
	SourceOffset    int64 `json:"source_offset"`
	// EventTime is occurred_at; LateAt the late record's timestamp (when
	// the stream sent it to the late topic).
	EventTime time.Time `json:"event_time"`
	LateAt    time.Time `json:"late_at"`
}

// ReadLateInput is one step of a late-topic watcher.
type ReadLateInput struct {
	Topic     string
	Partition int32
	// From is the first offset to read; -1 starts at the current end (a
	// fresh watcher leaves older late events to the daily reconciliation).
	From int64
	// MaxRecords per step. Default 10,000.
	MaxRecords int
	// Wait is how long to wait for records when caught up. Default 5s.
	Wait time.Duration
}

// ReadLateResult is what one step read and signalled.
type ReadLateResult struct {
	Next     int64
	Records  int64
	Items    int64
	Skipped  int64    // records without a usable stream, key or event time
	Streams  []string // streams signalled
	CaughtUp bool
}

// ReadLate reads committed late records of one partition from From,
// waiting up to Wait for the first ones, turns each into the (stream, key,
// window) it belongs to, and signals every stream's correction workflow
// with its items. A retry signals the same items again; the correction
// workflow keeps a set, and a repeated recompute publishes nothing new.
// A worker stop cuts the wait short with the context's error: the batch
// worker reports that as a benign failure (workers/quietstop.go) and the
// next worker's retry reads from From again, so nothing read but not yet
// signalled is lost.
func (a *BatchTruth) ReadLate(ctx context.Context, in ReadLateInput) (ReadLateResult, error) {
	if in.MaxRecords <= 0 {
		in.MaxRecords = 10_000
	}
	if in.Wait <= 0 {
		in.Wait = 5 * time.Second
	}
	res := ReadLateResult{Next: in.From}
	k, err := a.kafka()
	if err != nil {
		return res, err
	}
	adm := k.Admin
	end, err := lastStable(ctx, adm, in.Topic, in.Partition)
	if err != nil {
		return res, err
	}
	if in.From < 0 || in.From > end {
		in.From, res.Next = end, end
	}
	gate, err := event.NewGate(a.Cfg.Gate)
	if err != nil {
		return res, temporal.NewNonRetryableApplicationError("truth: gate rules", ErrTypeConfig, err)
	}
	items := map[string][]LateItem{}
	var streams []string
	deadline := time.Now().Add(in.Wait)
	for res.Records < int64(in.MaxRecords) {
		// Each read waits at most maxFetchWait at the broker; the loop
		// waits out the rest of Wait.
		recs, next, err := k.fetch(ctx, in.Topic, in.Partition, res.Next, fetchOpts{wait: time.Until(deadline), keepControl: true})
		if err != nil {
			return res, fmt.Errorf("truth: read %s/%d: %w", in.Topic, in.Partition, err)
		}
		got, full := false, false
		for _, r := range recs {
			if res.Records >= int64(in.MaxRecords) {
				full = true
				break
			}
			if r.Offset < res.Next {
				continue
			}
			res.Next = r.Offset + 1
			if r.Attrs.IsControl() {
				continue
			}
			got = true
			res.Records++
			s, its, ok := a.lateItems(gate, r)
			if !ok {
				res.Skipped++
				continue
			}
			if _, seen := items[s]; !seen {
				streams = append(streams, s)
			}
			items[s] = append(items[s], its...)
			res.Items += int64(len(its))
		}
		if !full && next > res.Next {
			res.Next = next // past aborted batches
		}
		// Return as soon as something came (after a short linger for the
		// rest of a burst), or when the wait is over.
		if got && time.Until(deadline) > 200*time.Millisecond {
			deadline = time.Now().Add(200 * time.Millisecond)
		}
		if time.Now().After(deadline) {
			break
		}
	}
	for _, s := range streams {
		if a.SignalLate == nil {
			return res, temporal.NewNonRetryableApplicationError("truth: no SignalLate wired", ErrTypeConfig, nil)
		}
		if err := a.SignalLate(ctx, s, items[s]); err != nil {
			return res, fmt.Errorf("truth: signal correction of %s: %w", s, err)
		}
	}
	res.Streams = streams
	if end2, err := lastStable(ctx, adm, in.Topic, in.Partition); err == nil {
		res.CaughtUp = res.Next >= end2
	}
	return res, nil
}

// lateItems decodes a late record: the stream from its header, the key
// from the original envelope (the stream's key field), the windows from
// the event time — one for tumbling windows, every window covering it for
// hopping ones (window/hop, in start order: the stream sent the event to
// the late topic because all of them were purged, docs/adr/0041).
func (a *BatchTruth) lateItems(gate *event.Gate, r *kgo.Record) (string, []LateItem, bool) {
	stream, it, ok := a.lateItem(gate, r)
	if !ok {
		return "", nil, false
	}
	st, _ := a.Cfg.StreamByName(stream)
	hop := st.Step()
	its := make([]LateItem, 0, st.Window/hop)
	last := it.EventTime.Truncate(hop)
	for s := last.Add(hop - st.Window); !s.After(last); s = s.Add(hop) {
		it.WindowStart, it.WindowEnd = s, s.Add(st.Window)
		its = append(its, it)
	}
	return stream, its, true
}

// lateItem decodes a late record into its stream and item, the window
// left to lateItems.
func (a *BatchTruth) lateItem(gate *event.Gate, r *kgo.Record) (string, LateItem, bool) {
	var stream string
	it := LateItem{LateAt: r.Timestamp.UTC(), SourcePartition: -1, SourceOffset: -1}
	for _, h := range r.Headers {
		switch h.Key {
		case "reckon.stream":
			stream = string(h.Value)
		case event.HeaderSourcePartition:
			if p, err := strconv.ParseInt(string(h.Value), 10, 32); err == nil {
				it.SourcePartition = int32(p)
			}
		case event.HeaderSourceOffset:
			if o, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil {
				it.SourceOffset = o
			}
		}
	}
	st, ok := a.Cfg.StreamByName(stream)
	if !ok || st.Window <= 0 || it.SourcePartition < 0 || it.SourceOffset < 0 {
		return "", it, false
	}
	// A zero arrival skips the skew checks: the stream judged the record
	// at its arrival already; here only its key and event time matter.
	env, _ := gate.Check(r.Value, time.Time{})
	if env == nil {
		return "", it, false
	}
	key, ok := env.String("data." + st.KeyField)
	if !ok || key == "" || env.OccurredAt.IsZero() {
		return "", it, false
	}
	it.Key = key
	it.EventTime = env.OccurredAt.UTC()
	return stream, it, true
}
