package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
	"reckon/lake"
	"reckon/streaming/progress"
)

// Truth holds the dependencies of the batch-truth activities: the pane
// archive, the late-topic reader, recompute, reports and replay status
// (docs/adr/0008-batch-truth.md). Its methods are safe for concurrent use.
type Truth struct {
	Cfg  *config.Config
	Lake *lake.Lake
	// Now is the clock; default time.Now.
	Now func() time.Time
	// SignalLate hands the too-late events of one stream to its targeted
	// correction workflow (signal-with-start). The wiring sets it: the
	// workflow's names live in package workflows, which activities must
	// not import.
	SignalLate func(ctx context.Context, stream string, items []LateItem) error
	// Progress follows the stream's progress topic: the horizon's only
	// evidence (CheckHorizon). Built once by the worker wiring.
	Progress *progress.View
}

func (a *Truth) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// Error types of the truth activities that no retry can fix.
const (
	ErrTypeTruthInput = "TruthInvalidInput" // unknown stream, bad range
	ErrTypeTruthTopic = "TruthTopic"        // a topic or partition that does not exist
	// ErrTypeTruthSettings: the stream publishes progress under other
	// window settings than the batch's configuration.
	ErrTypeTruthSettings = "TruthSettingsMismatch"
)

func badInput(format string, a ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("truth: "+format, a...), ErrTypeTruthInput, nil)
}

// ---- pane archive ------------------------------------------------------

// PaneCursor returns where archiving the summaries partition resumes: the
// lake's progress for it, or 0.
func (a *Truth) PaneCursor(ctx context.Context, topic string, partition int32) (int64, error) {
	p, err := a.Lake.ReadProgress(ctx, topic, partition)
	if errors.Is(err, lake.ErrNoProgress) {
		return 0, nil
	}
	return p.NextOffset, err
}

// PaneEnd is the end of the readable part of a summaries partition.
type PaneEnd struct {
	// End is the last stable offset: every offset below it is committed,
	// aborted or a control record, and stays so.
	End int64
	// ObservedAt is when End was read: everything published before it
	// lies below End.
	ObservedAt time.Time
}

// PaneArchiveEnd reads the last stable offset of topic/partition. The
// workflow fixes the step's range from it, so a retried step reads exactly
// the same records and writes the same files.
func (a *Truth) PaneArchiveEnd(ctx context.Context, topic string, partition int32) (PaneEnd, error) {
	adm, closeAdm, err := kafkaconn.NewAdmin(a.Cfg.Kafka, "pane-archive")
	if err != nil {
		return PaneEnd{}, err
	}
	defer closeAdm()
	res := PaneEnd{ObservedAt: a.now()}
	res.End, err = lastStable(ctx, adm, topic, partition)
	return res, err
}

// ArchivePanesInput is one pane archive step: the offsets [From, To).
type ArchivePanesInput struct {
	Topic     string
	Partition int32
	From, To  int64
	// End and ObservedAt are the PaneEnd the range was cut from: when To
	// reaches End, the partition is archived through ObservedAt.
	End        int64
	ObservedAt time.Time
}

// ArchivePanesResult says what one step archived.
type ArchivePanesResult struct {
	Next int64
	// Records read (committed data records); Panes archived; Skipped are
	// records that are not panes (reported, not archived).
	Records, Panes, Skipped int64
	Files                   []string
	ArchivedThrough         time.Time
}

