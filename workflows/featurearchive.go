package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"reckon/activities"
)

// FeatureArchiveWorkflow is the registered name of FeatureArchive.
const FeatureArchiveWorkflow = "FeatureArchive"

// FeatureArchiveQueryProgress returns the FeatureArchiveState.
const FeatureArchiveQueryProgress = "progress"

// FeatureArchiveWorkflowID is the deterministic ID of the features archive
// of one features-topic partition.
func FeatureArchiveWorkflowID(topic string, partition int32) string {
	return fmt.Sprintf("feature-archive/%s/%d", topic, partition)
}

// FeatureArchiveState is the features archive's state, carried across
// continue-as-new. Cursor is the next offset to archive; -1 loads it from
// the lake's progress file.
type FeatureArchiveState struct {
	Topic           string    `json:"topic"`
	Partition       int32     `json:"partition"`
	Cursor          int64     `json:"cursor"`
	End             int64     `json:"end"`
	ArchivedThrough time.Time `json:"archived_through"`
	// Idle is how long to sleep when caught up. Default 2s.
	Idle time.Duration `json:"idle"`
	// MaxRecords per step. Default 100,000.
	MaxRecords int64 `json:"max_records"`
	// Totals since the first start.
	Records, Features, Skipped, Steps int64
	// Touched is when progress was last written (workflow time); idle
	// steps write it at most once a minute.
	Touched time.Time `json:"touched"`
}

// FeatureArchive keeps the lake's features table (every feature the stream
// served) complete for one partition of the features topic, as PaneArchive
// does for summaries: each step's offset range is fixed from the last
// stable offset (FeatureArchiveEnd) before it is read (ArchiveFeatures),
// so a retried step rewrites the same files; the step may answer that it
// redid an earlier run's unfinished range instead (its Next), and the
// cursor follows that. It continues as new before its history grows large
// (docs/adr/0036-features-archive.md).
func FeatureArchive(ctx workflow.Context, st FeatureArchiveState) error {
	if st.Idle <= 0 {
		st.Idle = 2 * time.Second
	}
	if st.MaxRecords <= 0 {
		st.MaxRecords = 100_000
	}
	query := func() (FeatureArchiveState, error) { return st, nil }
	err := workflow.SetQueryHandler(ctx, FeatureArchiveQueryProgress, query)
	if err != nil {
		return err
	}
	upsert(ctx, SATopic.ValueSet(st.Topic), SAPartition.ValueSet(int64(st.Partition)))
	var a *activities.BatchTruth
	short := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second},
	})
	step := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			NonRetryableErrorTypes: []string{
				activities.ErrTypeTruthInput, activities.ErrTypeCursor, activities.ErrTypePartition,
			},
		},
	})
	if st.Cursor < 0 {
		if err := workflow.ExecuteActivity(short, a.FeatureCursor, st.Topic, st.Partition).Get(ctx, &st.Cursor); err != nil {
			return err
		}
	}
	for {
		var end activities.PaneEnd
		if err := workflow.ExecuteActivity(short, a.FeatureArchiveEnd, st.Topic, st.Partition).Get(ctx, &end); err != nil {
			return err
		}
		st.End = end.End
		if end.End < st.Cursor {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"features archive: cursor %d is beyond the end %d of %s/%d (topic recreated?)",
				st.Cursor, end.End, st.Topic, st.Partition), activities.ErrTypeCursor, nil)
		}
		to := min(end.End, st.Cursor+st.MaxRecords)
		now := workflow.Now(ctx)
		// Idle: write progress (archived through) at most once a minute.
		if to > st.Cursor || now.Sub(st.Touched) >= time.Minute {
			var res activities.ArchiveFeaturesResult
			if err := workflow.ExecuteActivity(step, a.ArchiveFeatures, activities.ArchiveFeaturesInput{
				Topic: st.Topic, Partition: st.Partition, From: st.Cursor, To: to, End: end.End, ObservedAt: end.ObservedAt,
			}).Get(ctx, &res); err != nil {
				return err
			}
			// The curated feature_status table follows the features just
			// archived (docs/adr/0038-feature-truth.md).
			if len(res.Files) > 0 && workflow.GetVersion(ctx, curateFeaturesChangeID, workflow.DefaultVersion, 1) == 1 {
				curateWindows(ctx, res.Files)
			}
			st.Cursor, st.ArchivedThrough, st.Touched = res.Next, res.ArchivedThrough, now
			st.Records += res.Records
			st.Features += res.Features
			st.Skipped += res.Skipped
			st.Steps++
			workflow.SetCurrentDetails(ctx, fmt.Sprintf(
				"**%s/%d** cursor %d of %d · archived through %s · %d features (%d records not features)",
				st.Topic, st.Partition, st.Cursor, st.End, st.ArchivedThrough.UTC().Format(time.RFC3339), st.Features, st.Skipped))
		}
		info := workflow.GetInfo(ctx)
		if info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > 2000 {
			return workflow.NewContinueAsNewError(ctx, FeatureArchiveWorkflow, st)
		}
		if st.Cursor >= st.End {
			if err := workflow.Sleep(ctx, st.Idle); err != nil {
				return err
			}
		}
	}
}
