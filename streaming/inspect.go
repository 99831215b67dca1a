package streaming

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
)

// This file holds read-only inspection helpers for the conservation check
// (`reckon verify`, docs/requirements.md R-PROOF-1) and tests: they read
// what the stream committed
// and published, never write.

// maxStatePartitions bounds the raw partitions whose state is looked up.
const maxStatePartitions = 256

// CommittedStats sums the committed operator counters of stream s over its
// raw topic's partitions, read from the state topic (read_committed), and
// returns the lowest watermark among them (zero when no partition has one).
// Each partition is restored as a worker would: checkpoint + replay log.
func CommittedStats(ctx context.Context, cfg *config.Config, s config.Stream) (accepted, duplicates, late int64, minWatermark time.Time, err error) {
	w, err := New(cfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		return 0, 0, 0, time.Time{}, err
	}
	want := map[string]bool{}
	for p := int32(0); p < maxStatePartitions; p++ {
		maps.Copy(want, w.stateKeys(tp{s.Topic, p}))
	}
	snaps, err := loadState(ctx, cfg, want)
	if err != nil {
		return 0, 0, 0, time.Time{}, err
	}
	for p := int32(0); p < maxStatePartitions; p++ {
		k := tp{s.Topic, p}
		found := false
		for key := range w.stateKeys(k) {
			_, ok := snaps[key]
			found = found || ok
		}
		if !found {
			continue
		}
		part, err := w.restore(ctx, k, -1, snaps)
		if err != nil {
			return 0, 0, 0, time.Time{}, err
		}
		for _, so := range part.ops {
			if so.cfg.Name != s.Name {
				continue
			}
			if wm, ok := so.op.Watermark(); ok && (minWatermark.IsZero() || wm.Before(minWatermark)) {
				minWatermark = wm
			}
			st := so.op.Stats()
			accepted += int64(st.Accepted)
			duplicates += int64(st.Duplicates)
			late += int64(st.Late)
		}
	}
	return accepted, duplicates, late, minWatermark, nil
}

// sourceOf is the "topic/partition/offset" of the raw record a DLQ or late
// record came from, from its headers.
func sourceOf(r *kgo.Record) (topic, src string) {
	var p, off string
	for _, h := range r.Headers {
		switch h.Key {
		case event.HeaderSourceTopic:
			topic = string(h.Value)
		case event.HeaderSourcePartition:
			p = string(h.Value)
		case event.HeaderSourceOffset:
			off = string(h.Value)
		}
	}
	return topic, topic + "/" + p + "/" + off
}

// lateStream reports whether late record r is stream's: its reckon.stream
// header names it (a record without one is every stream's of its topic).
func lateStream(r *kgo.Record, stream string) bool {
	for _, h := range r.Headers {
		if h.Key == "reckon.stream" {
			return string(h.Value) == stream
		}
	}
	return true
}

// Outputs is what a stream published and committed, read back from its
// topics and committed state (`reckon verify` checks it against a
// generator's manifest).
type Outputs struct {
	// Panes are the highest-version panes per window key (event.WindowKey),
	// stream panes and batch corrections alike.
	Panes map[string]event.Pane
	// Late and DLQ hold the source "topic/partition/offset" of every record
	// on the late side output and the dead-letter topic that came from the
	// stream's raw topic; DLQ maps to the reason header.
	Late map[string]bool
	DLQ  map[string]string
	// Accepted, Duplicates and LateCount are the stream operators' own
	// counters summed over partitions (from the committed state): records
	// applied to windows/features, redeliveries dropped, records sent to
	// the late output.
	Accepted, Duplicates, LateCount int64
	// Watermark is the lowest watermark over the stream's partitions (zero:
	// unknown).
	Watermark time.Time
	// OnTime counts the stream's on_time panes; EarlyOnTime lists those
	// emitted (by the stream's processing clock, the record timestamps)
	// before their window end + out_of_orderness: panes that claimed a
	// window complete before the clock reached it (docs/adr/0015). Must
	// stay empty.
	OnTime      int64
	EarlyOnTime []string
}