// ArchivePanes reads the committed panes in [From, To) of a summaries
// partition and writes them to the lake's summaries table, one file per
// stream and window date named <topic>-<partition>-<From>-<To-1>, then
// records progress. A retry reads the same range and rewrites the same
// files.
func (a *Truth) ArchivePanes(ctx context.Context, in ArchivePanesInput) (ArchivePanesResult, error) {
	res := ArchivePanesResult{Next: in.From}
	if in.To < in.From || in.From < 0 {
		return res, badInput("pane archive range [%d, %d)", in.From, in.To)
	}
	byStream := map[string][]event.Pane{}
	var order []string
	if in.To > in.From {
		err := readCommitted(ctx, a.Cfg.Kafka, "pane-archive", in.Topic, in.Partition, in.From, in.To, func(r *kgo.Record) {
			res.Records++
			var p event.Pane
			if err := json.Unmarshal(r.Value, &p); err != nil || p.Stream == "" || lake.ValidateName(p.Stream) != nil {
				res.Skipped++
				return
			}
			if _, ok := byStream[p.Stream]; !ok {
				order = append(order, p.Stream)
			}
			byStream[p.Stream] = append(byStream[p.Stream], p)
			res.Panes++
		})
		if err != nil {
			return res, err
		}
		name := lake.FileName(in.Topic, in.Partition, in.From, in.To-1)
		name = name[:len(name)-len(".parquet")]
		for _, s := range order {
			files, err := a.Lake.WritePanes(ctx, s, name, byStream[s])
			if err != nil {
				return res, err
			}
			for _, f := range files {
				res.Files = append(res.Files, f.Path)
			}
		}
	}
	res.Next = in.To
	prev, err := a.Lake.ReadProgress(ctx, in.Topic, in.Partition)
	if err != nil && !errors.Is(err, lake.ErrNoProgress) {
		return res, err
	}
	res.ArchivedThrough = prev.ArchivedThrough
	if in.To >= in.End {
		res.ArchivedThrough = in.ObservedAt
	}
	if in.To == prev.NextOffset && res.ArchivedThrough.Equal(prev.ArchivedThrough) {
		return res, nil
	}
	_, err = a.Lake.WriteProgress(ctx, lake.Progress{Topic: in.Topic, Partition: in.Partition, NextOffset: in.To, ArchivedThrough: res.ArchivedThrough, UpdatedAt: a.now()})
	return res, err
}

// readCommitted calls fn for every committed data record of
// topic/partition in [from, to), to being at most the last stable offset.
// Control records are read too, so the end is known exactly (the last
// offset below the LSO is always a committed, non-transactional or control
// record); a gap left by compaction ends the read after a quiet poll.
func readCommitted(ctx context.Context, kcfg config.Kafka, role, topic string, partition int32, from, to int64, fn func(*kgo.Record)) error {
	if to <= from {
		return nil
	}
	cl, err := kgo.NewClient(append(kafkaconn.Opts(kcfg, role),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return fmt.Errorf("truth: kafka: %w", err)
	}
	defer cl.Close()
	last := from - 1
	quiet := 0
	for last < to-1 {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fetches := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		for _, fe := range fetches.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				return fmt.Errorf("truth: read %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
			}
		}
		n := 0
		fetches.EachRecord(func(r *kgo.Record) {
			n++
			if r.Offset >= to || r.Offset <= last {
				return
			}
			last = r.Offset
			if !r.Attrs.IsControl() {
				fn(r)
			}
		})
		if n == 0 {
			// Nothing within the wait although offsets remain below the
			// LSO: only compaction leaves such gaps. Give it one more try.
			if quiet++; quiet >= 2 {
				break
			}
		} else {
			quiet = 0
		}
		activity.RecordHeartbeat(ctx, last)
	}
	return nil
}

// ---- latest published versions ----------------------------------------

// winKey identifies a window of one stream.
type winKey struct {
	key   string
	start int64 // unix nanoseconds
}

// published is what consumers of the summaries topic hold for a window.
type published struct {
	latest event.Pane  // highest version, any producer
	stream *event.Pane // highest version computed by the stream, if any
}

func (p *published) add(pn event.Pane) {
	if pn.Version > p.latest.Version || p.latest.Version == 0 {
		p.latest = pn
	}
	if pn.ComputedBy == event.ComputedByStream && (p.stream == nil || pn.Version > p.stream.Version) {
		c := pn
		p.stream = &c
	}
}

