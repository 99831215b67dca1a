package activities

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/lake"
)

// PartitionOffset is an offset of one partition of a stream's raw topic.
type PartitionOffset struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// HorizonInput asks whether windows of Stream starting before To are
// final (for tumbling windows: ending at or before To; hopping ones end
// by To + window − hop, docs/adr/0041): the stream has purged them for good and the lake holds every
// record the stream could have counted in them.
type HorizonInput struct {
	Stream string
	To     time.Time
	// After, when set (targeted corrections), replaces the stream check:
	// the lake must hold the raw topic's records up to these offsets
	// inclusive — the too-late events themselves. The stream proved, by
	// sending them to the late topic, that it purged their windows.
	After []PartitionOffset `json:",omitempty"`
	// Targets are the archive targets earlier checks of this range
	// captured (HorizonResult.Targets), kept by the workflow: once a
	// partition has one, only the archive is compared with it, never with
	// the stream's latest offset (docs/adr/0015-stream-progress.md,
	// "A fixed target").
	Targets []HorizonTarget `json:",omitempty"`
	// SoFar: the range's day is still in progress. The check does not wait
	// for To: it picks the latest window end that every partition has
	// purged through (at most To, after From), captures the targets for it
	// and answers it as HorizonResult.To; the workflow recomputes up to
	// there and reports the later windows as still open.
	SoFar bool      `json:",omitempty"`
	From  time.Time `json:",omitempty"`
	// WaitUpTo, when positive, makes the check a long poll: it checks
	// again every second (heartbeating the targets it captured) until the
	// range is final or WaitUpTo has passed, so a range is final within
	// about a second of its archive catching up rather than a poll later.
	WaitUpTo time.Duration `json:",omitempty"`
}

// HorizonTarget is a partition's fixed archive target for a range: the
// NextOffset of the first stream progress the check saw with a
// purged-through point at or past the range's end. Every record the stream
// could count in the range lies before it; every later record of the range
// is late for the stream (late topic, targeted correction).
type HorizonTarget struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
	// PurgedThrough and PublishedAt are that progress record's: the basis
	// of the "progress never goes back" assertion and of the time to final.
	PurgedThrough time.Time `json:"purged_through"`
	PublishedAt   time.Time `json:"published_at"`
}

// HorizonResult is the answer; Waiting says what is missing, one line per
// partition that is not there yet.
type HorizonResult struct {
	Ready bool
	// To is the range end checked: the input's, or for SoFar the end
	// picked (zero while nothing of the range is final yet).
	To time.Time `json:",omitzero"`
	// PurgeAt is To + allowed lateness (+ window − hop for hopping
	// windows): every partition's published purged-through point must
	// reach it.
	PurgeAt time.Time
	Waiting string
	// Causes classifies Waiting's lines, one Horizon* cause per line
	// (metrics count waits by cause).
	Causes []string `json:",omitempty"`
	// Targets: the input's and those captured by this check, by partition.
	Targets []HorizonTarget `json:",omitempty"`
	// PassedAt is the latest PublishedAt of the targets (zero for targeted
	// checks): when the last partition's stream progress had passed To —
	// where the time to final starts — if the stream passed it while this
	// range was being checked (StreamWaited, or an earlier check of the
	// workflow waited for the stream); else only when a check first saw it.
	PassedAt time.Time `json:",omitzero"`
	// StreamWaited: a long poll (WaitUpTo) saw the stream behind the range
	// before answering Ready, so PassedAt is when the stream passed it.
	StreamWaited bool `json:",omitempty"`
	// PickedAt is when a SoFar check picked To: the windows after To had
	// not all been purged then.
	PickedAt time.Time `json:",omitzero"`
}

// Causes of a horizon wait (HorizonResult.Causes).
const (
	// HorizonNoProgress: the stream has published no progress for a partition.
	HorizonNoProgress = "no_progress"
	// HorizonNoWatermark: the stream has processed no event of the partition.
	HorizonNoWatermark = "no_watermark"
	// HorizonWatermark: the stream's purged-through point is before the range's end.
	HorizonWatermark = "watermark_behind"
	// HorizonArchive: the lake's archive has not reached the offsets needed.
	HorizonArchive = "archive_behind"
)

