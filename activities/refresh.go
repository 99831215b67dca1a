package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"reckon/internal/event"
	"reckon/internal/kafkaconn"
)

// PublishRefreshInput is one late-watch step's range of the late topic.
type PublishRefreshInput struct {
	Topic     string
	Partition int32
	From, To  int64
	// Poll is how often the lake's archive progress is read while it does
	// not hold the events yet. Default 1s.
	Poll time.Duration
}

// PublishRefreshResult counts what a step published.
type PublishRefreshResult struct {
	Published int64 // refresh records
	Skipped   int64 // late records of streams where no live feature can count them, or unusable
}

// PublishRefresh publishes a state-refresh record (event.StreamRefresh,
// topic reckon-stream-refresh) for each too-late event of [From, To) of a
// late-topic partition whose stream's rolling size is longer than its
// allowed lateness (elsewhere no live feature can count a too-late event),
// once the lake holds the events (the archive past their source offsets):
// the stream worker owning the raw partition folds each into its rolling
// features (docs/adr/0040-feature-lookups.md, R-LOOK-5). A retry publishes
// the same records again; the worker applies each event_id once.
func (a *BatchTruth) PublishRefresh(ctx context.Context, in PublishRefreshInput) (PublishRefreshResult, error) {
	var res PublishRefreshResult
	if in.Poll <= 0 {
		in.Poll = time.Second
	}
	k, err := a.kafka()
	if err != nil {
		return res, err
	}
	gate, err := event.NewGate(a.Cfg.Gate)
	if err != nil {
		return res, temporal.NewNonRetryableApplicationError("truth: gate rules", ErrTypeConfig, err)
	}
	var recs []*kgo.Record
	after := map[string]map[int32]int64{} // raw topic -> partition -> highest offset
	err = k.readCommitted(ctx, in.Topic, in.Partition, in.From, in.To, func(r *kgo.Record) {
		rr, ok := a.refreshOf(gate, r)
		if !ok {
			res.Skipped++
			return
		}
		v, _ := json.Marshal(rr)
		recs = append(recs, &kgo.Record{Topic: a.Cfg.Topics.StreamRefresh,
			Key: []byte(event.RefreshKey(rr.Stream, rr.Topic, rr.Partition)), Value: v})
		if after[rr.Topic] == nil {
			after[rr.Topic] = map[int32]int64{}
		}
		after[rr.Topic][rr.Partition] = max(after[rr.Topic][rr.Partition], rr.Offset)
	})
	if err != nil {
		return res, fmt.Errorf("truth: read %s/%d: %w", in.Topic, in.Partition, err)
	}
	if len(recs) == 0 {
		return res, nil
	}
	// The lake must hold the events first: the batch has confirmed them.
	for topic, ps := range after {
		var po []PartitionOffset
		for p, o := range ps {
			po = append(po, PartitionOffset{Partition: p, Offset: o})
		}
		for {
			h, err := a.checkArchived(ctx, topic, po)
			if err != nil {
				return res, err
			}
			if h.Ready {
				break
			}
			activity.RecordHeartbeat(ctx, h.Waiting)
			select {
			case <-ctx.Done():
				return res, fmt.Errorf("truth: refresh waits for the archive (%s): %w", h.Waiting, ctx.Err())
			case <-time.After(in.Poll):
			}
		}
	}
	cl, err := kafkaconn.NewClient(a.Cfg.Kafka, "truth-refresh", kgo.ProducerLinger(0))
	if err != nil {
		return res, err
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return res, fmt.Errorf("truth: publish refresh records: %w", err)
	}
	res.Published = int64(len(recs))
	return res, nil
}

// refreshOf turns a late record into its refresh record; ok is false for a
// stream whose rolling size is not longer than its allowed lateness, or a
// record without what a refresh needs.
func (a *BatchTruth) refreshOf(gate *event.Gate, r *kgo.Record) (event.StreamRefresh, bool) {
	rr := event.StreamRefresh{Format: event.RefreshFormat, Partition: -1, Offset: -1, LateAt: r.Timestamp.UTC()}
	for _, h := range r.Headers {
		switch h.Key {
		case "reckon.stream":
			rr.Stream = string(h.Value)
		case event.HeaderSourceTopic:
			rr.Topic = string(h.Value)
		case event.HeaderSourcePartition:
			if p, err := strconv.ParseInt(string(h.Value), 10, 32); err == nil {
				rr.Partition = int32(p)
			}
		case event.HeaderSourceOffset:
			if o, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil {
				rr.Offset = o
			}
		}
	}
	st, ok := a.Cfg.StreamByName(rr.Stream)
	if !ok || st.Rolling <= st.AllowedLateness || rr.Partition < 0 || rr.Offset < 0 {
		return rr, false
	}
	if rr.Topic == "" {
		rr.Topic = st.Topic
	}
	env, _ := gate.Check(r.Value, time.Time{})
	if env == nil || env.OccurredAt.IsZero() {
		return rr, false
	}
	key, okKey := env.String("data." + st.KeyField)
	value, okValue := 0.0, true
	if st.ValueField != "" {
		value, okValue = env.Number("data." + st.ValueField)
	}
	if !okKey || key == "" || !okValue || env.EventID == "" {
		return rr, false
	}
	rr.EventID, rr.Key, rr.EventTime, rr.Value = env.EventID, key, env.OccurredAt.UTC(), value
	return rr, true
}
