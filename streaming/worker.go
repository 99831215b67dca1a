package streaming

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
	"reckon/internal/metrics"
	"reckon/streaming/operator"
)

// Worker is one `reckon stream` process: a member of the stream consumer
// group. Run owns all partition state; nothing else touches it.
type Worker struct {
	cfg *config.Config
	log *slog.Logger
	m   *workerMetrics
	// now is the processing clock for ticks and dead-letter times.
	now func() time.Time

	// byTopic lists the streams reading each raw topic.
	byTopic map[string][]config.Stream
	gate    *event.Gate
	parts   map[tp]*partition

	// attempts counts processing failures per record (seed 004): a record
	// that keeps failing is dead-lettered after MaxAttempts and the
	// partition moves on.
	attempts map[recordRef]int

	buf []byte // scratch for encoding
}

type tp struct {
	topic     string
	partition int32
}

type recordRef struct {
	tp
	offset int64
}

// partition is the state of one assigned raw partition: one operator per
// stream reading the topic.
type partition struct {
	tp
	ops     []*streamOp
	next    int64 // next offset expected
	touched bool  // changed since the last commit

	// The processing clock of the operators is the Kafka record timestamp
	// (arrival). Between records it advances with the wall clock from the
	// last arrival seen, never jumping to the wall clock itself: a replay of
	// old records must not expire dedup entries or idle-advance watermarks
	// by the distance between then and now.
	lastArrival time.Time
	lastWall    time.Time
}

// procNow is the partition's processing time at wall time now.
func (p *partition) procNow(now time.Time) (time.Time, bool) {
	if p.lastArrival.IsZero() {
		return time.Time{}, false
	}
	return p.lastArrival.Add(now.Sub(p.lastWall)), true
}

type streamOp struct {
	cfg config.Stream
	op  *operator.Operator
	out operator.Out
	// keyPath and valuePath are the envelope paths of the key and value
	// ("data.<field>"), built once rather than per event.
	keyPath, valuePath string
}

// New builds a stream worker from cfg.
func New(cfg *config.Config, log *slog.Logger, reg *metrics.Registry) (*Worker, error) {
	gate, err := event.NewGate(cfg.Gate)
	if err != nil {
		return nil, err
	}
	w := &Worker{
		cfg: cfg, log: log, m: newWorkerMetrics(reg), now: time.Now,
		byTopic: map[string][]config.Stream{}, gate: gate,
		parts: map[tp]*partition{}, attempts: map[recordRef]int{},
	}
	for _, s := range cfg.Streams {
		w.byTopic[s.Topic] = append(w.byTopic[s.Topic], s)
	}
	if len(w.byTopic) == 0 {
		return nil, errors.New("streaming: no streams configured")
	}
	return w, nil
}

func operatorOptions(s config.Stream, wcfg config.StreamWorker) operator.Options {
	return operator.Options{
		Stream: s.Name, Window: s.Window, Rolling: s.Rolling,
		OutOfOrderness: s.OutOfOrderness, AllowedLateness: s.AllowedLateness,
		IdleTimeout: s.IdleTimeout, EmitInterval: s.EmitInterval,
		DedupTTL: wcfg.DedupTTL, DedupMaxEntries: wcfg.DedupMaxEntries,
	}
}