// ErrTypeTruthProgressWentBack: a partition's published stream progress
// went back behind a target this range captured (its purged-through point
// or its offset). The progress invariants forbid it (the stream commits
// progress with its offsets, docs/adr/0015-stream-progress.md); it means
// the stream's state was reset or the progress topic rewritten, and a
// truth built on the captured target could be wrong.
const ErrTypeTruthProgressWentBack = "TruthProgressWentBack"

// horizonPollEvery is how often a long-polling check (WaitUpTo) checks again.
const horizonPollEvery = time.Second

// CheckHorizon decides from the stream's published progress
// (docs/adr/0015-stream-progress.md) whether the windows of in.Stream
// ending at or before in.To are final. On every non-empty partition of the
// stream's raw topic:
//
//   - the stream has published progress for the partition, with the same
//     window settings as this batch (else a non-retryable
//     ErrTypeTruthSettings: correcting with other windows would be wrong);
//   - its purged-through point (watermark − allowed lateness, committed
//     with the consumer offset) is at or past in.To (in.To + window − hop
//     for hopping windows: the end of the last window starting before
//     in.To, windowsEnd): the stream will
//     publish no pane of those windows again and sends their events to the
//     late topic. The first progress seen so fixes the partition's target:
//     its NextOffset (HorizonTarget), captured once and carried by the
//     workflow;
//   - the lake's archive of the partition reaches the target, so the lake
//     holds every record the stream could have counted in the range.
//
// There is no clock and no inference in it: a stream that is down, behind
// or older than the progress topic keeps the batch waiting, and Waiting
// says so.
func (a *BatchTruth) CheckHorizon(ctx context.Context, in HorizonInput) (HorizonResult, error) {
	st, ok := a.Cfg.StreamByName(in.Stream)
	if !ok {
		return HorizonResult{}, badInput("unknown stream %q", in.Stream)
	}
	if len(in.After) > 0 {
		return a.checkArchived(ctx, st.Topic, in.After)
	}
	if a.Progress == nil {
		return HorizonResult{}, temporal.NewNonRetryableApplicationError(
			"truth: no stream progress view configured", ErrTypeTruthInput, nil)
	}
	if in.WaitUpTo <= 0 {
		return a.checkHorizon(ctx, st, in)
	}
	// A retried attempt goes on from the targets the last one captured.
	if activity.HasHeartbeatDetails(ctx) {
		var last HorizonInput
		if activity.GetHeartbeatDetails(ctx, &last) == nil && len(last.Targets) > 0 {
			in = last
		}
	}
	deadline := time.Now().Add(in.WaitUpTo)
	behind := false
	var picked time.Time
	for {
		res, err := a.checkHorizon(ctx, st, in)
		res.StreamWaited = behind && res.Ready
		if res.PickedAt.IsZero() {
			res.PickedAt = picked
		}
		picked = res.PickedAt
		if err != nil || res.Ready || !time.Now().Add(horizonPollEvery).Before(deadline) {
			return res, err
		}
		behind = behind || slices.ContainsFunc(res.Causes, func(c string) bool { return c != HorizonArchive })
		in = in.next(res)
		activity.RecordHeartbeat(ctx, in)
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(horizonPollEvery):
		}
	}
}

// next is the input of the check after res: the captured targets kept
// and, once a SoFar check picked its end, that end fixed.
func (in HorizonInput) next(res HorizonResult) HorizonInput {
	in.Targets = res.Targets
	if in.SoFar && len(res.Targets) > 0 {
		in.SoFar, in.To = false, res.To
	}
	return in
}

// checkArchived is the targeted form: the lake must hold the offsets.
func (a *BatchTruth) checkArchived(ctx context.Context, topic string, after []PartitionOffset) (HorizonResult, error) {
	var missing, causes []string
	for _, po := range after {
		p, err := a.Lake.ReadProgress(ctx, topic, po.Partition)
		if err != nil && !errors.Is(err, lake.ErrNoProgress) {
			return HorizonResult{}, err
		}
		if p.NextOffset <= po.Offset {
			missing = append(missing, fmt.Sprintf("%s/%d archived to %d, need %d",
				topic, po.Partition, p.NextOffset, po.Offset+1))
			causes = append(causes, HorizonArchive)
		}
	}
	return HorizonResult{Ready: len(missing) == 0, Waiting: strings.Join(missing, "; "), Causes: causes}, nil
}

