package streaming

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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
	parts   map[tp]*partition
	// parallelism bounds the partitions processed at once (pollOnce).
	parallelism int

	// attempts counts processing failures per record: a record that keeps
	// failing is dead-lettered after MaxAttempts and the partition moves on
	// (docs/requirements.md R-DLQ-2).
	// Partitions are processed in parallel (pollOnce): attemptsMu guards
	// attempts, and nAttempts lets the common case skip the lock.
	attemptsMu sync.Mutex
	attempts   map[recordRef]int
	nAttempts  atomic.Int64

	// replaying is set while a restore replays committed records through
	// the operators: outputs, metrics and retry counting are suppressed.
	replaying bool

	// Partitions assigned but not yet restored, restored eagerly (before
	// their first record) so an idle partition keeps ticking after a
	// restart or rebalance; the value is the next attempt. assignedMu
	// guards assigned, filled by the group's callback.
	eager      map[tp]time.Time
	assignedMu sync.Mutex
	assigned   []tp
	// started is when Run began: assignment logs say how long the join took.
	started time.Time
	// revokedSeen: partitions were revoked or lost since the transaction
	// began (Run ends even an empty transaction then).
	revokedSeen bool
	// clocklessAt is when watchClockless looks next.
	clocklessAt time.Time
	// look serves feature lookups from committed copies of the
	// partitions' rolling buffers (lookup.go).
	look *lookups
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
	touched bool  // records processed or ticked since the last commit
	// progressDue: publish the partition's progress in this transaction
	// even if untouched (set on restore, so a new owner republishes the
	// committed position before anything newer; progress.go).
	progressDue bool
	// readTo holds the partition's ticks after a restore: the last stable
	// offset when it was assigned (0 once reached). Until the records
	// before it are processed, a tick could idle-advance the watermark past
	// windows that records waiting in the topic still belong to
	// (catchup.go).
	readTo int64
	// fetched: records of the partition were processed since the last
	// tick (the session is still delivering; no need to probe).
	fetched bool
	// probe, when not nil, brings the answer of the probe in flight
	// (catchup.go).
	probe chan probeResult

	// Checkpoint and replay log (replaylog.go). log holds the committed
	// entries since the checkpoint; this transaction's entry is tickAt and
	// skipped, appended at commit.
	log       replayLog
	sinceCkpt int64     // records processed since the checkpoint
	ckptWall  time.Time // wall time of the checkpoint, or of the restore
	tickAt    int64     // this transaction's tick (Unix ns), 0 if none
	skipped   []int64   // offsets this transaction dead-lettered unprocessed

	// The processing clock of the operators is the Kafka record timestamp
	// (arrival). Between records it advances with the wall clock from the
	// last arrival seen, never jumping to the wall clock itself: a replay of
	// old records must not expire dedup entries or idle-advance watermarks
	// by the distance between then and now.
	lastArrival time.Time
	lastWall    time.Time

	// Per-partition scratch, so that partitions are processed in parallel:
	// the gate's per-record state, and the outputs' records and bytes
	// (drainOutputs).
	gate  *event.Gate
	arena outArena
	out   []*kgo.Record
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
	// settings is the stream's SettingsDigest, published with its progress.
	settings string
}

// New builds a stream worker from cfg.
func New(cfg *config.Config, log *slog.Logger, reg *metrics.Registry) (*Worker, error) {
	if _, err := event.NewGate(cfg.Gate); err != nil { // each partition builds its own
		return nil, err
	}
	if err := kafkaconn.Check(cfg.Kafka); err != nil {
		return nil, fmt.Errorf("streaming: %w", err)
	}
	w := &Worker{
		cfg: cfg, log: log, m: newWorkerMetrics(reg), now: time.Now,
		byTopic: map[string][]config.Stream{}, parallelism: cfg.Stream.Parallelism,
		parts: map[tp]*partition{}, attempts: map[recordRef]int{}, eager: map[tp]time.Time{},
		look: newLookups(cfg, log, reg),
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
		Stream: s.Name, Window: s.Window, Hop: s.Hop, Rolling: s.Rolling,
		OutOfOrderness: s.OutOfOrderness, AllowedLateness: s.AllowedLateness,
		IdleTimeout: s.IdleTimeout, EmitInterval: s.EmitInterval,
		DedupTTL: wcfg.DedupTTL, DedupMaxEntries: wcfg.DedupMaxEntries,
		// One late pane per window per transaction (flushed before the
		// state records; a replay flushes at the same log entries).
		CoalesceLatePanes: wcfg.LatePanes != config.LatePanesPerEvent,
	}
}

