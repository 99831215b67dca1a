package streaming

import (
	"strconv"
	"sync"
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