// horizonCheck is one check's working state.
type horizonCheck struct {
	a       *BatchTruth
	st      config.Stream
	in      HorizonInput
	res     HorizonResult
	targets map[int32]HorizonTarget
	now     time.Time
}

func (h *horizonCheck) wait(cause, line string) {
	h.res.Waiting = appendLine(h.res.Waiting, line)
	h.res.Causes = append(h.res.Causes, cause)
}

func (h *horizonCheck) noWatermark(at string, p event.StreamProgress) {
	h.wait(HorizonNoWatermark, fmt.Sprintf("%s: no watermark yet (no %s event processed; last progress %v ago)",
		at, strings.Join(h.st.EventTypes, ", "), h.ago(p)))
}

func (h *horizonCheck) ago(p event.StreamProgress) time.Duration {
	return h.now.Sub(p.PublishedAt).Round(time.Second)
}

func appendLine(s, line string) string {
	if s == "" {
		return line
	}
	return s + "\n" + line
}

// checkHorizon is one check of the stream's progress and the lake.
func (a *BatchTruth) checkHorizon(ctx context.Context, st config.Stream, in HorizonInput) (HorizonResult, error) {
	h := &horizonCheck{a: a, st: st, in: in, targets: map[int32]HorizonTarget{}, now: a.now()}
	for _, t := range in.Targets {
		h.targets[t.Partition] = t
	}
	h.res.To = in.To
	k, err := a.kafka()
	if err != nil {
		return h.res, err
	}
	ends, err := k.Admin.ListEndOffsets(ctx, st.Topic)
	if err != nil {
		return h.res, fmt.Errorf("truth: end offsets %s: %w", st.Topic, err)
	}
	if err := ends.Error(); err != nil {
		return h.res, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("truth: topic %s: %v", st.Topic, err), ErrTypeTruthTopic, err)
	}
	if err := a.Progress.Sync(ctx); err != nil {
		return h.res, err
	}
	// The partitions that hold records, and their stream progress.
	var parts []int32
	progs := map[int32]event.StreamProgress{}
	var ferr error
	ends.Each(func(e kadm.ListedOffset) {
		if e.Offset == 0 || ferr != nil {
			return // an empty partition holds no window
		}
		parts = append(parts, e.Partition)
		p, ok := a.Progress.Get(st.Name, st.Topic, e.Partition)
		if !ok {
			if _, captured := h.targets[e.Partition]; !captured {
				h.wait(HorizonNoProgress, fmt.Sprintf(
					"%s/%d: stream %s has published no progress (not started, or older than the progress topic %s)",
					st.Topic, e.Partition, st.Name, a.Cfg.Topics.StreamProgress))
			}
			return
		}
		if want := st.SettingsDigest(); p.Settings != want {
			ferr = temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"truth: %s/%d: stream %s runs with other window settings (digest %s, this batch %s): "+
					"align window, lateness, out_of_orderness, rolling, event types, key and value fields before correcting",
				st.Topic, e.Partition, st.Name, p.Settings, want), ErrTypeTruthSettings, nil)
			return
		}
		progs[e.Partition] = p
	})
	if ferr != nil {
		return h.res, ferr
	}
	slices.Sort(parts)
	if in.SoFar && len(h.targets) == 0 && h.res.Waiting == "" {
		h.pickSoFar(parts, progs)
	}
	h.res.PurgeAt = windowsEnd(st, h.res.To).Add(st.AllowedLateness)
	if !h.res.To.IsZero() {
		for _, part := range parts {
			if err := h.partition(ctx, part, progs); err != nil {
				return h.res, err
			}
		}
	}
	h.res.Targets = slices.SortedFunc(maps.Values(h.targets), func(x, y HorizonTarget) int {
		return cmp.Compare(x.Partition, y.Partition)
	})
	h.res.Ready = h.res.Waiting == "" && !h.res.To.IsZero()
	if in.SoFar && len(h.res.Targets) > 0 {
		h.res.PickedAt = h.now
	}
	for _, t := range h.res.Targets {
		if t.PublishedAt.After(h.res.PassedAt) {
			h.res.PassedAt = t.PublishedAt
		}
	}
	return h.res, nil
}