// Run consumes until ctx ends. Each iteration polls, processes, ticks, and
// commits outputs + state + offsets in one transaction.
//
// A broker outage does not end it: when the transaction session fails (a
// transaction that cannot end or abort: the broker is gone, or answers
// with an error kgo does not retry), Run drops every partition's state,
// closes the session, waits until the broker answers and starts a new
// session with the same transactional id. Its producer id request fences
// the lost session and aborts its open transaction; the partitions are
// restored from the committed state, so outputs, state and offsets stay
// exactly once (docs/adr/0033-progress-every-partition-and-broker-outages.md).
// Run returns an error only for a configuration the client refuses or a
// broker that refuses the worker for good (authentication).
func (w *Worker) Run(ctx context.Context) error {
	w.look.start(ctx, w.cfg)
	defer w.look.stop()
	for {
		err := w.runSession(ctx)
		var lost *sessionLost
		if !errors.As(err, &lost) {
			if err == nil {
				w.log.Info("stream worker stopping")
			}
			return err
		}
		w.resetPartitions()
		if ctx.Err() != nil {
			w.log.Info("stream worker stopping")
			return nil
		}
		w.m.sessionLost()
		w.log.Warn("stream transaction session lost; its open transaction is aborted by the next session, "+
			"all partition state dropped; waiting for the broker", "err", lost.err)
		lostAt := w.now()
		if err := kafkaconn.WaitReady(ctx, w.cfg.Kafka); err != nil {
			if ctx.Err() != nil {
				w.log.Info("stream worker stopping")
				return nil
			}
			return fmt.Errorf("streaming: %w", err)
		}
		w.log.Info("broker answers again: new transaction session, partitions restored from the committed state",
			"waited", w.now().Sub(lostAt).Round(time.Millisecond))
	}
}

// sessionLost is a failure of the transaction session that a new session
// recovers from (Run).
type sessionLost struct{ err error }

func (e *sessionLost) Error() string { return "streaming: transaction session lost: " + e.err.Error() }
func (e *sessionLost) Unwrap() error { return e.err }

// resetPartitions forgets every partition, assigned and queued, when a
// session ends: the next session's group assignment brings them back and
// they are restored from the committed state.
func (w *Worker) resetPartitions() {
	w.dropAll()
	w.look.reset()
	clear(w.eager)
	w.assignedMu.Lock()
	w.assigned = w.assigned[:0]
	w.assignedMu.Unlock()
	w.revokedSeen = false
	w.attemptsMu.Lock()
	clear(w.attempts)
	w.nAttempts.Store(0)
	w.attemptsMu.Unlock()
}