// CollectOutputs gathers what stream s published and committed: the
// highest version per window from the summaries topic (stream and batch
// corrections alike), its on_time panes fired too early (processing
// clock), the late and DLQ records whose source is s's raw topic, and the
// operators' committed counters and lowest watermark.
func CollectOutputs(ctx context.Context, cfg *config.Config, s config.Stream) (Outputs, error) {
	out := Outputs{Panes: map[string]event.Pane{}, Late: map[string]bool{}, DLQ: map[string]string{}}
	err := kafkaconn.ReadTopic(ctx, cfg.Kafka, "verify", cfg.Topics.Summaries, func(r *kgo.Record) error {
		var p event.Pane
		if err := json.Unmarshal(r.Value, &p); err != nil {
			return fmt.Errorf("streaming: summaries %d/%d: %w", r.Partition, r.Offset, err)
		}
		if p.Stream != s.Name {
			return nil
		}
		if p.Timing == event.TimingOnTime && p.ComputedBy == event.ComputedByStream {
			out.OnTime++
			// On the processing clock (processed_at, or emitted_at of a
			// pane published before it): when it was produced is later.
			if due := p.WindowEnd.Add(s.OutOfOrderness); p.Processed().Before(due) {
				out.EarlyOnTime = append(out.EarlyOnTime, fmt.Sprintf("%s v%d processed %s, due %s",
					p.RecordKey(), p.Version, p.Processed().UTC().Format(time.RFC3339Nano), due.UTC().Format(time.RFC3339Nano)))
			}
		}
		k := p.RecordKey()
		if cur, ok := out.Panes[k]; !ok || p.Version > cur.Version {
			out.Panes[k] = p
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	if err := kafkaconn.ReadTopic(ctx, cfg.Kafka, "verify", cfg.Topics.Late, func(r *kgo.Record) error {
		// Streams sharing a topic (a hopping one beside a tumbling one)
		// each judge lateness: a late record is its stream's.
		if t, src := sourceOf(r); t == s.Topic && lateStream(r, s.Name) {
			out.Late[src] = true
		}
		return nil
	}); err != nil {
		return out, err
	}
	if err := kafkaconn.ReadTopic(ctx, cfg.Kafka, "verify", cfg.Topics.DLQ, func(r *kgo.Record) error {
		t, src := sourceOf(r)
		if t != s.Topic {
			return nil
		}
		reason := ""
		for _, h := range r.Headers {
			if h.Key == event.HeaderReason {
				reason = string(h.Value)
			}
		}
		out.DLQ[src] = reason
		return nil
	}); err != nil {
		return out, err
	}
	out.Accepted, out.Duplicates, out.LateCount, out.Watermark, err = CommittedStats(ctx, cfg, s)
	return out, err
}

// WaitCaughtUp waits until the stream group has committed every raw record
// of every configured stream's topic that was there when it first looked,
// or ctx ends. It looks every 100 ms. The end offsets are fixed at the
// first look: under live traffic the end moves on with every record, and a
// wait for the latest end would chase it (issue 24).
// A partition is caught up when its committed offset reaches its end, or
// when only transaction markers and aborted records lie between the two:
// a read_committed consumer never receives those as records, so the
// offset it commits stops at the last record it processed.
func WaitCaughtUp(ctx context.Context, cfg *config.Config) error {
	return waitCaughtUp(ctx, cfg, 100*time.Millisecond, nil)
}

// waitCaughtUp is WaitCaughtUp looking every interval (the end-to-end
// benchmark looks more often: its run takes well under a second); looked,
// when set, is called once the first look has fixed the ends (a test's
// barrier).
func waitCaughtUp(ctx context.Context, cfg *config.Config, every time.Duration, looked func()) error {
	adm, closeAdm, err := kafkaconn.NewAdmin(cfg.Kafka, "verify")
	if err != nil {
		return err
	}
	defer closeAdm()
	var raw []string
	for _, s := range cfg.Streams {
		raw = append(raw, s.Topic)
	}
	last := "nothing read yet"
	// tails holds what is known of each partition's last offsets, read
	// once per end offset: not once per look, nor per commit.
	tails := map[tp]tail{}
	// target is each partition's end at the first look.
	target := map[tp]int64{}
	for {
		ends, err1 := adm.ListEndOffsets(ctx, raw...)
		if err1 == nil {
			ends.Each(func(o kadm.ListedOffset) {
				if _, fixed := target[tp{o.Topic, o.Partition}]; !fixed {
					target[tp{o.Topic, o.Partition}] = o.Offset
				}
			})
			if looked != nil {
				looked()
				looked = nil
			}
		}
		committed, err2 := adm.FetchOffsetsForTopics(ctx, cfg.Stream.Group, raw...)
		if err1 == nil && err2 == nil {
			done := true
			reads := map[tp]span{}
			ends.Each(func(o kadm.ListedOffset) {
				k := tp{o.Topic, o.Partition}
				end := target[k]
				if end <= 0 {
					return
				}
				c := int64(0)
				if co, ok := committed.Lookup(o.Topic, o.Partition); ok {
					c = max(co.At, 0)
				}
				if c >= end {
					return
				}
				t, ok := tails[k]
				if !ok || t.end != end {
					t = tail{end: end, from: end, last: -1}
					tails[k] = t
				}
				switch {
				case t.last >= 0 && c > t.last, t.last < 0 && c >= t.from:
					return // only markers and aborted records from c on
				case t.last < 0:
					// Read further down, doubling what was read, not
					// below c.
					reads[k] = span{max(c, t.from-max(tailWindow, t.end-t.from)), t.from}
				}
				done = false
				last = fmt.Sprintf("%s/%d committed %d of %d", o.Topic, o.Partition, c, end)
			})
			if done {
				return nil
			}
			if len(reads) > 0 {
				found, err := lastRecords(ctx, cfg.Kafka, reads)
				if err == nil {
					for k, off := range found {
						t := tails[k]
						t.from, t.last = reads[k].from, off
						tails[k] = t
					}
					continue // look again at once with what was read
				}
				last = fmt.Sprintf("%s (%v)", last, err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("streaming: not caught up: %s: %w", last, ctx.Err())
		case <-time.After(every):
		}
	}
}

// tailWindow is how many offsets below a partition's end WaitCaughtUp
// reads first for the partition's last record; only when those are all
// markers and aborted records does it read further down.
const tailWindow = 64

// tail is what WaitCaughtUp has read of the offsets [from, end) of a
// partition whose end is end.
type tail struct {
	end, from int64
	// last is the offset of the last record in [from, end) (not a
	// transaction marker, not aborted); -1: none.
	last int64
}

// span is the offsets [from, to).
type span struct{ from, to int64 }

// lastRecords reads the given spans of raw partitions as the stream reads
// them (read committed: aborted records are skipped), transaction markers
// included, and returns the offset of the last record in each span, -1
// where it holds markers and aborted records only. Below a partition's
// last stable offset a span's last offset is a record or a marker, so the
// read ends there; above it the read waits for the open transaction to
// end. A span it does not reach within readBound (a transaction left open
// by a dead producer, until the broker aborts it) fails the read.
func lastRecords(ctx context.Context, cfg config.Kafka, spans map[tp]span) (map[tp]int64, error) {
	from := map[string]map[int32]kgo.Offset{}
	out := map[tp]int64{}
	for k, s := range spans {
		if from[k.topic] == nil {
			from[k.topic] = map[int32]kgo.Offset{}
		}
		from[k.topic][k.partition] = kgo.NewOffset().At(s.from)
		out[k] = -1
	}
	cl, err := kafkaconn.NewClient(cfg, "verify",
		kgo.ConsumePartitions(from),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, readBound)
	defer cancel()
	left := maps.Clone(spans)
	for len(left) > 0 {
		fs := cl.PollFetches(pctx)
		if err := pctx.Err(); err != nil {
			return nil, fmt.Errorf("streaming: the ends of %d partitions not read within %v: %w", len(left), readBound, err)
		}
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) {
				return nil, fmt.Errorf("streaming: read %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			k := tp{r.Topic, r.Partition}
			s, ok := left[k]
			if !ok || r.Offset < s.from {
				return
			}
			if r.Offset < s.to && !r.Attrs.IsControl() {
				out[k] = r.Offset
			}
			if r.Offset+1 >= s.to {
				delete(left, k)
			}
		})
	}
	return out, nil
}

// RunUntilCaughtUp runs a stream worker in process until the stream group
// has committed every raw offset, then stops it.
func RunUntilCaughtUp(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	w, err := New(cfg, log, nil)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(rctx) }()
	werr := WaitCaughtUp(ctx, cfg)
	cancel()
	if err := <-done; err != nil && werr == nil {
		werr = err
	}
	return werr
}
