package streaming

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
	"reckon/internal/metrics"
	"reckon/streaming/operator"
)

// Late events folded back (docs/adr/0040-feature-lookups.md, R-LOOK-5): a
// too-late event the lake holds comes back on the refresh topic (one
// partition); the worker owning its raw partition applies it to the
// stream's operator (operator.Refresh: inserted into the key's rolling
// buffer once per event id, while inside the rolling horizon) inside its
// transaction. The partition's state records carry the next refresh offset
// it has considered, and a transaction that applied one writes a
// checkpoint (the replay log redoes raw records only), so a refresh is
// applied exactly once across aborts, kills and moves.

// refreshRec is one record read from the refresh topic.
type refreshRec struct {
	off int64
	r   event.StreamRefresh
	id  operator.EventID
}

// refresher follows the refresh topic's partition 0 from its start
// (read committed) and keeps what it read for the partitions to apply.
type refresher struct {
	log     *slog.Logger
	counter *metrics.Vec

	mu   sync.Mutex
	recs []refreshRec // in offset order
	end  int64        // next offset to read: everything before it is in recs or was unusable

	cl   *kgo.Client
	done chan struct{}
}

func newRefresher(cfg *config.Config, log *slog.Logger, reg *metrics.Registry) *refresher {
	if reg == nil {
		reg = metrics.NewRegistry()
	}
	return &refresher{log: log, counter: reg.Counter("reckon_stream_refreshes_total",
		"State-refresh records considered by the owning partition: applied (a too-late event now counted in rolling "+
			"features), duplicate (its event_id was applied before), outside (past the rolling horizon), unprocessed "+
			"(its raw record not yet processed).",
		"stream", "result")}
}

// start begins following the topic; a failure to build the client leaves
// refreshes off (logged), not the stream.
func (f *refresher) start(ctx context.Context, cfg *config.Config) {
	if !rollingAny(cfg) {
		return
	}
	cl, err := kafkaconn.NewClient(cfg.Kafka, "stream-refresh",
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topics.StreamRefresh: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		f.log.Error("late events are not folded back: refresh topic client", "err", err)
		return
	}
	f.cl, f.done = cl, make(chan struct{})
	go f.run(ctx)
}

func rollingAny(cfg *config.Config) bool {
	for _, s := range cfg.Streams {
		if s.Rolling > 0 {
			return true
		}
	}
	return false
}

func (f *refresher) stop() {
	if f.cl == nil {
		return
	}
	f.cl.Close()
	<-f.done
}

func (f *refresher) run(ctx context.Context) {
	defer close(f.done)
	for {
		fs := f.cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				f.log.Warn("refresh topic: fetch error; retrying", "topic", t, "partition", p, "err", err)
			}
		})
		f.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			f.end = max(f.end, r.Offset+1)
			if r.Attrs.IsControl() {
				return
			}
			rr, err := event.DecodeRefresh(r.Value)
			id, ok := operator.ParseEventID(rr.EventID)
			if err != nil || !ok {
				f.log.Warn("refresh record skipped", "offset", r.Offset, "err", err, "event_id", rr.EventID)
				return
			}
			f.recs = append(f.recs, refreshRec{r.Offset, rr, id})
		})
		f.mu.Unlock()
	}
}

// applyRefresh applies, on the run loop's goroutine, the refresh records
// read since each partition's refreshNext to the partitions this worker
// holds.
func (w *Worker) applyRefresh() {
	f := w.refresh
	if f.cl == nil {
		return
	}
	f.mu.Lock()
	end, recs := f.end, f.recs
	f.mu.Unlock()
	for _, part := range w.parts {
		if part.refreshNext >= end {
			continue
		}
		// recs is append-only and sorted: the first at or after refreshNext.
		i, _ := slices.BinarySearchFunc(recs, part.refreshNext, func(r refreshRec, off int64) int {
			return cmp.Compare(r.off, off)
		})
		named := false
		for _, rr := range recs[i:] {
			if rr.r.Topic != part.topic || rr.r.Partition != part.partition {
				continue
			}
			named = true
			if rr.r.Offset >= part.next {
				// The raw record is not processed yet (state started
				// afresh while the refresh topic held it): processing will
				// count it or send it late again; folding it back now
				// would count it twice.
				f.counter.With(rr.r.Stream, "unprocessed").Add(1)
				continue
			}
			for _, so := range part.ops {
				if so.cfg.Name != rr.r.Stream {
					continue
				}
				v := so.op.Refresh(rr.id, rr.r.Key, rr.r.EventTime, rr.r.Value)
				f.counter.With(so.cfg.Name, [...]string{"applied", "duplicate", "outside"}[v]).Add(1)
				if v == operator.RefreshApplied {
					part.refreshed = true
				}
			}
		}
		// Only a partition a record named writes state for it; the others
		// would reconsider nothing but markers after a restart.
		part.refreshNext = end
		part.touched = part.touched || named
	}
}