// Run consumes until ctx ends. Each iteration polls, processes, ticks, and
// commits outputs + state + offsets in one transaction.
func (w *Worker) Run(ctx context.Context) error {
	topics := make([]string, 0, len(w.byTopic))
	for t := range w.byTopic {
		topics = append(topics, t)
	}
	revoked := make(chan []tp, 16)
	onRevoke := func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
		var l []tp
		for t, ps := range m {
			for _, p := range ps {
				l = append(l, tp{t, p})
			}
		}
		revoked <- l
	}
	txnID := w.cfg.Kafka.ClientID + "-stream-" + w.cfg.Stream.Instance
	sess, err := kgo.NewGroupTransactSession(append(kafkaconn.Opts(w.cfg.Kafka, "stream"),
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(w.cfg.Stream.TransactionTimeout),
		kgo.ConsumerGroup(w.cfg.Stream.Group),
		kgo.SessionTimeout(w.cfg.Stream.SessionTimeout),
		kgo.HeartbeatInterval(min(3*time.Second, w.cfg.Stream.SessionTimeout/3)),
		kgo.ConsumeTopics(topics...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsRevoked(onRevoke),
		kgo.OnPartitionsLost(onRevoke),
		kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	)...)
	if err != nil {
		return fmt.Errorf("streaming: %w", err)
	}
	defer sess.Close()
	w.log.Info("stream worker consuming", "group", w.cfg.Stream.Group, "topics", topics, "transactional_id", txnID)

	lastTick := time.Time{}
	for ctx.Err() == nil {
		// One transaction gathers every poll for up to CommitInterval:
		// fewer, larger transactions under load (each carries the touched
		// partitions' snapshots), at most CommitInterval of latency when idle.
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("streaming: begin: %w", err)
		}
		var recs []*kgo.Record
		var failed *recordRef
		txnStart := w.now()
		for failed == nil && ctx.Err() == nil {
			wait := w.cfg.Stream.CommitInterval - w.now().Sub(txnStart)
			if wait <= 0 {
				break
			}
			failed = w.pollOnce(ctx, sess, revoked, wait, &recs)
		}
		if ctx.Err() != nil {
			break
		}
		if now := w.now(); failed == nil && now.Sub(lastTick) >= w.cfg.Stream.TickInterval {
			lastTick = now
			for _, part := range w.parts {
				proc, ok := part.procNow(now)
				if !ok {
					continue
				}
				for _, so := range part.ops {
					so.op.Tick(proc, &so.out)
					if so.out.Len() > 0 {
						part.touched = true
					}
				}
				recs = append(recs, w.drainOutputs(part, nil)...)
			}
		}
		if failed != nil {
			// Abort: outputs, state and offsets of this iteration are
			// discarded; the consumer rewinds and the operators reload the
			// committed state.
			w.abort(ctx, sess)
			continue
		}
		for _, part := range w.parts {
			if part.touched {
				recs = append(recs, w.stateRecord(part)...)
			}
		}
		for _, r := range recs {
			sess.Produce(ctx, r, nil)
		}
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return fmt.Errorf("streaming: end transaction: %w", err)
		}
		if !committed {
			w.log.Info("transaction aborted (rebalance); reloading state")
			w.dropAll()
			continue
		}
		w.m.committed(len(recs))
		for _, part := range w.parts {
			part.touched = false
			w.m.observe(part)
		}
	}
	w.log.Info("stream worker stopping")
	return nil
}

// pollOnce polls for at most wait and runs what arrived through the
// partitions' operators, appending the records to publish to recs. It
// returns the record that failed processing, if any.
func (w *Worker) pollOnce(ctx context.Context, sess *kgo.GroupTransactSession, revoked chan []tp, wait time.Duration, recs *[]*kgo.Record) *recordRef {
	pctx, cancel := context.WithTimeout(ctx, wait)
	fetches := sess.PollFetches(pctx)
	cancel()
	for drained := false; !drained; {
		select {
		case l := <-revoked:
			for _, k := range l {
				w.drop(k)
			}
		default:
			drained = true
		}
	}
	for _, fe := range fetches.Errors() {
		if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) {
			w.log.Warn("fetch error", "topic", fe.Topic, "partition", fe.Partition, "err", fe.Err)
		}
	}
	var failed *recordRef
	now := w.now()
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		if failed != nil || len(p.Records) == 0 {
			return
		}
		part, err := w.partitionFor(ctx, tp{p.Topic, p.Partition}, p.Records[0].Offset)
		if err != nil {
			w.log.Error("cannot restore partition state; will retry", "topic", p.Topic, "partition", p.Partition, "err", err)
			failed = &recordRef{tp{p.Topic, p.Partition}, p.Records[0].Offset}
			return
		}
		for _, r := range p.Records {
			if r.Offset < part.next {
				continue // already reflected in the restored state
			}
			out, ok := w.processRecord(part, r)
			if !ok {
				failed = &recordRef{part.tp, r.Offset}
				return
			}
			*recs = append(*recs, out...)
			part.next = r.Offset + 1
			part.touched = true
			if r.Timestamp.After(part.lastArrival) {
				part.lastArrival = r.Timestamp
			}
			part.lastWall = now
		}
		w.m.lag(part, p.HighWatermark)
	})
	return failed
}

func (w *Worker) abort(ctx context.Context, sess *kgo.GroupTransactSession) {
	if _, err := sess.End(ctx, kgo.TryAbort); err != nil && ctx.Err() == nil {
		w.log.Warn("abort", "err", err)
	}
	w.dropAll()
	select {
	case <-ctx.Done():
	case <-time.After(200 * time.Millisecond):
	}
}