// runSession is one transaction session of Run: it returns nil when ctx
// ends, a *sessionLost when the session failed.
func (w *Worker) runSession(ctx context.Context) error {
	topics := make([]string, 0, len(w.byTopic))
	for t := range w.byTopic {
		topics = append(topics, t)
	}
	revoked := make(chan []tp, 16)
	onRevoke := func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
		w.unassign(m)
		w.look.revoked(m)
		var l []tp
		for t, ps := range m {
			for _, p := range ps {
				l = append(l, tp{t, p})
			}
		}
		revoked <- l
	}
	txnID := w.cfg.Kafka.ClientID + "-stream-" + w.cfg.Stream.Instance
	kopts, err := kafkaconn.Options(w.cfg.Kafka, "stream")
	if err != nil {
		return fmt.Errorf("streaming: %w", err)
	}
	if w.cfg.Stream.Membership == "static" {
		// A restarted worker takes its partitions back at once instead of
		// waiting out its predecessor's session (docs/adr/0016).
		kopts = append(kopts, kgo.InstanceID(w.cfg.Stream.Instance))
	}
	sess, err := kgo.NewGroupTransactSession(append(kopts,
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(w.cfg.Stream.TransactionTimeout),
		kgo.ConsumerGroup(w.cfg.Stream.Group),
		kgo.SessionTimeout(w.cfg.Stream.SessionTimeout),
		kgo.HeartbeatInterval(min(3*time.Second, w.cfg.Stream.SessionTimeout/3)),
		kgo.ConsumeTopics(topics...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(w.onAssigned),
		kgo.OnPartitionsRevoked(onRevoke),
		kgo.OnPartitionsLost(onRevoke),
		kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.SnappyCompression()),
	)...)
	if err != nil {
		return fmt.Errorf("streaming: %w", err)
	}
	defer w.closeSession(sess, revoked)
	w.started = w.now()
	if w.cfg.Stream.Membership == "static" {
		w.log.Info("stream worker joining its group as a static member: a restart of this instance takes its partitions back without a rebalance; partitions of a member gone for good move after the session timeout",
			"group", w.cfg.Stream.Group, "instance", w.cfg.Stream.Instance, "session_timeout", w.cfg.Stream.SessionTimeout, "topics", topics, "transactional_id", txnID)
	} else {
		w.log.Info("stream worker joining its group; after a crash, the previous member's partitions are assigned once its session expires",
			"group", w.cfg.Stream.Group, "session_timeout", w.cfg.Stream.SessionTimeout, "topics", topics, "transactional_id", txnID)
	}

	// The producer id first: with the same transactional id it fences a
	// predecessor (a killed process, or this worker's lost session) and
	// aborts its open transaction now rather than at its timeout, so the
	// stable offsets the restores wait for are there at once.
	if _, _, err := sess.Client().ProducerID(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return &sessionLost{fmt.Errorf("producer id: %w", err)}
	}

	// A shutdown (ctx ending) still finishes the open transaction: what was
	// processed is committed, not left to the next owner to redo.
	octx := context.WithoutCancel(ctx)
	lastTick := time.Time{}
	inTxn := false
	for ctx.Err() == nil {
		// One transaction gathers every poll for up to CommitInterval:
		// fewer, larger transactions under load (each carries the touched
		// partitions' snapshots), at most CommitInterval of latency when idle.
		if !inTxn {
			if err := sess.Begin(); err != nil {
				return &sessionLost{fmt.Errorf("begin: %w", err)}
			}
			inTxn = true
		}
		// Revoked partitions first: one queued for a restore before its
		// revocation must not be restored after it.
		w.drainRevoked(revoked)
		w.restoreAssigned(ctx, sess)
		// Outputs are produced as they are made, so their delivery
		// overlaps processing; End only flushes the rest and commits.
		var produced atomic.Int64
		var perr produceErrors
		emit := func(rs []*kgo.Record) { // called by parallel partitions
			for _, r := range rs {
				sess.Produce(octx, r, perr.promise)
			}
			produced.Add(int64(len(rs)))
		}
		var failed *recordRef
		txnStart := w.now()
		for failed == nil && ctx.Err() == nil {
			wait := w.cfg.Stream.CommitInterval - w.now().Sub(txnStart)
			if wait <= 0 {
				break
			}
			failed = w.pollOnce(ctx, sess, revoked, wait, emit)
		}
		stopping := ctx.Err() != nil
		if now := w.now(); failed == nil && !stopping && now.Sub(lastTick) >= w.cfg.Stream.TickInterval {
			lastTick = now
			w.watchClockless(ctx, sess, now)
			for _, part := range w.parts {
				if !w.caughtUp(ctx, part, now) {
					continue
				}
				proc, ok := part.procNow(now)
				if !ok {
					continue
				}
				for _, so := range part.ops {
					tickOp(so, proc, part.next)
				}
				// Every tick goes into the replay log, even one with no
				// output: it may have advanced an idle watermark.
				part.tickAt, part.touched = proc.UnixNano(), true
				emit(w.drainOutputs(part, nil))
			}
		}
		if failed != nil {
			// Abort: outputs, state and offsets of this iteration are
			// discarded; the consumer rewinds and the operators reload the
			// committed state.
			inTxn, w.revokedSeen = false, false
			if err := w.abort(ctx, octx, sess); err != nil {
				return err
			}
			continue
		}
		now := w.now()
		for _, part := range w.parts {
			if part.touched {
				emit(w.flushLate(part))
				emit(w.stateRecords(part, now))
			}
			if part.touched || part.progressDue {
				emit(w.progressRecords(part, now))
			}
		}
		if produced.Load() == 0 && !stopping && !w.revokedSeen {
			// Nothing to commit (no partition restored or fetched yet):
			// the transaction stays open for the next round. Ending it
			// would cost more than nothing: kgo's End of a transaction
			// without offsets cannot tell that the broker fences
			// rebalances (KIP-447) and holds the session for 500 ms. A
			// revocation ends it, so the session's revoked state is reset
			// before the next records are processed.
			continue
		}
		inTxn, w.revokedSeen = false, false
		// A record the broker refused must not be committed past: flush,
		// and abort on any failure (End would commit the rest regardless).
		ectx, cancel := context.WithTimeout(octx, w.cfg.Stream.TransactionTimeout)
		ectx = kgo.PreTxnCommitFnContext(ectx, w.commitUnpolled)
		if err := sess.Client().Flush(ectx); err == nil {
			if r, n, perrFirst := perr.first(); perrFirst != nil {
				cancel()
				w.m.produceFailed(n)
				w.log.Error("outputs refused by the broker; transaction aborted and retried", "failed", n,
					"topic", r.Topic, "partition", r.Partition, "key_bytes", len(r.Key), "value_bytes", len(r.Value), "err", perrFirst)
				if err := w.abort(ctx, octx, sess); err != nil {
					if stopping {
						break
					}
					return err
				}
				if stopping {
					break
				}
				continue
			}
		}
		committed, err := sess.End(ectx, kgo.TryCommit)
		cancel()
		if err != nil {
			if stopping {
				w.log.Warn("last transaction not committed at shutdown; the next owner redoes it", "err", err)
				break
			}
			return &sessionLost{fmt.Errorf("end transaction: %w", err)}
		}
		if !committed {
			w.log.Info("transaction aborted (rebalance); reloading state")
			w.dropAllRestore()
			continue
		}
		w.m.committed(int(produced.Load()))
		for _, part := range w.parts {
			if part.touched || part.progressDue {
				w.m.progressPublished(part, now)
			}
			if part.touched {
				w.look.publish(part) // committed: lookups may count it now
			}
			part.touched, part.progressDue = false, false
			w.m.observe(part)
		}
		if stopping {
			break
		}
	}
	return nil
}