// latestPanes returns what has been published for stream's windows starting
// in [from, to): the lake's pane history up to the pane archive's progress
// plus the rest of the summaries topic read directly, after waiting until
// every transaction open when it started has ended (so a correction this
// process or a concurrent one just committed is seen).
func (a *Truth) latestPanes(ctx context.Context, stream string, from, to time.Time) (map[winKey]*published, error) {
	out := map[winKey]*published{}
	add := func(p event.Pane) {
		if p.Stream != stream || p.WindowStart.Before(from) || !p.WindowStart.Before(to) {
			return
		}
		k := winKey{p.Key, p.WindowStart.UnixNano()}
		pb := out[k]
		if pb == nil {
			pb = &published{}
			out[k] = pb
		}
		pb.add(p)
	}
	lakePanes, err := a.Lake.ReadPanes(ctx, stream, from, to)
	if err != nil {
		return nil, err
	}
	for _, p := range lakePanes {
		add(p)
	}
	topic := a.Cfg.Topics.Summaries
	adm, closeAdm, err := kafkaconn.NewAdmin(a.Cfg.Kafka, "truth")
	if err != nil {
		return nil, err
	}
	defer closeAdm()
	ends, err := stableEnds(ctx, adm, topic)
	if err != nil {
		return nil, err
	}
	for p, end := range ends {
		from := int64(0)
		if pr, err := a.Lake.ReadProgress(ctx, topic, p); err == nil {
			from = min(pr.NextOffset, end)
		} else if !errors.Is(err, lake.ErrNoProgress) {
			return nil, err
		}
		err := readCommitted(ctx, a.Cfg.Kafka, "truth", topic, p, from, end, func(r *kgo.Record) {
			var pn event.Pane
			if json.Unmarshal(r.Value, &pn) == nil {
				add(pn)
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// stableEnds returns, per partition of topic, a last stable offset at or
// beyond the high watermark observed first: every transaction that was
// open then has committed or aborted. It waits (bounded) for that.
func stableEnds(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	hw, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("truth: end offsets %s: %w", topic, err)
	}
	if err := hw.Error(); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("truth: topic %s: %v (run `reckon topics apply`)", topic, err), ErrTypeTruthTopic, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		lso, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("truth: stable offsets %s: %w", topic, err)
		}
		out := map[int32]int64{}
		ok := true
		hw.Each(func(o kadm.ListedOffset) {
			s, found := lso.Lookup(topic, o.Partition)
			if !found || s.Err != nil || s.Offset < o.Offset {
				ok = false
				return
			}
			out[o.Partition] = s.Offset
		})
		if ok {
			return out, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("truth: %s: a transaction stays open for more than 30s", topic)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ---- late side output --------------------------------------------------

// LateItem is one too-late event: the window it belongs to and where the
// lake must have archived it before the window can be recomputed.
type LateItem struct {
	Key         string    `json:"key"`
	WindowStart time.Time `json:"window_start"`
	WindowEnd   time.Time `json:"window_end"`
	// SourcePartition/SourceOffset locate the raw record.
	SourcePartition int32 `json:"source_partition"`
	SourceOffset    int64 `json:"source_offset"`
	// EventTime is occurred_at; LateAt the late record's timestamp (when
	// the stream sent it to the late topic).
	EventTime time.Time `json:"event_time"`
	LateAt    time.Time `json:"late_at"`
}

// ReadLateInput is one step of a late-topic watcher.
type ReadLateInput struct {
	Topic     string
	Partition int32
	// From is the first offset to read; -1 starts at the current end (a
	// fresh watcher leaves older late events to the daily reconciliation).
	From int64
	// MaxRecords per step. Default 10,000.
	MaxRecords int
	// Wait is how long to wait for records when caught up. Default 5s.
	Wait time.Duration
}

// ReadLateResult is what one step read and signalled.
type ReadLateResult struct {
	Next     int64
	Records  int64
	Items    int64
	Skipped  int64    // records without a usable stream, key or event time
	Streams  []string // streams signalled
	CaughtUp bool
}

// ReadLate reads committed late records of one partition from From,
// waiting up to Wait for the first ones, turns each into the (stream, key,
// window) it belongs to, and signals every stream's correction workflow
// with its items. A retry signals the same items again; the correction
// workflow keeps a set, and a repeated recompute publishes nothing new.
func (a *Truth) ReadLate(ctx context.Context, in ReadLateInput) (ReadLateResult, error) {
	if in.MaxRecords <= 0 {
		in.MaxRecords = 10_000
	}
	if in.Wait <= 0 {
		in.Wait = 5 * time.Second
	}
	res := ReadLateResult{Next: in.From}
	adm, closeAdm, err := kafkaconn.NewAdmin(a.Cfg.Kafka, "late-watch")
	if err != nil {
		return res, err
	}
	defer closeAdm()
	end, err := lastStable(ctx, adm, in.Topic, in.Partition)
	if err != nil {
		return res, err
	}
	if in.From < 0 || in.From > end {
		in.From, res.Next = end, end
	}
	gate, err := event.NewGate(a.Cfg.Gate)
	if err != nil {
		return res, temporal.NewNonRetryableApplicationError("truth: gate rules", "config", err)
	}
	cl, err := kgo.NewClient(append(kafkaconn.Opts(a.Cfg.Kafka, "late-watch"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{in.Topic: {in.Partition: kgo.NewOffset().At(in.From)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(in.Wait),
	)...)
	if err != nil {
		return res, fmt.Errorf("truth: kafka: %w", err)
	}
	defer cl.Close()
	items := map[string][]LateItem{}
	var streams []string
	deadline := time.Now().Add(in.Wait)
	for res.Records < int64(in.MaxRecords) {
		pctx, cancel := context.WithDeadline(ctx, deadline)
		fetches := cl.PollRecords(pctx, in.MaxRecords-int(res.Records))
		cancel()
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		for _, fe := range fetches.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				return res, fmt.Errorf("truth: read %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
			}
		}
		got := false
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset < res.Next {
				return
			}
			res.Next = r.Offset + 1
			if r.Attrs.IsControl() {
				return
			}
			got = true
			res.Records++
			s, it, ok := a.lateItem(gate, r)
			if !ok {
				res.Skipped++
				return
			}
			if _, seen := items[s]; !seen {
				streams = append(streams, s)
			}
			items[s] = append(items[s], it)
			res.Items++
		})
		// Return as soon as something came (after a short linger for the
		// rest of a burst), or when the wait is over.
		if got && time.Until(deadline) > 200*time.Millisecond {
			deadline = time.Now().Add(200 * time.Millisecond)
		}
		if time.Now().After(deadline) {
			break
		}
	}
	for _, s := range streams {
		if a.SignalLate == nil {
			return res, temporal.NewNonRetryableApplicationError("truth: no SignalLate wired", "config", nil)
		}
		if err := a.SignalLate(ctx, s, items[s]); err != nil {
			return res, fmt.Errorf("truth: signal correction of %s: %w", s, err)
		}
	}
	res.Streams = streams
	if end2, err := lastStable(ctx, adm, in.Topic, in.Partition); err == nil {
		res.CaughtUp = res.Next >= end2
	}
	return res, nil
}

// lateItem decodes a late record: the stream from its header, the key from
// the original envelope (the stream's key field), the window from the
// event time.
func (a *Truth) lateItem(gate *event.Gate, r *kgo.Record) (string, LateItem, bool) {
	var stream string
	it := LateItem{LateAt: r.Timestamp.UTC(), SourcePartition: -1, SourceOffset: -1}
	for _, h := range r.Headers {
		switch h.Key {
		case "reckon.stream":
			stream = string(h.Value)
		case event.HeaderSourcePartition:
			if p, err := strconv.ParseInt(string(h.Value), 10, 32); err == nil {
				it.SourcePartition = int32(p)
			}
		case event.HeaderSourceOffset:
			if o, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil {
				it.SourceOffset = o
			}
		}
	}
	st, ok := a.Cfg.StreamByName(stream)
	if !ok || st.Window <= 0 || it.SourcePartition < 0 || it.SourceOffset < 0 {
		return "", it, false
	}
	// A zero arrival skips the skew checks: the stream judged the record
	// at its arrival already; here only its key and event time matter.
	env, _ := gate.Check(r.Value, time.Time{})
	if env == nil {
		return "", it, false
	}
	key, ok := env.String("data." + st.KeyField)
	if !ok || key == "" || env.OccurredAt.IsZero() {
		return "", it, false
	}
	it.Key = key
	it.EventTime = env.OccurredAt.UTC()
	it.WindowStart = it.EventTime.Truncate(st.Window)
	it.WindowEnd = it.WindowStart.Add(st.Window)
	return stream, it, true
}
