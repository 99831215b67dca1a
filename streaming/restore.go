package streaming

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/event"
	"reckon/streaming/operator"
)

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
				return nil, fmt.Errorf("state %s is checkpoint %d at offset %d, other streams of the partition are at %d/%d", key,
					snap.epoch, snap.next, epoch, from)
			}
			epoch, from, haveCkpt = snap.epoch, snap.next, true
			proc = max(proc, snap.proc)
			p.refreshNext = max(p.refreshNext, snap.refresh)
		}
		p.ops = append(p.ops,
			&streamOp{cfg: s, op: op, keyPath: "data." + s.KeyField, valuePath: "data." + s.ValueField,
				settings: s.SettingsDigest()})
	}
	p.log = replayLog{epoch: epoch, from: from}
	if lg, ok := snaps[logKey(k.topic, k.partition)]; ok && (!haveCkpt || lg.epoch == epoch) {
		l, err := decodeLog(lg.state)
		if err != nil {
			return nil, fmt.Errorf("state %s: %w", logKey(k.topic, k.partition), err)
		}
		if l.epoch != lg.epoch || (haveCkpt && l.from != from) {
			return nil, fmt.Errorf("state %s: log of checkpoint %d from offset %d does not continue checkpoint %d at offset %d",
				logKey(k.topic, k.partition), l.epoch, l.from, epoch, from)
		}
		p.log = *l
		proc = max(proc, lg.proc)
		p.refreshNext = max(p.refreshNext, lg.refresh)
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
		return nil, fmt.Errorf("state of %s/%d is at offset %d but the committed offset is %d: state not yet visible",
			k.topic, k.partition, end, first)
	}
	if err := w.replay(ctx, p); err != nil {
		return nil, err
	}
	p.next = max(end, first)
	return p, nil
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
