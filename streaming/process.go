package streaming

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/event"
	"reckon/streaming/operator"
)

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
func (w *Worker) pollOnce(ctx context.Context, sess *kgo.GroupTransactSession, revoked chan []tp, wait time.Duration,
	emit func([]*kgo.Record)) *recordRef {
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
			w.log.Error("processing failed; will retry", "topic", part.topic, "partition", part.partition, "offset", r.Offset,
				"attempt", n, "panic", p)
			out, ok = nil, false
		}
	}()
	env, verdict := part.gate.Check(r.Value, r.Timestamp)
	if !verdict.Valid {
		w.m.dead(part.topic, "gate")
		dl := event.NewDeadLetter(verdict, r.Topic, r.Partition, r.Offset, r.Timestamp, w.now())
		return []*kgo.Record{w.deadLetter(r, dl)}, true
	}
	id := operator.EventID(env.EventUUID()) // parsed by the gate's check
	matched := false
	for _, so := range part.ops {
		if !typeIn(env.EventType, so.cfg.EventTypes) {
			continue
		}
		matched = true
		// A view of the record's bytes: the operator copies the keys it keeps.
		key, okKey := env.StringView(so.keyPath)
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
			return []*kgo.Record{w.deadLetter(r,
				event.DeadLetter{Reason: reason, Reasons: []string{reason}, Fields: []string{field},
					Attempts: 1, Stage: "gate"})}, true
		}
		v, err := so.op.Process(operator.Record{ID: id, Key: key, Value: value, EventTime: env.OccurredAt,
			Arrival: r.Timestamp, Ref: r.Offset}, &so.out)
		if err != nil {
			w.m.dead(part.topic, "process")
			dl := event.DeadLetter{Reason: "process: " + err.Error(), Reasons: []string{"process: " + err.Error()}, Attempts: 1,
				Stage: "process"}
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

// pollTxn polls and processes for what is left of CommitInterval since
// the transaction began, and returns the record that failed processing,
// if any.
func (w *Worker) pollTxn(ctx context.Context, sess *kgo.GroupTransactSession, revoked chan []tp, t *txn) *recordRef {
	t.start = w.now()
	var failed *recordRef
	for failed == nil && ctx.Err() == nil {
		wait := w.cfg.Stream.CommitInterval - w.now().Sub(t.start)
		if wait <= 0 {
			break
		}
		failed = w.pollOnce(ctx, sess, revoked, wait, t.emit)
	}
	return failed
}

// tick advances every caught-up partition's operators to its processing
// time now and emits what fires.
func (w *Worker) tick(ctx context.Context, sess *kgo.GroupTransactSession, now time.Time, emit func([]*kgo.Record)) {
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
