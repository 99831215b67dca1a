package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/sdk/temporal"

	"reckon/internal/event"
	"reckon/lake"
)

// FeatureCursor returns where archiving the features partition resumes:
// the lake's progress for it, or 0.
func (a *BatchTruth) FeatureCursor(ctx context.Context, topic string, partition int32) (int64, error) {
	return a.PaneCursor(ctx, topic, partition)
}

// FeatureArchiveEnd reads the last stable offset of a features partition,
// as PaneArchiveEnd does for summaries: the workflow fixes each step's
// range from it.
func (a *BatchTruth) FeatureArchiveEnd(ctx context.Context, topic string, partition int32) (PaneEnd, error) {
	return a.PaneArchiveEnd(ctx, topic, partition)
}

// ArchiveFeaturesInput is one features archive step: the offsets [From, To).
type ArchiveFeaturesInput struct {
	Topic     string
	Partition int32
	From, To  int64
	// End and ObservedAt are the PaneEnd the range was cut from: when the
	// step reaches End, the partition is archived through ObservedAt.
	End        int64
	ObservedAt time.Time
}

// ArchiveFeaturesResult says what one step archived.
type ArchiveFeaturesResult struct {
	// Next is where the next step starts: the input's To, or the To of
	// an earlier step from the same offset whose files may exist
	// (lake.StepIntent), which this step redid instead.
	Next int64
	// Records read (committed data records); Features archived; Skipped
	// are records that are not features of a valid stream name (counted,
	// not archived).
	Records, Features, Skipped int64
	Files                      []string
	ArchivedThrough            time.Time
}

// ArchiveFeatures reads the committed features in [From, To) of a features
// partition and writes them to the lake's features table, one file per
// stream and event date named <topic>-<partition>-<From>-<To-1>, then
// records progress. Before writing it records the range as the
// partition's step intent; a step that finds an intent from its own From
// with another To (an earlier run's step died between its files and its
// progress, and the workflow was started afresh) redoes that range
// instead, so its files are replaced, never doubled. A retry reads the
// same range and rewrites the same files, also when the step it retries
// had recorded its progress.
func (a *BatchTruth) ArchiveFeatures(ctx context.Context, in ArchiveFeaturesInput) (ArchiveFeaturesResult, error) {
	res := ArchiveFeaturesResult{Next: in.From}
	if in.To < in.From || in.From < 0 || in.To > in.End {
		return res, badInput("features archive range [%d, %d) of end %d", in.From, in.To, in.End)
	}
	prev, err := a.Lake.ReadProgress(ctx, in.Topic, in.Partition)
	if err != nil && !errors.Is(err, lake.ErrNoProgress) {
		return res, err
	}
	to := in.To
	if in.To > in.From {
		intent, ok, err := a.Lake.ReadStepIntent(ctx, in.Topic, in.Partition)
		if err != nil {
			return res, err
		}
		switch {
		case ok && intent.From == in.From && intent.To != in.To:
			if intent.To > in.End {
				return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
					"features archive: the unfinished step [%d, %d) of %s/%d reaches beyond the end %d (topic recreated?)",
					intent.From, intent.To, in.Topic, in.Partition, in.End), ErrTypeCursor, nil)
			}
			to = intent.To
		case !ok || intent.From != in.From:
			step := lake.StepIntent{Topic: in.Topic, Partition: in.Partition, From: in.From, To: to}
			if err := a.Lake.WriteStepIntent(ctx, step); err != nil {
				return res, err
			}
		}
		if err := a.archiveFeatures(ctx, in.Topic, in.Partition, in.From, to, &res); err != nil {
			return res, err
		}
	}
	res.Next = to
	res.ArchivedThrough = prev.ArchivedThrough
	if to >= in.End {
		res.ArchivedThrough = in.ObservedAt
	}
	if to == prev.NextOffset && res.ArchivedThrough.Equal(prev.ArchivedThrough) {
		return res, nil
	}
	_, err = a.Lake.WriteProgress(ctx, lake.Progress{Topic: in.Topic, Partition: in.Partition, NextOffset: to,
		ArchivedThrough: res.ArchivedThrough, UpdatedAt: a.now()})
	return res, err
}

// archiveFeatures reads [from, to) and writes its features as one file per
// stream and event date.
func (a *BatchTruth) archiveFeatures(ctx context.Context, topic string, partition int32, from, to int64,
	res *ArchiveFeaturesResult,
) error {
	k, err := a.kafka()
	if err != nil {
		return err
	}
	var rows []lake.FeatureRow
	err = k.readCommitted(ctx, topic, partition, from, to, func(r *kgo.Record) {
		res.Records++
		var f event.Feature
		if err := json.Unmarshal(r.Value, &f); err != nil || f.EventID == "" || lake.ValidateName(f.Stream) != nil {
			res.Skipped++
			return
		}
		rows = append(rows, lake.FeatureRowOf(f, r.Partition, r.Offset))
		res.Features++
	})
	if err != nil {
		return err
	}
	name := lake.FileName(topic, partition, from, to-1)
	files, err := a.Lake.WriteFeatures(ctx, name[:len(name)-len(".parquet")], rows)
	for _, f := range files {
		res.Files = append(res.Files, f.Path)
	}
	return err
}