// closeSession leaves the group (bounded: a broker that is gone does not
// hold the worker) and closes the session. Its revoke callbacks may still
// run and send to revoked: they are drained meanwhile.
func (w *Worker) closeSession(sess *kgo.GroupTransactSession, revoked chan []tp) {
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-revoked:
			case <-stop:
				return
			}
		}
	}()
	lctx, cancel := context.WithTimeout(context.Background(), w.cfg.Stream.SessionTimeout)
	_ = sess.Client().LeaveGroupContext(lctx)
	cancel()
	sess.Close()
	close(stop)
}

// drainRevoked drops the partitions the group's callback revoked.
func (w *Worker) drainRevoked(revoked chan []tp) {
	for {
		select {
		case l := <-revoked:
			for _, k := range l {
				w.drop(k)
			}
			w.revokedSeen = true
		default:
			return
		}
	}
}

// tickOp ticks one operator at proc; next is the partition's next offset
// then. A partition that has processed no record at all (next 0: only
// transaction markers, or nothing, below it) starts the operator's idle
// rule first (operator.StartIdle). The replay calls it with the same
// values (the log entry's offset), so a restore reaches the same watermark.
func tickOp(so *streamOp, proc time.Time, next int64) {
	if next == 0 {
		so.op.StartIdle(proc)
	}
	so.op.Tick(proc, &so.out)
}

// pollOnce polls for at most wait and runs what arrived through the
// partitions' operators, handing the records to publish to emit. It
// returns the record that failed processing, if any.
func (w *Worker) pollOnce(ctx context.Context, sess *kgo.GroupTransactSession, revoked chan []tp, wait time.Duration, emit func([]*kgo.Record)) *recordRef {
	pctx, cancel := context.WithTimeout(ctx, wait)
	fetches := sess.PollFetches(pctx)
	cancel()
	w.drainRevoked(revoked)
	for _, fe := range fetches.Errors() {
		if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) {
			w.log.Warn("fetch error", "topic", fe.Topic, "partition", fe.Partition, "err", fe.Err)
		}
	}
	// Restores first, one after the other (they replay through shared
	// worker state); then the partitions' records, in parallel: each
	// partition owns its operators, gate and buffers, and its records stay
	// in offset order.
	var failed *recordRef
	var jobs []fetched
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		if failed != nil || len(p.Records) == 0 {
			return
		}
		k := tp{p.Topic, p.Partition}
		_, had := w.parts[k]
		part, err := w.partitionFor(ctx, k, p.Records[0].Offset)
		if err != nil {
			w.log.Error("cannot restore partition state; will retry", "topic", p.Topic, "partition", p.Partition, "err", err)
			failed = &recordRef{k, p.Records[0].Offset}
			return
		}
		if !had {
			// Restored by this fetch: its last stable offset is as new as
			// the assignment.
			part.holdTicks(p.LastStableOffset)
		}
		jobs = append(jobs, fetched{part, p.Records, p.HighWatermark})
	})
	if failed != nil {
		return failed // the transaction aborts: processing the rest is wasted
	}
	now := w.now()
	// At most parallelism goroutines take the partitions from a queue,
	// chunkRecords records at a time, a partition going back to the end
	// of the queue until its records are done: partitions of unequal size
	// keep every goroutine busy to the end of the poll, and each
	// partition's records run in order, on one goroutine at a time (the
	// queue hands a partition over with a happens-before edge).
	fails := make([]*recordRef, len(jobs))
	queue := make(chan int, len(jobs))
	for i := range jobs {
		queue <- i
	}
	var left atomic.Int64
	left.Store(int64(len(jobs)))
	var wg sync.WaitGroup
	for range min(w.parallelism, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range queue {
				done, fail := w.processChunk(&jobs[i], now, emit)
				if !done {
					queue <- i
					continue
				}
				fails[i] = fail
				if left.Add(-1) == 0 {
					close(queue)
				}
			}
		}()
	}
	wg.Wait()
	for _, f := range fails {
		if f != nil {
			return f
		}
	}
	return nil
}

// chunkRecords is how many records a partition processes before it goes
// back to the queue (pollOnce).
const chunkRecords = 1024

// fetched is one partition's records of a poll.
type fetched struct {
	part *partition
	recs []*kgo.Record
	hwm  int64
}

