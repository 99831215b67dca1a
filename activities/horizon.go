package activities

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/sdk/temporal"

	"reckon/internal/config"
	"reckon/lake"
)

// PartitionOffset is an offset of one partition of a stream's raw topic.
type PartitionOffset struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// HorizonInput asks whether windows of Stream ending at or before To are
// final: the lake holds everything that can still count and the stream
// will never publish another pane for them.
type HorizonInput struct {
	Stream string
	To     time.Time
	// After, when set (targeted corrections), replaces the time horizon:
	// the lake must hold the raw topic's records up to these offsets
	// inclusive — the too-late events themselves. The stream proved, by
	// sending them to the late topic, that it purged their windows.
	After []PartitionOffset
}

// HorizonResult is the answer; Waiting says what is missing.
type HorizonResult struct {
	Ready bool
	// Horizon is the ingest time that must be archived and consumed.
	Horizon         time.Time
	ArchivedThrough time.Time
	Waiting         string
}

// Horizon is the ingest time after which a window ending at end is final
// for stream s: the stream's watermark has passed end + allowed lateness
// (it purged the window; any later event goes to the late topic) once it
// consumed events this late (watermark = max event time − out-of-orderness)
// or idled past them (idle timeout), plus a margin for delivery delay.
func Horizon(s config.Stream, b config.Batch, end time.Time) time.Time {
	return end.Add(s.AllowedLateness + s.OutOfOrderness + s.IdleTimeout + b.HorizonMargin)
}

// CheckHorizon checks the lake's archive progress of every partition of
// the stream's topic and, unless batch.skip_stream_check, that the stream
// consumer group consumed past the horizon on every partition (a stream
// that is down or behind still holds windows and would race the batch on
// their next version).
func (a *BatchTruth) CheckHorizon(ctx context.Context, in HorizonInput) (HorizonResult, error) {
	st, ok := a.Cfg.StreamByName(in.Stream)
	if !ok {
		return HorizonResult{}, badInput("unknown stream %q", in.Stream)
	}
	if len(in.After) > 0 {
		var missing []string
		for _, po := range in.After {
			p, err := a.Lake.ReadProgress(st.Topic, po.Partition)
			if err != nil && !errors.Is(err, lake.ErrNoProgress) {
				return HorizonResult{}, err
			}
			if p.NextOffset <= po.Offset {
				missing = append(missing, fmt.Sprintf("%s/%d archived to %d, need %d", st.Topic, po.Partition, p.NextOffset, po.Offset+1))
			}
		}
		return HorizonResult{Ready: len(missing) == 0, Waiting: strings.Join(missing, "; ")}, nil
	}
	res := HorizonResult{Horizon: Horizon(st, a.Cfg.Batch, in.To)}
	k, err := a.kafka()
	if err != nil {
		return res, err
	}
	adm := k.Admin
	ends, err := adm.ListEndOffsets(ctx, st.Topic)
	if err != nil {
		return res, fmt.Errorf("truth: end offsets %s: %w", st.Topic, err)
	}
	if err := ends.Error(); err != nil {
		return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("truth: topic %s: %v", st.Topic, err), ErrTypeTruthTopic, err)
	}
	res.ArchivedThrough, err = a.Lake.ArchivedThrough(st.Topic, len(ends[st.Topic]))
	if err != nil {
		return res, err
	}
	if res.ArchivedThrough.Before(res.Horizon) {
		res.Waiting = fmt.Sprintf("archive of %s is through %s, horizon %s", st.Topic, fmtTime(res.ArchivedThrough), fmtTime(res.Horizon))
		return res, nil
	}
	if a.Cfg.Batch.SkipStreamCheck {
		res.Ready = true
		return res, nil
	}
	pos, err := a.streamPositions(ctx, adm, st.Topic)
	if err != nil {
		return res, err
	}
	var behind []string
	parts := map[int32]partitionPos{}
	ends.Each(func(e kadm.ListedOffset) {
		if e.Offset == 0 {
			return // an empty partition holds no window
		}
		c, ok := pos[e.Partition]
		if !ok || c <= 0 {
			behind = append(behind, fmt.Sprintf("%d (nothing consumed of %d records)", e.Partition, e.Offset))
			return
		}
		parts[e.Partition] = partitionPos{consumed: c, end: e.Offset}
	})
	slices.Sort(behind)
	if len(behind) > 0 {
		res.Waiting = fmt.Sprintf("stream group %s has not consumed %s partitions %s", a.Cfg.Stream.Group, st.Topic, strings.Join(behind, ", "))
		return res, nil
	}
	why, err := a.watermarksPast(ctx, st, in.To, parts)
	if err != nil || why != "" {
		res.Waiting = why
		return res, err
	}
	res.Ready = true
	return res, nil
}

