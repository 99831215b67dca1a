package streaming

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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

// probeWait bounds the run loop's own look at the last stable offsets of
// partitions without a clock (watchClockless): the loop waits on it, and
// looks again a second later.
const probeWait = time.Second

// readBound bounds a read of offsets below a last stable offset (a probe of
// recordWaiting, lastRecords): such a read always ends, as soon as the
// broker answers, so the bound is for a broker that stopped answering. It
// was probeWait: on a loaded machine the read gave up after a second and
// was retried with a new client, again and again.
const readBound = 30 * time.Second

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
//
// A partition without a clock yet (no record since it was assigned, and
// none committed) starts it from the probe: the latest marker's timestamp
// is its last arrival, so it ticks and its idle watermark advances
// (docs/adr/0033-progress-every-partition-and-broker-outages.md).
func (w *Worker) caughtUp(ctx context.Context, part *partition, now time.Time) bool {
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
				if part.lastArrival.IsZero() && !res.marker.IsZero() {
					part.lastArrival, part.lastWall = res.marker, now
				}
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
			waiting, marker, err := w.recordWaiting(ctx, k, from, to)
			ch <- probeResult{waiting, marker, err}
		}()
	}
	return false
}

// probeResult is the answer of a recordWaiting probe.
type probeResult struct {
	waiting bool
	marker  time.Time // the latest marker's timestamp, when only markers wait
	err     error
}

// recordWaiting reports whether raw partition k holds a committed record
// (not a transaction marker) at an offset in [from, to); when it holds
// none, marker is the latest timestamp of the markers there.
func (w *Worker) recordWaiting(ctx context.Context, k tp, from, to int64) (waiting bool, marker time.Time, err error) {
	cl, err := kafkaconn.NewClient(w.cfg.Kafka, "stream-catchup",
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{k.topic: {k.partition: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)
	if err != nil {
		return false, time.Time{}, err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, readBound)
	defer cancel()
	for {
		fs := cl.PollFetches(pctx)
		if err := pctx.Err(); err != nil {
			return false, time.Time{}, fmt.Errorf("streaming: nothing read from %s/%d offset %d within %v: %w",
				k.topic, k.partition, from, readBound, err)
		}
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) {
				return false, time.Time{}, fe.Err
			}
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			switch {
			case done || r.Offset < from:
			case r.Offset >= to:
				done = true
			case !r.Attrs.IsControl():
				waiting, done = true, true
			default:
				if r.Timestamp.After(marker) {
					marker = r.Timestamp
				}
				done = r.Offset+1 >= to
			}
		})
		if done {
			if waiting {
				marker = time.Time{}
			}
			return waiting, marker, nil
		}
	}
}

// clocklessEvery is how often the run loop looks for markers written to
// partitions without a clock (watchClockless).
const clocklessEvery = time.Second

// watchClockless looks, at most every clocklessEvery, for partitions that
// have no clock (nothing arrived since their assignment, nothing
// committed) but whose last stable offset moved past what they processed:
// only transaction markers can have come (a record would have been
// fetched), so their ticks are held to that offset and the probe starts
// their clock from the markers (caughtUp). An empty partition stays
// without a clock: nothing arrived, and a wall clock would make a
// history replayed into it late.
func (w *Worker) watchClockless(ctx context.Context, sess *kgo.GroupTransactSession, now time.Time) {
	if now.Before(w.clocklessAt) {
		return
	}
	w.clocklessAt = now.Add(clocklessEvery)
	var ks []tp
	for k, p := range w.parts {
		if p.lastArrival.IsZero() && p.readTo == 0 && p.probe == nil {
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	ends, err := kadm.NewClient(sess.Client()).ListCommittedOffsets(lctx, topicsOf(ks)...)
	if err != nil {
		w.log.Debug("cannot list the last stable offsets of partitions without a clock", "err", err)
		return
	}
	for _, k := range ks {
		if e, ok := ends.Lookup(k.topic, k.partition); ok && e.Err == nil {
			w.parts[k].holdTicks(e.Offset)
		}
	}
}

// commitUnpolled adds to the transaction's offset commit every partition
// that publishes progress in it but that the session polled no record of
// (kgo commits the offsets of polled records only): a partition that held
// only markers gets a committed offset too, and a new owner's stable
// offset fetch (KIP-447) waits for this transaction before it restores
// the partition — its republished progress cannot be older than what
// this transaction commits. Called with kgo's transaction lock held: it
// only edits the request.
func (w *Worker) commitUnpolled(req *kmsg.TxnOffsetCommitRequest) error {
	for _, part := range w.parts {
		if !(part.touched || part.progressDue) || part.next < 0 {
			continue
		}
		ti := slices.IndexFunc(req.Topics, func(t kmsg.TxnOffsetCommitRequestTopic) bool { return t.Topic == part.topic })
		if ti < 0 {
			t := kmsg.NewTxnOffsetCommitRequestTopic()
			t.Topic = part.topic
			req.Topics = append(req.Topics, t)
			ti = len(req.Topics) - 1
		}
		t := &req.Topics[ti]
		if slices.ContainsFunc(t.Partitions, func(p kmsg.TxnOffsetCommitRequestTopicPartition) bool {
			return p.Partition == part.partition
		}) {
			continue
		}
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = part.partition, part.next, -1
		t.Partitions = append(t.Partitions, p)
	}
	return nil
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
