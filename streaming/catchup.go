package streaming

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/kafkaconn"
)

// A restored partition resumes its processing clock where the committed
// state left it, so downtime does not count as idle time
// (docs/adr/0012-stream-state-replay-log.md). Its ticks must also wait for
// the records that arrived during the downtime: the session's first fetch
// of a newly assigned partition can take a long poll (kgo's FetchMaxWait)
// while the partition already ticks, and a tick then idle-advances the
// watermark past windows the waiting records belong to — an uninterrupted
// worker would have counted them, the restarted one sends them to the late
// topic. So a restored partition does not tick until it has been read to
// the last stable offset it had when it was assigned
// (docs/adr/0015-stream-progress.md).

// probeWait bounds one look at what waits in a partition.
const probeWait = time.Second

// holdTicks holds the partition's ticks until the records before offset
// lso are processed.
func (p *partition) holdTicks(lso int64) {
	if lso > p.next {
		p.readTo = lso
	}
}

// caughtUp reports whether part may tick: it has been read to its
// last stable offset as of its assignment. next stops at the last record
// processed, so a transaction marker (or an aborted batch) just below that
// offset would hold the partition for ever: when the session delivered
// nothing for the partition since the last tick, a probe of the range
// tells markers from records still waiting. The probe reads on a
// goroutine of its own (the run loop does not wait on it); a later tick
// takes its answer.
func (w *Worker) caughtUp(ctx context.Context, part *partition) bool {
	if part.readTo == 0 {
		return true
	}
	fetched := part.fetched
	part.fetched = false
	if part.next >= part.readTo {
		part.readTo, part.probe = 0, nil
		return true
	}
	if part.probe != nil {
		select {
		case res := <-part.probe:
			part.probe = nil
			if res.err != nil {
				w.log.Debug("cannot tell whether records wait; ticks held", "topic", part.topic, "partition", part.partition, "to", part.readTo, "err", res.err)
				return false
			}
			// Nothing but markers from the probe's start (at most next:
			// next only grows) to readTo.
			if !res.waiting {
				part.readTo = 0
				return true
			}
		default:
		}
		return false
	}
	if !fetched {
		ch := make(chan probeResult, 1)
		part.probe = ch
		k, from, to := part.tp, part.next, part.readTo
		go func() {
			waiting, err := w.recordWaiting(ctx, k, from, to)
			ch <- probeResult{waiting, err}
		}()
	}
	return false
}

// probeResult is the answer of a recordWaiting probe.
type probeResult struct {
	waiting bool
	err     error
}

// recordWaiting reports whether raw partition k holds a committed record
// (not a transaction marker) at an offset in [from, to).
func (w *Worker) recordWaiting(ctx context.Context, k tp, from, to int64) (bool, error) {
	cl, err := kafkaconn.NewClient(w.cfg.Kafka, "stream-catchup",
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{k.topic: {k.partition: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)
	if err != nil {
		return false, err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	for {
		fs := cl.PollFetches(pctx)
		if err := pctx.Err(); err != nil {
			return false, fmt.Errorf("streaming: nothing read from %s/%d offset %d within %v: %w", k.topic, k.partition, from, probeWait, err)
		}
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) {
				return false, fe.Err
			}
		}
		waiting, done := false, false
		fs.EachRecord(func(r *kgo.Record) {
			switch {
			case done || r.Offset < from:
			case r.Offset >= to:
				done = true
			case !r.Attrs.IsControl():
				waiting, done = true, true
			case r.Offset+1 >= to:
				done = true
			}
		})
		if done {
			return waiting, nil
		}
	}
}

// topicsOf lists the distinct topics of ks.
func topicsOf(ks []tp) []string {
	var ts []string
	for _, k := range ks {
		if !slices.Contains(ts, k.topic) {
			ts = append(ts, k.topic)
		}
	}
	return ts
}
