package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"reckon/internal/config"
	"reckon/internal/kafkaconn"
)

// Kafka is the long-lived read side of Kafka that the batch activities
// share: one client, built once per process by the wiring (NewKafka) and
// closed on worker shutdown (Close), instead of a client per activity call.
// It serves admin requests (offsets, metadata, group offsets) through Admin
// and reads offset ranges of single partitions. It is safe for concurrent
// use by any number of activity executions.
//
// Ranged reads are plain Fetch requests, not a consumer: a kgo client
// consuming partitions by direct assignment keeps one consume position per
// partition and one poll loop, so activities of different partitions (or a
// timed-out attempt still running beside its retry) sharing it would
// receive each other's records. A Fetch names its partition and offset and
// keeps no state: each read sends its own to the partition's leader on the
// shared client and decodes the answer with kgo.ProcessFetchPartition
// (decompression, read-committed filtering of aborted transactions,
// transaction markers), as a read-committed consumer sees the partition.
// Fetches to one broker share the client's fetch connection, which a
// broker serves one request at a time, so no read lets the broker hold it:
// a read waiting for new records asks again every fetchPoll, for at most
// maxFetchWait per fetch call.
//
// Transactional producers are not here: a correction's producer carries a
// transactional id per (stream, day) that fences the other recomputes of
// that day, so RecomputeWindows builds one per publish (publishFenced).
type Kafka struct {
	// Admin serves offsets, metadata and group offsets.
	Admin *kadm.Client
	cl    *kgo.Client
	dec   kgo.Decompressor

	mu     sync.Mutex // protects following fields
	routes map[string]topicRoute
}

// topicRoute is where a topic's partitions are read: its id (Fetch v13+
// names topics by id) and each partition's leader.
type topicRoute struct {
	id      [16]byte
	leaders map[int32]int32
}

// maxFetchWait bounds how long one fetch call waits for a record at its
// offset (asking every fetchPoll); callers loop for longer waits.
const maxFetchWait = 500 * time.Millisecond

// NewKafka returns the read side for cfg; role is appended to the client
// id. The client dials on its first request. A TLS file that cannot be
// loaded fails here.
func NewKafka(cfg config.Kafka, role string) (*Kafka, error) {
	opts, err := kafkaconn.Options(cfg, role)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("activities: kafka: %w", err)
	}
	return &Kafka{Admin: kadm.NewClient(cl), cl: cl, dec: kgo.DefaultDecompressor(), routes: map[string]topicRoute{}}, nil
}

// Close closes the client. Reads in flight fail.
func (k *Kafka) Close() { k.cl.Close() }

// lazyKafka builds a Kafka on first use for an activity struct whose Kafka
// field was left nil (a test or a benchmark building the struct by hand);
// it lives, unclosed, as long as the struct. The worker wiring always sets
// the field and closes what it built.
type lazyKafka struct {
	once sync.Once
	k    *Kafka
	err  error
}

func (l *lazyKafka) get(set *Kafka, cfg config.Kafka, role string) (*Kafka, error) {
	if set != nil {
		return set, nil
	}
	l.once.Do(func() {
		l.k, l.err = NewKafka(cfg, role)
		if l.err != nil {
			l.err = temporal.NewNonRetryableApplicationError(l.err.Error(), ErrTypeConfig, l.err)
		}
	})
	return l.k, l.err
}

// fetchOpts shape one Fetch.
type fetchOpts struct {
	// maxBytes bounds the answer. Zero means kafkaconn.MaxRecordBytes. A
	// first batch larger than it still comes whole.
	maxBytes int32
	// wait is how long fetch waits for a record at the offset, asking
	// again every fetchPoll. It is capped at maxFetchWait.
	wait time.Duration
	// keepControl returns transaction markers too (Attrs.IsControl).
	keepControl bool
}

