package streaming

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/kafkaconn"
)

// A raw partition's operator state is committed as a checkpoint (the full
// snapshot of each stream's operator, written every CheckpointInterval or
// CheckpointRecords) plus a replay log: what every committed transaction
// since the checkpoint did to the partition — the offset it processed up
// to, the processing time of its tick, and the offsets it dead-lettered
// without processing. Replaying the raw records after the checkpoint
// through the log rebuilds exactly the committed state (the operators are
// deterministic in their inputs); see docs/adr/0012-stream-state-replay-log.md.

// logEntry is one committed transaction's effect on a partition: records
// from the previous entry's next up to next (exclusive), except skipped,
// were processed, then, when tick is non-zero, a tick at processing time
// tick (Unix nanoseconds).
type logEntry struct {
	next    int64
	tick    int64
	skipped []int64
}

// replayLog is the partition's log since checkpoint epoch.
type replayLog struct {
	epoch   int64
	from    int64 // the checkpoint's next offset
	entries []logEntry
}

const (
	logMagic   = "RKL"
	logVersion = 1
	// maxLogEntries bounds the replay log record: past it the next commit
	// writes a checkpoint instead (the log is rewritten whole each time).
	maxLogEntries = 512
	// maxSkipped bounds the skipped offsets decoded per entry.
	maxSkipped = 1 << 16
)

var errLog = errors.New("streaming: invalid replay log")

// end is the next offset after the last logged transaction.
func (l *replayLog) end() int64 {
	if len(l.entries) == 0 {
		return l.from
	}
	return l.entries[len(l.entries)-1].next
}

// encode renders the log for the state topic.
func (l *replayLog) encode() []byte {
	b := make([]byte, 0, 16+len(l.entries)*12)
	b = append(b, logMagic...)
	b = append(b, logVersion)
	b = binary.AppendVarint(b, l.epoch)
	b = binary.AppendVarint(b, l.from)
	b = binary.AppendUvarint(b, uint64(len(l.entries)))
	prev := l.from
	for _, e := range l.entries {
		b = binary.AppendUvarint(b, uint64(e.next-prev))
		b = binary.AppendVarint(b, e.tick)
		b = binary.AppendUvarint(b, uint64(len(e.skipped)))
		p := prev
		for _, s := range e.skipped {
			b = binary.AppendUvarint(b, uint64(s-p))
			p = s
		}
		prev = e.next
	}
	return b
}

// decodeLog parses a log record. Offsets must not go backwards and skipped
// offsets must lie inside their entry.
func decodeLog(b []byte) (*replayLog, error) {
	if len(b) < len(logMagic)+1 || string(b[:len(logMagic)]) != logMagic {
		return nil, fmt.Errorf("%w: bad magic", errLog)
	}
	if b[len(logMagic)] != logVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", errLog, b[len(logMagic)], logVersion)
	}
	b = b[len(logMagic)+1:]
	var err error
	uvarint := func() uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			err = fmt.Errorf("%w: truncated", errLog)
			return 0
		}
		b = b[n:]
		return v
	}
	varint := func() int64 { // binary.AppendVarint's zig-zag encoding
		u := uvarint()
		return int64(u>>1) ^ -int64(u&1)
	}
	l := &replayLog{epoch: varint(), from: varint()}
	count := uvarint()
	if err != nil {
		return nil, err
	}
	if l.from < 0 {
		return nil, fmt.Errorf("%w: negative offset", errLog)
	}
	if count > maxLogEntries {
		return nil, fmt.Errorf("%w: %d entries (at most %d)", errLog, count, maxLogEntries)
	}
	prev := l.from
	const maxOffset = 1 << 62
	for range count {
		d := uvarint()
		e := logEntry{tick: varint()}
		ns := uvarint()
		if err != nil {
			return nil, err
		}
		if d > maxOffset || prev+int64(d) > maxOffset {
			return nil, fmt.Errorf("%w: offset overflow", errLog)
		}
		e.next = prev + int64(d)
		if ns > maxSkipped || ns > uint64(e.next-prev) {
			return nil, fmt.Errorf("%w: %d skipped offsets in an entry of %d", errLog, ns, e.next-prev)
		}
		p := prev
		for i := range ns {
			s := uvarint()
			if err != nil {
				return nil, err
			}
			if s > uint64(e.next-p) || (i > 0 && s == 0) {
				return nil, fmt.Errorf("%w: skipped offset outside its entry", errLog)
			}
			p += int64(s)
			if p >= e.next {
				return nil, fmt.Errorf("%w: skipped offset outside its entry", errLog)
			}
			e.skipped = append(e.skipped, p)
		}
		l.entries = append(l.entries, e)
		prev = e.next
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errLog, len(b))
	}
	return l, nil
}

// isSkipped reports whether offset o was dead-lettered without processing
// by the entry covering it.
func (e *logEntry) isSkipped(o int64) bool {
	_, ok := slices.BinarySearch(e.skipped, o)
	return ok
}

// replayWait bounds the wait for the next raw record during a replay.
const replayWait = 10 * time.Second

// replay runs the raw records of p's replay log through its operators,
// with the log's ticks at their places, discarding outputs (they were
// committed with the transactions the log describes).
func (w *Worker) replay(ctx context.Context, p *partition) error {
	l := &p.log
	if len(l.entries) == 0 {
		return nil
	}
	saved := w.m
	w.replaying, w.m = true, newWorkerMetrics(nil)
	defer func() { w.replaying, w.m = false, saved }()
	i := 0
	// ticks ends the transactions (entries) that end at or before offset
	// as the worker did: their tick, then the held late panes' flush.
	ticks := func(offset int64) {
		for ; i < len(l.entries) && l.entries[i].next <= offset; i++ {
			for _, so := range p.ops {
				if t := l.entries[i].tick; t != 0 {
					tickOp(so, time.Unix(0, t).UTC(), l.entries[i].next)
				}
				so.op.FlushLate(&so.out)
				so.out.Reset()
			}
		}
	}
	end := l.end()
	if end > l.from {
		cl, err := kafkaconn.NewClient(w.cfg.Kafka, "stream-replay",
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{p.topic: {p.partition: kgo.NewOffset().At(l.from)}}),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			// Records deleted by retention before a checkpoint cannot be
			// replayed: an error, never a silent skip.
			kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		)
		if err != nil {
			return fmt.Errorf("streaming: replay %s/%d: %w", p.topic, p.partition, err)
		}
		defer cl.Close()
		for last := l.from - 1; last < end-1; {
			pctx, cancel := context.WithTimeout(ctx, replayWait)
			fs := cl.PollFetches(pctx)
			cancel()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			for _, fe := range fs.Errors() {
				if errors.Is(fe.Err, context.DeadlineExceeded) {
					return fmt.Errorf("streaming: replay %s/%d: no record after offset %d within %v (want up to %d)", p.topic,
						p.partition, last, replayWait, end-1)
				}
				return fmt.Errorf("streaming: replay %s/%d from offset %d: %w", p.topic, p.partition, l.from, fe.Err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				switch {
				case r.Offset <= last:
					return
				case r.Offset >= end:
					last = end - 1
					return
				}
				ticks(r.Offset)
				last = r.Offset
				if i < len(l.entries) && l.entries[i].isSkipped(r.Offset) {
					return
				}
				if _, ok := w.processRecord(p, r); !ok {
					w.log.Warn("record failed during replay; it had been processed before the restart", "topic", r.Topic, "partition",
						r.Partition, "offset", r.Offset)
				}
			})
		}
	}
	ticks(end)
	return nil
}