// pickSoFar sets res.To for a day in progress: the latest window end every
// partition has purged through, at most in.To. Before any window of the
// range is final it leaves To zero and says why.
func (h *horizonCheck) pickSoFar(parts []int32, progs map[int32]event.StreamProgress) {
	if len(parts) == 0 {
		return // no records: nothing of the range waits
	}
	var low time.Time
	for _, part := range parts {
		p, ok := progs[part]
		if !ok {
			continue // waiting already says so
		}
		if p.Watermark.IsZero() {
			h.noWatermark(fmt.Sprintf("%s/%d", h.st.Topic, part), p)
			continue
		}
		if low.IsZero() || p.PurgedThrough.Before(low) {
			low = p.PurgedThrough
		}
	}
	if h.res.Waiting != "" || low.IsZero() {
		h.res.To = time.Time{}
		return
	}
	end := finalStarts(h.st, low, h.in.To)
	if !end.After(h.in.From) {
		h.wait(HorizonWatermark, fmt.Sprintf("%s: no window from %s on is final yet (the stream has purged through %s)",
			h.st.Topic, fmtTime(h.in.From), fmtTime(low)))
		h.res.To = time.Time{}
		return
	}
	h.res.To = end
}

// partition checks one partition against its target, capturing it first
// when the stream has just purged through the range's end.
func (h *horizonCheck) partition(ctx context.Context, part int32, progs map[int32]event.StreamProgress) error {
	at := fmt.Sprintf("%s/%d", h.st.Topic, part)
	p, seen := progs[part]
	t, captured := h.targets[part]
	switch {
	case captured && seen && (p.PurgedThrough.Before(t.PurgedThrough) || p.NextOffset < t.Offset):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"truth: %s: the stream's progress went back (purged through %s at offset %d, after %s at offset %d "+
				"captured as this range's target): was the stream's state reset or the progress topic rewritten?",
			at, fmtTime(p.PurgedThrough), p.NextOffset, fmtTime(t.PurgedThrough), t.Offset), ErrTypeTruthProgressWentBack, nil)
	case captured:
	case !seen:
		return nil // waiting already says so
	case p.Watermark.IsZero():
		h.noWatermark(at, p)
		return nil
	case p.PurgedThrough.Before(windowsEnd(h.st, h.res.To)):
		h.wait(HorizonWatermark, fmt.Sprintf("%s: watermark %s < %s needed (last progress %v ago)",
			at, fmtTime(p.Watermark), fmtTime(h.res.PurgeAt), h.ago(p)))
		return nil
	default:
		t = HorizonTarget{Partition: part, Offset: p.NextOffset, PurgedThrough: p.PurgedThrough, PublishedAt: p.PublishedAt}
		h.targets[part] = t
	}
	lp, err := h.a.Lake.ReadProgress(ctx, h.st.Topic, part)
	if err != nil && !errors.Is(err, lake.ErrNoProgress) {
		return err
	}
	if lp.NextOffset < t.Offset {
		h.wait(HorizonArchive, fmt.Sprintf(
			"%s: archived to offset %d, the range needs %d (the stream's offset when it purged through %s)",
			at, lp.NextOffset, t.Offset, fmtTime(h.res.To)))
	}
	return nil
}

// windowsEnd is when every window of st starting before to has ended:
// to for tumbling windows, to + window − hop for hopping ones.
func windowsEnd(st config.Stream, to time.Time) time.Time {
	return to.Add(st.Window - st.Step())
}

// finalStarts is the end of the range of window starts that a stream
// purged through low has made final, on a window boundary and at most to
// (which need not be one: the finalizer's steps end at the first window
// end past an hour): windows starting before it end by low. The inverse of
// windowsEnd.
func finalStarts(st config.Stream, low, to time.Time) time.Time {
	low = low.Add(st.Step() - st.Window)
	if low.After(to) {
		low = to
	}
	return time.Unix(0, floorNanos(low.UnixNano(), int64(st.Window))).UTC()
}