// processChunk runs up to chunkRecords of the partition's fetched records
// through its operators and hands the outputs to emit (safe for concurrent
// use). done is true when no records are left or one failed; fail is the
// record that failed processing, if any.
func (w *Worker) processChunk(j *fetched, now time.Time, emit func([]*kgo.Record)) (done bool, fail *recordRef) {
	part := j.part
	n := min(len(j.recs), chunkRecords)
	recs := j.recs[:n]
	j.recs = j.recs[n:]
	for _, r := range recs {
		if r.Offset < part.next {
			continue // already reflected in the restored state
		}
		out, ok := w.processRecord(part, r)
		if !ok {
			return true, &recordRef{part.tp, r.Offset}
		}
		emit(out)
		part.next = r.Offset + 1
		part.sinceCkpt++
		part.touched, part.fetched = true, true
		if r.Timestamp.After(part.lastArrival) {
			part.lastArrival = r.Timestamp
		}
		part.lastWall = now
	}
	if len(j.recs) > 0 {
		return false, nil
	}
	w.m.lag(part, j.hwm)
	return true, nil
}

// abort ends the transaction with an abort and drops every partition's
// state. An abort that fails leaves the session unusable (kgo's End): a
// *sessionLost, for Run to start a new one.
func (w *Worker) abort(ctx, octx context.Context, sess *kgo.GroupTransactSession) error {
	actx, cancel := context.WithTimeout(octx, w.cfg.Stream.TransactionTimeout)
	defer cancel()
	_, err := sess.End(actx, kgo.TryAbort)
	w.dropAllRestore()
	if err != nil {
		return &sessionLost{fmt.Errorf("abort transaction: %w", err)}
	}
	select {
	case <-ctx.Done():
	case <-time.After(200 * time.Millisecond):
	}
	return nil
}

func (w *Worker) drop(k tp) {
	delete(w.eager, k)
	if p, ok := w.parts[k]; ok {
		w.m.forget(p)
		delete(w.parts, k)
		w.look.dropped(k)
	}
}

// dropAllRestore drops every partition's state after an abort and queues
// the partitions for an eager restore: they are still assigned (a
// revocation not yet drained removes them from the queue again), and an
// idle one would otherwise wait for its next record to be restored, its
// ticks and lookups stopped meanwhile.
func (w *Worker) dropAllRestore() {
	now := w.now()
	held := slices.Collect(maps.Keys(w.parts))
	w.dropAll()
	for _, k := range held {
		w.eager[k] = now
	}
}

func (w *Worker) dropAll() {
	for k := range w.parts {
		w.drop(k)
	}
}

// partitionFor returns the partition's state, loading it from the state
// topic on first use. first is the offset of the first record fetched: the
// committed state must describe the state just before it (or later, in
// which case the already-counted records are skipped).
func (w *Worker) partitionFor(ctx context.Context, k tp, first int64) (*partition, error) {
	if p, ok := w.parts[k]; ok {
		return p, nil
	}
	snaps, err := loadState(ctx, w.cfg, w.stateKeys(k))
	if err != nil {
		return nil, err
	}
	p, err := w.restore(ctx, k, first, snaps)
	if err != nil {
		return nil, err
	}
	w.parts[k] = p
	w.look.publish(p) // restored state is committed state
	w.log.Info("partition assigned", "topic", k.topic, "partition", k.partition, "resume_offset", p.next,
		"checkpoint_epoch", p.log.epoch, "checkpoint_offset", p.log.from, "replayed_transactions", len(p.log.entries),
		"since_start", w.now().Sub(w.started).Round(time.Millisecond))
	return p, nil
}

// stateKeys are the state-topic keys of raw partition k: one checkpoint per
// stream reading the topic, and the partition's replay log.
func (w *Worker) stateKeys(k tp) map[string]bool {
	want := map[string]bool{logKey(k.topic, k.partition): true}
	for _, s := range w.byTopic[k.topic] {
		want[stateKey(s.Name, k.topic, k.partition)] = true
	}
	return want
}

