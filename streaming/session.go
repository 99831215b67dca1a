package streaming

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/kafkaconn"
)

// runSession is one transaction session of Run: it returns nil when ctx
// ends, a *sessionLost when the session failed. Each round of its loop is
// one transaction: begin, restore what was assigned, poll and process for
// up to CommitInterval, tick, then end the transaction (txnEnd).
func (w *Worker) runSession(ctx context.Context) error {
	sess, revoked, err := w.openSession()
	if err != nil {
		return err
	}
	defer w.closeSession(sess, revoked)
	if err := fenceProducer(ctx, sess); err != nil {
		return err
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
		t := newTxn(octx, sess)
		failed := w.pollTxn(ctx, sess, revoked, t)
		stopping := ctx.Err() != nil
		if now := w.now(); failed == nil && !stopping && now.Sub(lastTick) >= w.cfg.Stream.TickInterval {
			lastTick = now
			w.tick(ctx, sess, now, t.emit)
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
		w.emitState(now, t.emit)
		if t.produced.Load() == 0 && !stopping && !w.revokedSeen {
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
		if err := w.txnEnd(ctx, octx, sess, t, now, stopping); err != nil {
			return err
		}
	}
	return nil
}

// openSession starts the transaction session: a group member consuming
// every stream's topic, committing with the worker's transactional id. The
// returned channel gets the partitions the group revokes.
func (w *Worker) openSession() (*kgo.GroupTransactSession, chan []tp, error) {
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
		return nil, nil, fmt.Errorf("streaming: %w", err)
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
		return nil, nil, fmt.Errorf("streaming: %w", err)
	}
	w.started = w.now()
	if w.cfg.Stream.Membership == "static" {
		w.log.Info("stream worker joining its group as a static member: a restart of this instance takes its "+
			"partitions back without a rebalance; partitions of a member gone for good move after the session timeout",
			"group", w.cfg.Stream.Group, "instance", w.cfg.Stream.Instance,
			"session_timeout", w.cfg.Stream.SessionTimeout, "topics", topics, "transactional_id", txnID)
	} else {
		w.log.Info("stream worker joining its group; after a crash, the previous member's partitions are assigned "+
			"once its session expires",
			"group", w.cfg.Stream.Group, "session_timeout", w.cfg.Stream.SessionTimeout, "topics", topics,
			"transactional_id", txnID)
	}
	return sess, revoked, nil
}

// fenceProducer gets the producer id first: with the same transactional
// id it fences a predecessor (a killed process, or this worker's lost
// session) and aborts its open transaction now rather than at its timeout,
// so the stable offsets the restores wait for are there at once. nil when
// ctx ended meanwhile.
func fenceProducer(ctx context.Context, sess *kgo.GroupTransactSession) error {
	if _, _, err := sess.Client().ProducerID(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return &sessionLost{fmt.Errorf("producer id: %w", err)}
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
