package streaming

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
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
	// refresh follows the refresh topic (refresh.go).
	refresh *refresher
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
	ops  []*streamOp
	next int64 // next offset expected
	// refreshNext is the next refresh-topic offset the partition has to
	// consider; refreshed: a refresh changed its operators in this
	// transaction (a checkpoint is due). refresh.go.
	refreshNext int64
	refreshed   bool
	touched     bool // records processed or ticked since the last commit
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
		look: newLookups(cfg, log, reg), refresh: newRefresher(cfg, log, reg),
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
	w.refresh.start(ctx, w.cfg)
	defer w.refresh.stop()
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
