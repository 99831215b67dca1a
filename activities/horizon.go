package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"go.temporal.io/sdk/temporal"

	"reckon/lake"
)

// PartitionOffset is an offset of one partition of a stream's raw topic.
type PartitionOffset struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// HorizonInput asks whether windows of Stream ending at or before To are
// final: the stream has purged them for good and the lake holds every
// record the stream processed before it did.
type HorizonInput struct {
	Stream string
	To     time.Time
	// After, when set (targeted corrections), replaces the stream check:
	// the lake must hold the raw topic's records up to these offsets
	// inclusive — the too-late events themselves. The stream proved, by
	// sending them to the late topic, that it purged their windows.
	After []PartitionOffset
}

// HorizonResult is the answer; Waiting says what is missing, one line per
// partition that is not there yet.
type HorizonResult struct {
	Ready bool
	// PurgeAt is To + allowed lateness: every partition's published
	// purged-through point must reach it.
	PurgeAt time.Time
	Waiting string
	// Causes classifies Waiting's lines, one Horizon* cause per line
	// (metrics count waits by cause).
	Causes []string `json:",omitempty"`
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

// CheckHorizon decides from the stream's published progress
// (docs/adr/0015-stream-progress.md) whether the windows of in.Stream
// ending at or before in.To are final. On every non-empty partition of the
// stream's raw topic:
//
//   - the stream has published progress for the partition, with the same
//     window settings as this batch (else a non-retryable
//     ErrTypeTruthSettings: correcting with other windows would be wrong);
//   - its purged-through point (watermark − allowed lateness, committed
//     with the consumer offset) is at or past in.To: the stream will
//     publish no pane of those windows again and sends their events to the
//     late topic;
//   - the lake's archive of the partition reaches the offset that progress
//     was committed at, so the lake holds every record the stream counted.
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
		var missing, causes []string
		for _, po := range in.After {
			p, err := a.Lake.ReadProgress(ctx, st.Topic, po.Partition)
			if err != nil && !errors.Is(err, lake.ErrNoProgress) {
				return HorizonResult{}, err
			}
			if p.NextOffset <= po.Offset {
				missing = append(missing, fmt.Sprintf("%s/%d archived to %d, need %d", st.Topic, po.Partition, p.NextOffset, po.Offset+1))
				causes = append(causes, HorizonArchive)
			}
		}
		return HorizonResult{Ready: len(missing) == 0, Waiting: strings.Join(missing, "; "), Causes: causes}, nil
	}
	if a.Progress == nil {
		return HorizonResult{}, temporal.NewNonRetryableApplicationError("truth: no stream progress view configured", ErrTypeTruthInput, nil)
	}
	res := HorizonResult{PurgeAt: in.To.Add(st.AllowedLateness)}
	k, err := a.kafka()
	if err != nil {
		return res, err
	}
	ends, err := k.Admin.ListEndOffsets(ctx, st.Topic)
	if err != nil {
		return res, fmt.Errorf("truth: end offsets %s: %w", st.Topic, err)
	}
	if err := ends.Error(); err != nil {
		return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("truth: topic %s: %v", st.Topic, err), ErrTypeTruthTopic, err)
	}
	if err := a.Progress.Sync(ctx); err != nil {
		return res, err
	}
	want, now := st.SettingsDigest(), a.now()
	var waiting []string
	var ferr error
	wait := func(cause, line string) {
		waiting = append(waiting, line)
		res.Causes = append(res.Causes, cause)
	}
	ends.Each(func(e kadm.ListedOffset) {
		if e.Offset == 0 || ferr != nil {
			return // an empty partition holds no window
		}
		at := fmt.Sprintf("%s/%d", st.Topic, e.Partition)
		p, ok := a.Progress.Get(st.Name, st.Topic, e.Partition)
		if !ok {
			wait(HorizonNoProgress, fmt.Sprintf("%s: stream %s has published no progress (not started, or older than the progress topic %s)", at, st.Name, a.Cfg.Topics.StreamProgress))
			return
		}
		if p.Settings != want {
			ferr = temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"truth: %s: stream %s runs with other window settings (digest %s, this batch %s): align window, lateness, out_of_orderness, event types, key and value fields before correcting",
				at, st.Name, p.Settings, want), ErrTypeTruthSettings, nil)
			return
		}
		ago := now.Sub(p.PublishedAt).Round(time.Second)
		switch {
		case p.Watermark.IsZero():
			wait(HorizonNoWatermark, fmt.Sprintf("%s: no watermark yet (no %s event processed; last progress %v ago)", at, strings.Join(st.EventTypes, ", "), ago))
			return
		case p.PurgedThrough.Before(in.To):
			wait(HorizonWatermark, fmt.Sprintf("%s: watermark %s < %s needed (last progress %v ago)", at, fmtTime(p.Watermark), fmtTime(res.PurgeAt), ago))
			return
		}
		lp, err := a.Lake.ReadProgress(ctx, st.Topic, e.Partition)
		if err != nil && !errors.Is(err, lake.ErrNoProgress) {
			ferr = err
			return
		}
		if lp.NextOffset < p.NextOffset {
			wait(HorizonArchive, fmt.Sprintf("%s: archived to offset %d, the stream counted to %d", at, lp.NextOffset, p.NextOffset))
		}
	})
	if ferr != nil {
		return res, ferr
	}
	res.Ready = len(waiting) == 0
	res.Waiting = strings.Join(waiting, "\n")
	return res, nil
}
