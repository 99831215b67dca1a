package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"reckon/activities"
)

// PaneArchiveQueryProgress returns the PaneArchiveState.
const PaneArchiveQueryProgress = "progress"

// PaneArchiveWorkflowID is the deterministic ID of the pane archive of one
// summaries partition.
func PaneArchiveWorkflowID(topic string, partition int32) string {
	return fmt.Sprintf("pane-archive/%s/%d", topic, partition)
}

// PaneArchiveState is the pane archive's state, carried across
// continue-as-new. Cursor is the next offset to archive; -1 loads it from
// the lake's progress file.
type PaneArchiveState struct {
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
	Records, Panes, Skipped, Steps int64
	// Touched is when progress was last written (workflow time); idle
	// steps write it at most once a minute.
	Touched time.Time `json:"touched"`
}

// PaneArchive keeps the lake's summaries table (the history of every pane
// version, stream and batch) complete for one partition of the summaries
// topic: it fixes each step's offset range from the last stable offset
// (PaneArchiveEnd) before reading it (ArchivePanes), so a retried step
// rewrites the same files, and it continues as new before its history
// grows large.
func PaneArchive(ctx workflow.Context, st PaneArchiveState) error {
	if st.Idle <= 0 {
		st.Idle = 2 * time.Second
	}
	if st.MaxRecords <= 0 {
		st.MaxRecords = 100_000
	}
	if err := workflow.SetQueryHandler(ctx, PaneArchiveQueryProgress,
		func() (PaneArchiveState, error) { return st, nil }); err != nil {
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
			NonRetryableErrorTypes: []string{activities.ErrTypeTruthInput, activities.ErrTypeCursor,
				activities.ErrTypePartition},
		},
	})
	if st.Cursor < 0 {
		if err := workflow.ExecuteActivity(short, a.PaneCursor, st.Topic, st.Partition).Get(ctx, &st.Cursor); err != nil {
			return err
		}
	}
	for {
		var end activities.PaneEnd
		if err := workflow.ExecuteActivity(short, a.PaneArchiveEnd, st.Topic, st.Partition).Get(ctx, &end); err != nil {
			return err
		}
		st.End = end.End
		if end.End < st.Cursor {
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("pane archive: cursor %d is beyond the end %d of %s/%d (topic recreated?)", st.Cursor, end.End,
					st.Topic, st.Partition), activities.ErrTypeCursor, nil)
		}
		to := min(end.End, st.Cursor+st.MaxRecords)
		now := workflow.Now(ctx)
		// Idle: write progress (archived through) at most once a minute.
		if to > st.Cursor || now.Sub(st.Touched) >= time.Minute {
			var res activities.ArchivePanesResult
			if err := workflow.ExecuteActivity(step, a.ArchivePanes, activities.ArchivePanesInput{
				Topic: st.Topic, Partition: st.Partition, From: st.Cursor, To: to, End: end.End, ObservedAt: end.ObservedAt,
			}).Get(ctx, &res); err != nil {
				return err
			}
			// The curated tables follow the panes just archived
			// (docs/adr/0019-curated-tables.md).
			if len(res.Files) > 0 && workflow.GetVersion(ctx, curateChangeID, workflow.DefaultVersion, 1) == 1 {
				curateWindows(ctx, res.Files)
			}
			st.Cursor, st.ArchivedThrough, st.Touched = res.Next, res.ArchivedThrough, now
			st.Records += res.Records
			st.Panes += res.Panes
			st.Skipped += res.Skipped
			st.Steps++
			workflow.SetCurrentDetails(ctx,
				fmt.Sprintf("**%s/%d** cursor %d of %d · archived through %s · %d panes (%d records not panes)",
					st.Topic, st.Partition, st.Cursor, st.End, st.ArchivedThrough.UTC().Format(time.RFC3339), st.Panes, st.Skipped))
		}
		info := workflow.GetInfo(ctx)
		if info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > 2000 {
			return workflow.NewContinueAsNewError(ctx, PaneArchiveWorkflow, st)
		}
		if st.Cursor >= st.End {
			if err := workflow.Sleep(ctx, st.Idle); err != nil {
				return err
			}
		}
	}
}