func (w *Worker) drop(k tp) {
	if p, ok := w.parts[k]; ok {
		w.m.forget(p)
		delete(w.parts, k)
	}
}

func (w *Worker) dropAll() {
	for k := range w.parts {
		w.drop(k)
	}
}

// partitionFor returns the partition's state, loading it from the state
// topic on first use. first is the offset of the first record fetched: the
// committed snapshot must describe the state just before it (or later, in
// which case the already-counted records are skipped).
func (w *Worker) partitionFor(ctx context.Context, k tp, first int64) (*partition, error) {
	if p, ok := w.parts[k]; ok {
		return p, nil
	}
	streams := w.byTopic[k.topic]
	want := map[string]bool{}
	for _, s := range streams {
		want[stateKey(s.Name, k.topic, k.partition)] = true
	}
	snaps, err := loadState(ctx, w.cfg, want)
	if err != nil {
		return nil, err
	}
	p := &partition{tp: k, next: first}
	for i, s := range streams {
		op, err := operator.New(operatorOptions(s, w.cfg.Stream))
		if err != nil {
			return nil, err
		}
		if snap, ok := snaps[stateKey(s.Name, k.topic, k.partition)]; ok {
			if snap.next >= 0 && snap.next < first {
				return nil, fmt.Errorf("state of %s is at offset %d but the committed offset is %d: state not yet visible", stateKey(s.Name, k.topic, k.partition), snap.next, first)
			}
			if err := op.Restore(snap.state); err != nil {
				return nil, err
			}
			if i == 0 || snap.next > p.next {
				p.next = max(snap.next, first)
			}
		}
		p.ops = append(p.ops, &streamOp{cfg: s, op: op, keyPath: "data." + s.KeyField, valuePath: "data." + s.ValueField})
	}
	w.parts[k] = p
	w.log.Info("partition assigned", "topic", k.topic, "partition", k.partition, "resume_offset", p.next, "restored", len(snaps))
	return p, nil
}

// processRecord runs one raw record through the gate and every stream's
// operator and returns the records to publish. ok is false when processing
// failed and the record should be retried (the transaction aborts); after
// MaxAttempts failures the record is dead-lettered instead.
func (w *Worker) processRecord(part *partition, r *kgo.Record) (out []*kgo.Record, ok bool) {
	ref := recordRef{part.tp, r.Offset}
	if n := w.attempts[ref]; n >= w.cfg.Stream.MaxAttempts {
		delete(w.attempts, ref)
		w.m.dead(part.topic, "process")
		return []*kgo.Record{w.deadLetter(r, event.DeadLetter{
			Reason: "process: failed " + strconv.Itoa(n) + " times", Reasons: []string{"process: failed " + strconv.Itoa(n) + " times"},
			Attempts: n, Stage: "process",
		})}, true
	}
	defer func() {
		if p := recover(); p != nil {
			w.attempts[ref]++
			w.log.Error("processing failed; will retry", "topic", part.topic, "partition", part.partition, "offset", r.Offset, "attempt", w.attempts[ref], "panic", p)
			out, ok = nil, false
		}
	}()
	env, verdict := w.gate.Check(r.Value, r.Timestamp)
	if !verdict.Valid {
		w.m.dead(part.topic, "gate")
		dl := event.NewDeadLetter(verdict, r.Topic, r.Partition, r.Offset, r.Timestamp, w.now())
		return []*kgo.Record{w.deadLetter(r, dl)}, true
	}
	id, _ := operator.ParseEventID(env.EventID)
	matched := false
	for _, so := range part.ops {
		if !typeIn(env.EventType, so.cfg.EventTypes) {
			continue
		}
		matched = true
		key, okKey := env.String(so.keyPath)
		var value float64
		okValue := true
		if so.cfg.ValueField != "" {
			value, okValue = env.Number(so.valuePath)
		}
		if !okKey || !okValue || key == "" {
			field := so.keyPath
			if okKey && key != "" {
				field = so.valuePath
			}
			w.m.dead(part.topic, "gate")
			reason := field + ": stream " + so.cfg.Name + " needs it (key must be a non-empty string, value a finite number)"
			return []*kgo.Record{w.deadLetter(r, event.DeadLetter{Reason: reason, Reasons: []string{reason}, Fields: []string{field},
				SourceTopic: r.Topic, SourcePartition: r.Partition, SourceOffset: r.Offset, SourceTimestamp: r.Timestamp, DeadAt: w.now(), Attempts: 1, Stage: "gate"})}, true
		}
		v, err := so.op.Process(operator.Record{ID: id, Key: key, Value: value, EventTime: env.OccurredAt, Arrival: r.Timestamp, Ref: r.Offset}, &so.out)
		if err != nil {
			w.m.dead(part.topic, "process")
			dl := event.DeadLetter{Reason: "process: " + err.Error(), Reasons: []string{"process: " + err.Error()},
				SourceTopic: r.Topic, SourcePartition: r.Partition, SourceOffset: r.Offset, SourceTimestamp: r.Timestamp, DeadAt: w.now(), Attempts: 1, Stage: "process"}
			return []*kgo.Record{w.deadLetter(r, dl)}, true
		}
		w.m.verdict(so.cfg.Name, v)
	}
	if !matched {
		// A valid event of a type no stream on this topic aggregates: the
		// lake still archives it; nothing to compute here.
		w.m.unrouted(part.topic)
	}
	delete(w.attempts, ref)
	return w.drainOutputs(part, r), true
}