// fetch reads topic/partition from offset with Fetches to the partition's
// leader, as a read-committed consumer sees it: committed records (never
// aborted ones; markers too if keepControl), and next, the offset after
// the last batch the answer covered — past aborted batches and markers as
// well. No record and next == offset: nothing is readable at offset yet.
// An offset below the log start (deleted by retention) moves next to the
// log start, as a consumer resetting to the start would. A leader that
// moved is looked up again, at most twice: a client's normal recovery, not
// a retry policy.
func (k *Kafka) fetch(ctx context.Context, topic string, partition int32, offset int64,
	o fetchOpts) ([]*kgo.Record, int64, error) {
	// The broker answers at once (MaxWaitMillis 0) and the wait happens
	// here, between short reads: a read held at the broker would hold the
	// client's one fetch connection to it, and every other activity's read
	// on that broker would queue behind it (a long-polling ReadLate added
	// about a second to each targeted correction).
	deadline := time.Now().Add(min(max(o.wait, 0), maxFetchWait))
	for {
		recs, next, err := k.fetchNow(ctx, topic, partition, offset, o)
		if err != nil || len(recs) > 0 || next != offset {
			return recs, next, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return recs, next, nil
		}
		select {
		case <-ctx.Done():
			return nil, offset, ctx.Err()
		case <-time.After(min(left, fetchPoll)):
		}
	}
}

// fetchPoll is how often a waiting read asks again: ten requests a second
// per waiting partition (a LateWatch reads its late partition all the
// time). 25, 50 and 100 ms gave the same targeted time to truth within
// run-to-run noise (docs/benchmarks-notes.md).
const fetchPoll = 100 * time.Millisecond

// fetchNow is fetch without waiting: one answer, right away.
func (k *Kafka) fetchNow(ctx context.Context, topic string, partition int32, offset int64,
	o fetchOpts) ([]*kgo.Record, int64, error) {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			k.forget(topic)
			select {
			case <-ctx.Done():
				return nil, offset, ctx.Err()
			case <-time.After(time.Duration(100<<attempt) * time.Millisecond):
			}
		}
		var recs []*kgo.Record
		var next int64
		var again bool
		recs, next, again, err = k.fetchOnce(ctx, topic, partition, offset, o)
		if !again {
			return recs, next, err
		}
	}
	return nil, offset, err
}

// fetchOnce is one attempt of fetch; again says whether a fresh leader
// lookup may help.
func (k *Kafka) fetchOnce(ctx context.Context, topic string, partition int32, offset int64,
	o fetchOpts) (recs []*kgo.Record, next int64, again bool, err error) {
	rt, err := k.route(ctx, topic)
	if err != nil {
		return nil, offset, true, err
	}
	leader, ok := rt.leaders[partition]
	if !ok || leader < 0 {
		return nil, offset, true, fmt.Errorf("activities: %s/%d has no leader", topic, partition)
	}
	if o.maxBytes <= 0 {
		o.maxBytes = kafkaconn.MaxRecordBytes
	}
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = 0 // fetch waits between reads instead
	req.MinBytes = 1
	req.MaxBytes = o.maxBytes
	req.IsolationLevel = 1 // read committed
	req.SessionID, req.SessionEpoch = 0, -1
	t := kmsg.NewFetchRequestTopic()
	t.Topic, t.TopicID = topic, rt.id
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition, p.FetchOffset, p.PartitionMaxBytes = partition, offset, o.maxBytes
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	var kr kmsg.Request = req
	if rt.id == [16]byte{} {
		kr = fetchByName{req} // a broker without topic ids
	}
	kresp, err := k.cl.Broker(int(leader)).RetriableRequest(ctx, kr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, offset, false, ctx.Err()
		}
		return nil, offset, true, fmt.Errorf("activities: fetch %s/%d: %w", topic, partition, err)
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, offset, kerr.IsRetriable(err), fmt.Errorf("activities: fetch %s/%d: %w", topic, partition, err)
	}
	for _, rtp := range resp.Topics {
		for i := range rtp.Partitions {
			rp := &rtp.Partitions[i]
			if rp.Partition != partition {
				continue
			}
			fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				KeepControlRecords: o.keepControl, Offset: offset, IsolationLevel: kgo.ReadCommitted(),
				Topic: topic, Partition: partition,
			}, rp, k.dec, nil)
			switch {
			case errors.Is(fp.Err, kerr.OffsetOutOfRange):
				start, err := k.startOffset(ctx, topic, partition)
				if err == nil && start > offset {
					return nil, start, false, nil
				}
				return nil, offset, false, fmt.Errorf("activities: fetch %s/%d at %d: %w", topic, partition, offset, fp.Err)
			case fp.Err != nil:
				return nil, offset, kerr.IsRetriable(fp.Err), fmt.Errorf("activities: fetch %s/%d at %d: %w", topic, partition,
					offset, fp.Err)
			}
			return fp.Records, next, false, nil
		}
	}
	return nil, offset, true, fmt.Errorf("activities: fetch %s/%d: partition missing from the answer", topic, partition)
}

