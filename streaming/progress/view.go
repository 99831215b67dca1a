// Package progress reads the stream's published progress (the compacted
// progress topic; docs/adr/0015-stream-progress.md) for the batch side.
package progress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/event"
)

// View follows the stream's progress topic and keeps the latest
// committed record per (stream, topic, partition): what the batch reads to
// know which windows the stream has closed for good
// (docs/adr/0015-stream-progress.md). It is built once per batch worker;
// its methods are safe for concurrent use.
type View struct {
	topic string
	cl    *kgo.Client
	adm   *kadm.Client
	log   *slog.Logger

	mu     sync.Mutex
	latest map[string]event.StreamProgress
	pos    map[int32]int64 // next offset to read per partition (records and markers seen)
	bad    int             // records that did not decode (logged, skipped)
	moved  chan struct{}   // closed and replaced whenever pos moves

	stop func()
	done chan struct{}
}

// Options configure a View. The wiring maps the config onto them
// (workers: topics.stream_progress and the kafka section).
type Options struct {
	// Topic is the stream's compacted progress topic. Required.
	Topic string
	// Kafka are the client options that reach the brokers (seeds, TLS,
	// SASL: kafkaconn.Options). Required; the View adds its own consume
	// options.
	Kafka []kgo.Opt
}

// Validate reports every problem with o at once.
func (o Options) Validate() error {
	var errs []error
	if o.Topic == "" {
		errs = append(errs, errors.New("progress: Options.Topic is empty"))
	}
	if len(o.Kafka) == 0 {
		errs = append(errs, errors.New("progress: Options.Kafka is empty"))
	}
	return errors.Join(errs...)
}

// NewView starts following the progress topic from its start.
// Close stops it.
func NewView(o Options, log *slog.Logger) (*View, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	topic := o.Topic
	cl, err := kgo.NewClient(append(slices.Clip(o.Kafka),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Every progress record is transactional, so the log ends with a
		// marker: delivered too, the read position reaches the last stable
		// offset exactly (Sync) instead of stopping one short of it.
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return nil, fmt.Errorf("progress: view: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	v := &View{
		topic: topic, cl: cl, adm: kadm.NewClient(cl), log: log,
		latest: map[string]event.StreamProgress{}, pos: map[int32]int64{}, moved: make(chan struct{}),
		stop: cancel, done: make(chan struct{}),
	}
	go v.run(ctx)
	return v, nil
}

// Close stops following the topic.
func (v *View) Close() {
	v.stop()
	<-v.done
	v.cl.Close()
}

func (v *View) run(ctx context.Context) {
	defer close(v.done)
	for {
		fs := v.cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		v.mu.Lock()
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				v.log.Warn("stream progress: fetch error; retrying", "topic", t, "partition", p, "err", err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			v.pos[r.Partition] = max(v.pos[r.Partition], r.Offset+1)
			if r.Attrs.IsControl() {
				return
			}
			p, err := event.DecodeProgress(r.Value)
			if err != nil {
				v.bad++
				v.log.Warn("stream progress: record skipped", "partition", r.Partition, "offset", r.Offset, "err", err)
				return
			}
			// A key's records sit in one partition in commit order: the
			// last one read is the newest.
			v.latest[p.Key()] = p
		})
		close(v.moved)
		v.moved = make(chan struct{})
		v.mu.Unlock()
	}
}

// Sync waits until the view has read everything committed to the progress
// topic when it was called (its last stable offsets), so a Get after it
// sees every progress record committed before the call.
func (v *View) Sync(ctx context.Context) error {
	ends, err := v.adm.ListCommittedOffsets(ctx, v.topic)
	if err != nil {
		return fmt.Errorf("progress: topic %s: %w", v.topic, err)
	}
	if err := ends.Error(); err != nil {
		return fmt.Errorf("progress: topic %s: %w (run `reckon topics apply`; a stream older than the progress topic "+
			"publishes nothing)", v.topic, err)
	}
	for {
		v.mu.Lock()
		behind := ""
		ends.Each(func(o kadm.ListedOffset) {
			if at := v.pos[o.Partition]; at < o.Offset && behind == "" {
				behind = fmt.Sprintf("%s/%d read to %d of %d", v.topic, o.Partition, at, o.Offset)
			}
		})
		moved := v.moved
		v.mu.Unlock()
		if behind == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("progress: view behind (%s): %w", behind, ctx.Err())
		case <-moved:
		case <-time.After(time.Second): // look again even if nothing was read
		}
	}
}

// Get returns the latest progress of stream on topic/partition.
func (v *View) Get(stream, topic string, partition int32) (event.StreamProgress, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	p, ok := v.latest[event.ProgressKey(stream, topic, partition)]
	return p, ok
}
