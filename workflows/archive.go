package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"reckon/activities"
)

// ArchiveWorkflowID is the deterministic ID of the archive workflow of one
// topic-partition: starting it twice finds the running one.
func ArchiveWorkflowID(topic string, partition int32) string {
	return fmt.Sprintf("archive/%s/%d", topic, partition)
}

// ArchiveQueryProgress is the query name returning ArchiveState.
const ArchiveQueryProgress = "progress"

// ArchiveState is the archive workflow's state, carried across
// continue-as-new. Cursor is the next Kafka offset to archive: it lives
// here, in workflow state, and in the lake's progress file.
type ArchiveState struct {
	Topic     string
	Partition int32
	// Cursor is the next offset to archive; -1 means "load it from the
	// lake's progress file" (a fresh start).
	Cursor int64
	// ArchivedThrough is the ingest time up to which everything is archived.
	ArchivedThrough time.Time
	// End is the partition's last stable offset at the last step.
	End int64
	// Totals since the workflow was first started.
	Records, Rows, Rejected int64
	Steps                   int64
	// Idle is how long to sleep when caught up. Default 2s.
	Idle time.Duration
	// MaxRecords per step (0 = activity default).
	MaxRecords int
}

// Archive is the long-running archive workflow of one topic-partition: it
// repeatedly archives a bounded offset range, sleeps when caught up, and
// continues as new before its history grows large.
func Archive(ctx workflow.Context, st ArchiveState) error {
	if st.Idle <= 0 {
		st.Idle = 2 * time.Second
	}
	if err := workflow.SetQueryHandler(ctx, ArchiveQueryProgress,
		func() (ArchiveState, error) { return st, nil }); err != nil {
		return err
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, SATopic.ValueSet(st.Topic), SAPartition.ValueSet(int64(st.Partition)))

	var a *activities.Archive
	short := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second},
	})
	if st.Cursor < 0 {
		if err := workflow.ExecuteActivity(short, a.LoadCursor, st.Topic, st.Partition).Get(ctx, &st.Cursor); err != nil {
			return err
		}
	}
	step := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		HeartbeatTimeout:    15 * time.Second, // the activity heartbeats after every fetch (≤ MaxWait, 2s)
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			NonRetryableErrorTypes: []string{activities.ErrTypeCursor, activities.ErrTypePartition, activities.ErrTypeConfig},
		},
	})
	for {
		var res activities.ArchiveRangeResult
		err := workflow.ExecuteActivity(step, a.ArchiveRange, activities.ArchiveRangeInput{
			Topic: st.Topic, Partition: st.Partition, From: st.Cursor, MaxRecords: st.MaxRecords,
		}).Get(ctx, &res)
		if err != nil {
			return err
		}
		st.Cursor, st.End = res.Next, res.End
		st.ArchivedThrough = res.ArchivedThrough
		st.Records += res.Records
		st.Rows += res.Rows
		st.Rejected += res.Rejected
		st.Steps++
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s/%d** cursor %d of %d · archived through %s · %d rows, %d rejected",
			st.Topic, st.Partition, st.Cursor, st.End, st.ArchivedThrough.UTC().Format(time.RFC3339), st.Rows, st.Rejected))
		if workflow.GetInfo(ctx).GetContinueAsNewSuggested() || workflow.GetInfo(ctx).GetCurrentHistoryLength() > 2000 {
			return workflow.NewContinueAsNewError(ctx, Archive, st)
		}
		if res.CaughtUp {
			if err := workflow.Sleep(ctx, st.Idle); err != nil {
				return err
			}
		}
	}
}