// fetchByName caps a Fetch at v12, which names topics by name, for
// brokers that have no topic ids.
type fetchByName struct{ *kmsg.FetchRequest }

func (fetchByName) MaxVersion() int16 { return 12 }

// route returns topic's id and leaders, from the cache or a metadata
// request.
func (k *Kafka) route(ctx context.Context, topic string) (topicRoute, error) {
	k.mu.Lock()
	rt, ok := k.routes[topic]
	k.mu.Unlock()
	if ok {
		return rt, nil
	}
	// A metadata request of its own: kadm's answers may come from the
	// client's cache, which still names the leader that just moved.
	req := kmsg.NewPtrMetadataRequest()
	rq := kmsg.NewMetadataRequestTopic()
	rq.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rq)
	resp, err := req.RequestWith(ctx, k.cl)
	if err != nil {
		return rt, fmt.Errorf("activities: metadata of %s: %w", topic, err)
	}
	i := slices.IndexFunc(resp.Topics,
		func(t kmsg.MetadataResponseTopic) bool { return t.Topic != nil && *t.Topic == topic })
	if i < 0 {
		return rt, fmt.Errorf("activities: metadata of %s: topic missing", topic)
	}
	mt := resp.Topics[i]
	if err := kerr.ErrorForCode(mt.ErrorCode); err != nil {
		return rt, fmt.Errorf("activities: metadata of %s: %w", topic, err)
	}
	rt = topicRoute{id: mt.TopicID, leaders: map[int32]int32{}}
	for _, p := range mt.Partitions {
		if p.ErrorCode == 0 {
			rt.leaders[p.Partition] = p.Leader
		}
	}
	k.mu.Lock()
	k.routes[topic] = rt
	k.mu.Unlock()
	return rt, nil
}

// forget drops topic's cached route, after its leader moved.
func (k *Kafka) forget(topic string) {
	k.mu.Lock()
	delete(k.routes, topic)
	k.mu.Unlock()
}

func (k *Kafka) startOffset(ctx context.Context, topic string, partition int32) (int64, error) {
	offs, err := k.Admin.ListStartOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	o, ok := offs.Lookup(topic, partition)
	if !ok || o.Err != nil {
		return 0, fmt.Errorf("activities: start offset of %s/%d unknown", topic, partition)
	}
	return o.Offset, nil
}

// readCommitted calls fn for every committed data record of
// topic/partition in [from, to), in offset order. Below the last stable
// offset every offset is committed, aborted or a marker, and stays so; a
// to beyond it (an open transaction), or a gap that compaction left at the
// end, ends the read after two reads that find nothing. Called by an activity, it records a heartbeat after
// every fetch.
func (k *Kafka) readCommitted(ctx context.Context, topic string, partition int32, from, to int64,
	fn func(*kgo.Record)) error {
	pos, quiet := from, 0
	for pos < to {
		recs, next, err := k.fetch(ctx, topic, partition, pos, fetchOpts{wait: maxFetchWait})
		if err != nil {
			return err
		}
		for _, r := range recs {
			if r.Offset < to && !r.Attrs.IsControl() {
				fn(r)
			}
		}
		if next <= pos {
			if quiet++; quiet >= 2 {
				break
			}
		} else {
			quiet = 0
			pos = next
		}
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, pos-1)
		}
	}
	return nil
}
