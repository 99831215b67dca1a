package streaming

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

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
		hs = append(hs, kgo.RecordHeader{Key: headerNextOffset, Value: next},
			kgo.RecordHeader{Key: headerRefresh, Value: []byte(strconv.FormatInt(part.refreshNext, 10))})
		if t, ok := part.procNow(now); ok {
			hs = append(hs, kgo.RecordHeader{Key: headerProc, Value: []byte(strconv.FormatInt(t.UnixNano(), 10))})
		}
		return hs
	}
	sc := w.cfg.Stream
	// A refresh changed the operators outside the raw records: the replay
	// log cannot redo it, a checkpoint holds it (refresh.go).
	refreshed := part.refreshed
	part.refreshed = false
	if !refreshed && part.sinceCkpt < sc.CheckpointRecords && now.Sub(part.ckptWall) < sc.CheckpointInterval &&
		len(part.log.entries) < maxLogEntries {
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

// txn is what one transaction of a session produced so far. Outputs are
// produced as they are made, so their delivery overlaps processing; End
// only flushes the rest and commits.
type txn struct {
	produced atomic.Int64
	perr     produceErrors
	// emit produces records in the transaction; called by parallel
	// partitions.
	emit  func([]*kgo.Record)
	start time.Time
}

// newTxn starts gathering the outputs of a transaction of sess.
func newTxn(octx context.Context, sess *kgo.GroupTransactSession) *txn {
	t := &txn{}
	t.emit = func(rs []*kgo.Record) {
		for _, r := range rs {
			sess.Produce(octx, r, t.perr.promise)
		}
		t.produced.Add(int64(len(rs)))
	}
	return t
}

// emitState adds to the transaction what the touched partitions committed
// with it: late panes, state snapshots and replay log entries, progress.
func (w *Worker) emitState(now time.Time, emit func([]*kgo.Record)) {
	w.applyRefresh()
	for _, part := range w.parts {
		if part.touched {
			emit(w.flushLate(part))
			emit(w.stateRecords(part, now))
		}
		if part.touched || part.progressDue {
			emit(w.progressRecords(part, now))
		}
	}
}

// txnEnd ends the transaction t: it flushes the outputs and, when the
// broker took them all, commits them with the state and the offsets; a
// refused output aborts the transaction (End would commit the rest
// regardless), and an abort by a rebalance reloads the state. An error
// means the session is lost; while stopping, failures only end the last
// transaction uncommitted, for the next owner to redo.
func (w *Worker) txnEnd(ctx, octx context.Context, sess *kgo.GroupTransactSession, t *txn, now time.Time,
	stopping bool,
) error {
	ectx, cancel := context.WithTimeout(octx, w.cfg.Stream.TransactionTimeout)
	defer cancel()
	ectx = kgo.PreTxnCommitFnContext(ectx, w.commitUnpolled)
	if err := sess.Client().Flush(ectx); err == nil {
		if r, n, perrFirst := t.perr.first(); perrFirst != nil {
			cancel()
			w.m.produceFailed(n)
			w.log.Error("outputs refused by the broker; transaction aborted and retried", "failed", n,
				"topic", r.Topic, "partition", r.Partition, "key_bytes", len(r.Key), "value_bytes", len(r.Value),
				"err", perrFirst)
			if err := w.abort(ctx, octx, sess); err != nil && !stopping {
				return err
			}
			return nil
		}
	}
	committed, err := sess.End(ectx, kgo.TryCommit)
	cancel()
	if err != nil {
		if stopping {
			w.log.Warn("last transaction not committed at shutdown; the next owner redoes it", "err", err)
			return nil
		}
		return &sessionLost{fmt.Errorf("end transaction: %w", err)}
	}
	if !committed {
		w.log.Info("transaction aborted (rebalance); reloading state")
		w.dropAllRestore()
		return nil
	}
	w.m.committed(int(t.produced.Load()))
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
	return nil
}