func typeIn(t string, ts []string) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// drainOutputs turns the operators' pending outputs into records. src is
// the raw record being processed (for the late side output), nil on ticks.
func (w *Worker) drainOutputs(part *partition, src *kgo.Record) []*kgo.Record {
	var out []*kgo.Record
	for _, so := range part.ops {
		for i := range so.out.Panes {
			p := &so.out.Panes[i]
			w.buf = p.AppendJSON(w.buf[:0])
			out = append(out, &kgo.Record{Topic: w.cfg.Topics.Summaries, Key: []byte(p.RecordKey()), Value: append([]byte(nil), w.buf...)})
			w.m.pane(so.cfg.Name, p.Timing)
		}
		for i := range so.out.Features {
			f := so.out.Features[i].Event(so.cfg.Name, so.cfg.Rolling)
			w.buf = f.AppendJSON(w.buf[:0])
			out = append(out, &kgo.Record{Topic: w.cfg.Topics.Features, Key: []byte(f.Key), Value: append([]byte(nil), w.buf...)})
		}
		for _, l := range so.out.Late {
			if src == nil || l.Ref != src.Offset {
				continue
			}
			out = append(out, &kgo.Record{
				Topic: w.cfg.Topics.Late, Key: src.Key, Value: src.Value,
				Headers: []kgo.RecordHeader{
					{Key: event.HeaderReason, Value: []byte("late: window purged (event time before watermark - allowed lateness)")},
					{Key: "reckon.stream", Value: []byte(so.cfg.Name)},
					{Key: "reckon.watermark", Value: []byte(l.Watermark.UTC().Format(time.RFC3339Nano))},
					{Key: "reckon.event_time", Value: []byte(l.EventTime.UTC().Format(time.RFC3339Nano))},
					{Key: event.HeaderSourceTopic, Value: []byte(src.Topic)},
					{Key: event.HeaderSourcePartition, Value: []byte(strconv.Itoa(int(src.Partition)))},
					{Key: event.HeaderSourceOffset, Value: []byte(strconv.FormatInt(src.Offset, 10))},
				},
			})
		}
		so.out.Reset()
	}
	return out
}

func (w *Worker) deadLetter(r *kgo.Record, dl event.DeadLetter) *kgo.Record {
	if dl.SourceTopic == "" {
		dl.SourceTopic, dl.SourcePartition, dl.SourceOffset, dl.SourceTimestamp = r.Topic, r.Partition, r.Offset, r.Timestamp
	}
	if dl.DeadAt.IsZero() {
		dl.DeadAt = w.now()
	}
	hs := dl.Headers()
	rh := make([]kgo.RecordHeader, len(hs))
	for i, h := range hs {
		rh[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
	}
	return &kgo.Record{Topic: w.cfg.Topics.DLQ, Key: r.Key, Value: r.Value, Headers: rh}
}

// stateRecord renders the partition's operators as state-topic records,
// stamped with the next offset so a restore can verify it matches the
// committed consumer offset.
func (w *Worker) stateRecord(part *partition) []*kgo.Record {
	next := []byte(strconv.FormatInt(part.next, 10))
	out := make([]*kgo.Record, 0, len(part.ops))
	for _, so := range part.ops {
		out = append(out, &kgo.Record{
			Topic:   w.cfg.Topics.StreamState,
			Key:     []byte(stateKey(so.cfg.Name, part.topic, part.partition)),
			Value:   so.op.Snapshot(),
			Headers: []kgo.RecordHeader{{Key: headerNextOffset, Value: next}},
		})
	}
	return out
}