// restore rebuilds raw partition k's committed state from the loaded
// state records: each operator from its checkpoint, then the raw records
// after the checkpoint replayed through the replay log. first, when not
// negative, is the committed consumer offset the state must reach.
func (w *Worker) restore(ctx context.Context, k tp, first int64, snaps map[string]snapshot) (*partition, error) {
	gate, err := event.NewGate(w.cfg.Gate)
	if err != nil {
		return nil, err
	}
	p := &partition{tp: k, next: first, ckptWall: w.now(), gate: gate, progressDue: true}
	epoch, from, haveCkpt := int64(0), int64(-1), false
	var proc int64 // the latest committed processing clock
	for _, s := range w.byTopic[k.topic] {
		op, err := operator.New(operatorOptions(s, w.cfg.Stream))
		if err != nil {
			return nil, err
		}
		key := stateKey(s.Name, k.topic, k.partition)
		snap, ok, err := checkpointOf(snaps, key)
		if err != nil {
			return nil, err
		}
		if ok {
			if err := op.Restore(snap.state); err != nil {
				return nil, fmt.Errorf("state %s: %w", key, err)
			}
			if haveCkpt && (snap.epoch != epoch || snap.next != from) {
				return nil, fmt.Errorf("state %s is checkpoint %d at offset %d, other streams of the partition are at %d/%d", key, snap.epoch, snap.next, epoch, from)
			}
			epoch, from, haveCkpt = snap.epoch, snap.next, true
			proc = max(proc, snap.proc)
		}
		p.ops = append(p.ops, &streamOp{cfg: s, op: op, keyPath: "data." + s.KeyField, valuePath: "data." + s.ValueField, settings: s.SettingsDigest()})
	}
	p.log = replayLog{epoch: epoch, from: from}
	if lg, ok := snaps[logKey(k.topic, k.partition)]; ok && (!haveCkpt || lg.epoch == epoch) {
		l, err := decodeLog(lg.state)
		if err != nil {
			return nil, fmt.Errorf("state %s: %w", logKey(k.topic, k.partition), err)
		}
		if l.epoch != lg.epoch || (haveCkpt && l.from != from) {
			return nil, fmt.Errorf("state %s: log of checkpoint %d from offset %d does not continue checkpoint %d at offset %d", logKey(k.topic, k.partition), l.epoch, l.from, epoch, from)
		}
		p.log = *l
		proc = max(proc, lg.proc)
	}
	if proc > 0 {
		// The processing clock resumes where the committed state left it
		// (not at the wall clock: downtime does not count as idle time).
		p.lastArrival, p.lastWall = time.Unix(0, proc).UTC(), w.now()
	}
	if p.log.from < 0 {
		// Nothing committed yet: a fresh start at the consumer offset.
		p.log.from = max(first, 0)
		p.next = p.log.from
		return p, nil
	}
	end := p.log.end()
	if first >= 0 && end < first {
		return nil, fmt.Errorf("state of %s/%d is at offset %d but the committed offset is %d: state not yet visible", k.topic, k.partition, end, first)
	}
	if err := w.replay(ctx, p); err != nil {
		return nil, err
	}
	p.next = max(end, first)
	return p, nil
}

// processRecord runs one raw record through the gate and every stream's
// operator and returns the records to publish. ok is false when processing
// failed and the record should be retried (the transaction aborts); after
// MaxAttempts failures the record is dead-lettered instead.
func (w *Worker) processRecord(part *partition, r *kgo.Record) (out []*kgo.Record, ok bool) {
	ref := recordRef{part.tp, r.Offset}
	if n := w.attemptsOf(ref); n >= w.cfg.Stream.MaxAttempts && !w.replaying {
		w.forgetAttempts(ref)
		part.skipped = append(part.skipped, r.Offset)
		w.m.dead(part.topic, "process")
		return []*kgo.Record{w.deadLetter(r, event.DeadLetter{
			Reason: "process: failed " + strconv.Itoa(n) + " times", Reasons: []string{"process: failed " + strconv.Itoa(n) + " times"},
			Attempts: n, Stage: "process",
		})}, true
	}
	defer func() {
		if p := recover(); p != nil {
			if w.replaying {
				out, ok = nil, false
				return
			}
			n := w.failedAttempt(ref)
			w.log.Error("processing failed; will retry", "topic", part.topic, "partition", part.partition, "offset", r.Offset, "attempt", n, "panic", p)
			out, ok = nil, false
		}
	}()
	env, verdict := part.gate.Check(r.Value, r.Timestamp)
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
				Attempts: 1, Stage: "gate"})}, true
		}
		v, err := so.op.Process(operator.Record{ID: id, Key: key, Value: value, EventTime: env.OccurredAt, Arrival: r.Timestamp, Ref: r.Offset}, &so.out)
		if err != nil {
			w.m.dead(part.topic, "process")
			dl := event.DeadLetter{Reason: "process: " + err.Error(), Reasons: []string{"process: " + err.Error()}, Attempts: 1, Stage: "process"}
			return []*kgo.Record{w.deadLetter(r, dl)}, true
		}
		w.m.verdict(so.cfg.Name, so.cfg.Rolling > 0, v)
	}
	if !matched {
		// A valid event of a type no stream on this topic aggregates: the
		// lake still archives it; nothing to compute here.
		w.m.unrouted(part.topic)
	}
	w.forgetAttempts(ref)
	return w.drainOutputs(part, r), true
}

// attemptsOf, failedAttempt and forgetAttempts keep the failure counts
// of records across retries; safe for the parallel partitions.
func (w *Worker) attemptsOf(ref recordRef) int {
	if w.nAttempts.Load() == 0 {
		return 0
	}
	w.attemptsMu.Lock()
	defer w.attemptsMu.Unlock()
	return w.attempts[ref]
}

func (w *Worker) failedAttempt(ref recordRef) int {
	w.attemptsMu.Lock()
	defer w.attemptsMu.Unlock()
	w.attempts[ref]++
	w.nAttempts.Store(int64(len(w.attempts)))
	return w.attempts[ref]
}