// partitionPos is where the stream group stands on one partition: the
// committed offset (everything before it is processed) and the end.
type partitionPos struct{ consumed, end int64 }

// streamPositions returns the stream group's committed offset per
// partition of topic (none when the group never committed).
func (a *BatchTruth) streamPositions(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	committed, err := adm.FetchOffsetsForTopics(ctx, a.Cfg.Stream.Group, topic)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[int32]int64{}, nil // the stream never committed anything
	}
	if err != nil {
		return nil, fmt.Errorf("truth: stream group offsets: %w", err)
	}
	out := map[int32]int64{}
	committed.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.Topic == topic && o.At >= 0 {
			out[o.Partition] = o.At
		}
	})
	return out, nil
}

// watermarksPast checks that the stream's watermark on every partition
// stood at or past end + allowed lateness where the stream group's
// committed offset is: from then on the stream has purged the windows
// ending at end, publishes no pane of them and sends their events to the
// late topic. The watermark is max(event time) − out-of-orderness over the
// valid records processed, or the idle rule's advance; records ingested
// late (a tail of too-late events) do not move it, so ingest time alone
// proves nothing. Per partition, either
//
//   - the lake holds a record of the stream's event types at an offset
//     below the committed one with event time ≥ end + lateness +
//     out-of-orderness (a record the stream processed moved its watermark
//     past the purge point; the lake holds every record before it), or
//   - the stream consumed the whole partition, the lake archived all of it,
//     and the idle rule advanced the watermark past the purge point:
//     now ≥ last record's timestamp + idle_timeout + (purge point −
//     watermark after it) + margin. Every record, a too-late one
//     included, restarts the idle clock.
//
// It returns what is missing, or "".
func (a *BatchTruth) watermarksPast(ctx context.Context, st config.Stream, end time.Time, parts map[int32]partitionPos) (string, error) {
	purgeAt := end.Add(st.AllowedLateness)
	needET := purgeAt.Add(st.OutOfOrderness).UnixMicro()
	// The watermark after the partition's records: the maximum event time
	// from about a window before the range end on (older records would
	// only lower it: assume the least), hour by hour until every partition
	// is proven.
	scanFrom := end.Add(-max(st.Window, time.Hour))
	maxET := map[int32]int64{}
	for p := range parts {
		maxET[p] = scanFrom.UnixMicro()
	}
	unproven := func() int {
		n := 0
		for _, et := range maxET {
			if et < needET {
				n++
			}
		}
		return n
	}
	hours, err := a.Lake.RawHours(ctx, st.Topic, scanFrom, a.now().Add(maxFutureHours))
	if err != nil {
		return "", err
	}
	for _, h := range hours {
		if unproven() == 0 {
			break
		}
		if _, err := a.Lake.Scan(ctx, lake.Query{Topic: st.Topic, From: maxTime(h, scanFrom), To: h.Add(time.Hour), EventTypes: st.EventTypes},
			lake.ColOccurredAt|lake.ColKafkaPartition|lake.ColKafkaOffset|lake.ColKey, func(r *lake.RawRow) error {
				pp, ok := parts[r.KafkaPartition]
				if ok && r.KafkaOffset < pp.consumed && r.Key != "" && r.OccurredAt > maxET[r.KafkaPartition] {
					maxET[r.KafkaPartition] = r.OccurredAt
				}
				return nil
			}); err != nil {
			return "", err
		}
	}
	// The rest can only be proven by the idle rule, from the last record
	// the stream processed: the last data record before the end (a
	// transactional producer leaves a marker at end − 1, which no consumer
	// commits past).
	idle := map[int32]int64{}
	for p, pp := range parts {
		if maxET[p] < needET {
			idle[p] = pp.end
		}
	}
	if len(idle) == 0 {
		return "", nil
	}
	k, err := a.kafka()
	if err != nil {
		return "", err
	}
	last, err := lastRecords(ctx, k, st.Topic, idle)
	if err != nil {
		return "", err
	}
	now := a.now()
	var waiting []string
	for _, p := range slices.Sorted(maps.Keys(idle)) {
		pp := parts[p]
		wm := time.UnixMicro(maxET[p]).Add(-st.OutOfOrderness).UTC()
		lr, ok := last[p]
		if !ok {
			waiting = append(waiting, fmt.Sprintf("%d (no committed record among the last %d offsets before %d)", p, lastRecordsBack, pp.end))
			continue
		}
		if pp.consumed <= lr.offset {
			waiting = append(waiting, fmt.Sprintf("%d (stream at offset %d of %d, watermark %s)", p, pp.consumed, lr.offset+1, fmtTime(wm)))
			continue
		}
		prog, err := a.Lake.ReadProgress(st.Topic, p)
		if err != nil && !errors.Is(err, lake.ErrNoProgress) {
			return "", err
		}
		if prog.NextOffset <= lr.offset {
			waiting = append(waiting, fmt.Sprintf("%d (archived to offset %d of %d)", p, prog.NextOffset, lr.offset+1))
			continue
		}
		ready := lr.ts.Add(st.IdleTimeout + purgeAt.Sub(wm) + a.Cfg.Batch.HorizonMargin)
		if now.Before(ready) {
			waiting = append(waiting, fmt.Sprintf("%d (idle since %s, watermark %s, idle-advanced past the purge point at %s)", p, fmtTime(lr.ts), fmtTime(wm), fmtTime(ready)))
		}
	}
	if len(waiting) == 0 {
		return "", nil
	}
	slices.Sort(waiting)
	return fmt.Sprintf("stream watermark of %s not yet past %s (end + allowed lateness) on partitions %s", st.Topic, fmtTime(purgeAt), strings.Join(waiting, ", ")), nil
}

// maxFutureHours bounds the event-hour directories a watermark proof
// lists: events lie at most the gate's future skew ahead of arrival.
const maxFutureHours = 7 * 24 * time.Hour

// lastRecordsBack is how far before the end lastRecords looks for the
// last committed data record of a partition.
const lastRecordsBack = 256

// lastRecord is a partition's last committed data record.
type lastRecord struct {
	offset int64
	ts     time.Time
}

// lastRecords reads, for each partition, the last committed data record
// before its end offset, as a read-committed consumer (the stream) sees
// it: transaction markers and aborted records are skipped. A partition
// whose last lastRecordsBack offsets hold no such record is left out.
func lastRecords(ctx context.Context, k *Kafka, topic string, ends map[int32]int64) (map[int32]lastRecord, error) {
	out := map[int32]lastRecord{}
	for p, end := range ends {
		// Records come in offset order: the last one read is the last.
		if err := k.readCommitted(ctx, topic, p, max(end-lastRecordsBack, 0), end, func(r *kgo.Record) {
			out[p] = lastRecord{r.Offset, r.Timestamp}
		}); err != nil {
			return nil, err
		}
	}
	return out, nil
}