func (w *Worker) forgetAttempts(ref recordRef) {
	if w.nAttempts.Load() == 0 {
		return
	}
	w.attemptsMu.Lock()
	defer w.attemptsMu.Unlock()
	delete(w.attempts, ref)
	w.nAttempts.Store(int64(len(w.attempts)))
}

func typeIn(t string, ts []string) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// flushLate publishes the late panes the partition's operators held during
// the transaction (operator.Options.CoalesceLatePanes). Every transaction
// that touched the partition ends with it, before its state records, and a
// replay repeats it at each log entry, so versions come out the same.
func (w *Worker) flushLate(part *partition) []*kgo.Record {
	for _, so := range part.ops {
		so.op.FlushLate(&so.out)
	}
	return w.drainOutputs(part, nil)
}

// drainOutputs turns the operators' pending outputs into records. src is
// the raw record being processed (for the late side output), nil on ticks.
func (w *Worker) drainOutputs(part *partition, src *kgo.Record) []*kgo.Record {
	if w.replaying {
		for _, so := range part.ops {
			so.out.Reset()
		}
		return nil
	}
	// The records and their bytes come from the partition's arena, and
	// the slice is the partition's: emit hands the records to the
	// producer before the next drain.
	out := part.out[:0]
	a := &part.arena
	// emitted is when the features are produced, in this transaction:
	// their emitted_at and Kafka timestamp (the operator stamped the
	// record's arrival, which a restart's re-processing leaves behind). A
	// pane's emitted_at stays the operator's processing clock
	// (event.Pane.EmittedAt); the producer stamps its record's timestamp.
	var emitted time.Time
	for _, so := range part.ops {
		if emitted.IsZero() && len(so.out.Features) > 0 {
			emitted = w.now().UTC()
		}
		for i := range so.out.Panes {
			p := &so.out.Panes[i]
			r := a.record(w.cfg.Topics.Summaries)
			r.Key = a.appendString(p.RecordKey())
			a.reserve(maxOutputJSON)
			start := len(a.b)
			a.b = p.AppendJSON(a.b)
			r.Value = a.since(start)
			out = append(out, r)
			w.m.pane(so.cfg.Name, p.Timing)
		}
		for i := range so.out.Features {
			f := so.out.Features[i].Event(so.cfg.Name, so.cfg.Rolling, emitted)
			f.SourceTopic, f.SourcePartition, f.SourceOffset = part.topic, part.partition, so.out.Features[i].Ref
			r := a.record(w.cfg.Topics.Features)
			r.Timestamp = emitted
			r.Key = a.appendString(f.Key)
			a.reserve(maxOutputJSON)
			start := len(a.b)
			a.b = f.AppendJSON(a.b)
			r.Value = a.since(start)
			out = append(out, r)
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
	part.out = out
	return out
}

// deadLetter builds the DLQ record of r (event.DeadLetter.Record): cut to
// the DLQ topic's record limit, kafkaconn.MaxRecordBytes (deploy/topics.yaml).
// The source's own headers are not carried.
func (w *Worker) deadLetter(r *kgo.Record, dl event.DeadLetter) *kgo.Record {
	if dl.DeadAt.IsZero() {
		dl.DeadAt = w.now()
	}
	d := dl.Record(event.SourceRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
		Key: r.Key, Value: r.Value}, kafkaconn.MaxRecordBytes)
	rh := make([]kgo.RecordHeader, len(d.Headers))
	for i, h := range d.Headers {
		rh[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
	}
	return &kgo.Record{Topic: w.cfg.Topics.DLQ, Key: d.Key, Value: d.Value, Headers: rh}
}

// stateRecords ends the partition's transaction in the state topic: a
// checkpoint (every operator's full snapshot, a new epoch) when one is due,
// else the replay log with this transaction's entry appended. Each record
// carries the next offset, so a restore can verify it reaches the committed
// consumer offset.
func (w *Worker) stateRecords(part *partition, now time.Time) []*kgo.Record {
	e := logEntry{next: part.next, tick: part.tickAt, skipped: part.skipped}
	part.tickAt, part.skipped = 0, nil
	next := []byte(strconv.FormatInt(part.next, 10))
	headers := func(hs ...kgo.RecordHeader) []kgo.RecordHeader {
		hs = append(hs, kgo.RecordHeader{Key: headerNextOffset, Value: next})
		if t, ok := part.procNow(now); ok {
			hs = append(hs, kgo.RecordHeader{Key: headerProc, Value: []byte(strconv.FormatInt(t.UnixNano(), 10))})
		}
		return hs
	}
	sc := w.cfg.Stream
	if part.sinceCkpt < sc.CheckpointRecords && now.Sub(part.ckptWall) < sc.CheckpointInterval && len(part.log.entries) < maxLogEntries {
		part.log.entries = append(part.log.entries, e)
		return []*kgo.Record{{
			Topic: w.cfg.Topics.StreamState, Key: []byte(logKey(part.topic, part.partition)), Value: part.log.encode(),
			Headers: headers(kgo.RecordHeader{Key: headerEpoch, Value: []byte(strconv.FormatInt(part.log.epoch, 10))}),
		}}
	}
	part.log = replayLog{epoch: part.log.epoch + 1, from: part.next}
	part.sinceCkpt, part.ckptWall = 0, now
	epoch := []byte(strconv.FormatInt(part.log.epoch, 10))
	out := make([]*kgo.Record, 0, len(part.ops))
	for _, so := range part.ops {
		chunks := chunked(so.op.Snapshot())
		n := []byte(strconv.Itoa(len(chunks)))
		for i, c := range chunks {
			out = append(out, &kgo.Record{
				Topic:   w.cfg.Topics.StreamState,
				Key:     []byte(chunkKey(stateKey(so.cfg.Name, part.topic, part.partition), i)),
				Value:   c,
				Headers: headers(kgo.RecordHeader{Key: headerEpoch, Value: epoch}, kgo.RecordHeader{Key: headerChunks, Value: n}),
			})
		}
	}
	w.m.checkpoint(part.topic)
	return out
}

// produceErrors collects the failures of a transaction's produced records
// (promises run on the client's goroutines).
type produceErrors struct {
	mu  sync.Mutex
	n   int
	rec *kgo.Record
	err error
}

func (p *produceErrors) promise(r *kgo.Record, err error) {
	if err == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == 0 {
		p.rec, p.err = r, err
	}
	p.n++
}

func (p *produceErrors) first() (*kgo.Record, int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rec, p.n, p.err
}

// onAssigned queues newly assigned partitions for an eager restore (the
// group's callback; the run loop restores them).
func (w *Worker) onAssigned(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	w.look.assigned(m)
	w.assignedMu.Lock()
	defer w.assignedMu.Unlock()
	for t, ps := range m {
		for _, p := range ps {
			w.assigned = append(w.assigned, tp{t, p})
		}
	}
}

// unassign forgets queued eager restores of revoked or lost partitions
// (the group's callback, so a queued partition is never restored after it
// moved to another worker).
func (w *Worker) unassign(m map[string][]int32) {
	w.assignedMu.Lock()
	defer w.assignedMu.Unlock()
	w.assigned = slices.DeleteFunc(w.assigned, func(k tp) bool { return slices.Contains(m[k.topic], k.partition) })
}

// restoreAssigned restores assigned partitions before their first record
// arrives, at the group's stable committed offset (the offset the consumer
// resumes from), so that an idle partition's processing clock and idle
// watermark go on after a restart instead of waiting for new data. A
// partition that cannot be restored yet is tried again a second later;
// the first fetched record restores it anyway.
func (w *Worker) restoreAssigned(ctx context.Context, sess *kgo.GroupTransactSession) {
	now := w.now()
	w.assignedMu.Lock()
	for _, k := range w.assigned {
		w.eager[k] = now
	}
	w.assigned = w.assigned[:0]
	w.assignedMu.Unlock()
	var due []tp
	for k, at := range w.eager {
		if _, ok := w.parts[k]; ok {
			delete(w.eager, k)
		} else if !now.Before(at) {
			due = append(due, k)
		}
	}
	if len(due) == 0 {
		return
	}
	fctx, cancel := context.WithTimeout(kadm.RequireStable(ctx), time.Second)
	defer cancel()
	adm := kadm.NewClient(sess.Client())
	offs, err := adm.FetchOffsets(fctx, w.cfg.Stream.Group)
	var ends kadm.ListedOffsets
	if err == nil {
		// The last stable offsets, read after the assignment: ticks wait
		// until the records before them are processed (catchup.go).
		ends, err = adm.ListCommittedOffsets(fctx, topicsOf(due)...)
	}
	for _, k := range due {
		var o kadm.OffsetResponse
		var end kadm.ListedOffset
		found, foundEnd := false, false
		if err == nil {
			o, found = offs.Lookup(k.topic, k.partition)
			end, foundEnd = ends.Lookup(k.topic, k.partition)
		}
		switch {
		case err != nil || (found && o.Err != nil) || !foundEnd || end.Err != nil:
			w.eager[k] = now.Add(time.Second)
		default:
			// Nothing committed (first < 0) restores too: a fresh
			// partition, or one that held only transaction markers, so
			// far. It publishes progress like any other (progressDue),
			// and its clock starts with its first arrival or marker
			// (catchup.go).
			first := int64(-1)
			if found && o.At >= 0 {
				first = o.At
			}
			p, err := w.partitionFor(ctx, k, first)
			if err != nil {
				w.log.Debug("eager restore deferred", "topic", k.topic, "partition", k.partition, "err", err)
				w.eager[k] = now.Add(time.Second)
				continue
			}
			p.holdTicks(end.Offset)
			delete(w.eager, k)
		}
	}
}
