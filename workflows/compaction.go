package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"reckon/activities"
	"reckon/internal/numfmt"
)

// CompactionWorkflow is the registered name of Compaction.
const CompactionWorkflow = "Compaction"

// CompactionQueryProgress returns the CompactionState.
const CompactionQueryProgress = "progress"

// CompactionWorkflowID is the deterministic ID of the compaction workflow
// of one raw topic: starting it twice finds the running one.
func CompactionWorkflowID(topic string) string { return "compact/" + topic }

// CompactionState is the compaction workflow's state, carried across
// continue-as-new.
type CompactionState struct {
	Topic string `json:"topic"`
	// Poll is the pause between passes. Default 30s.
	Poll time.Duration `json:"poll"`
	// ClosedThrough: every hour ending at or before it is closed (never
	// goes back).
	ClosedThrough time.Time `json:"closed_through"`
	// Last is the last pass's result.
	Last activities.CompactRawResult `json:"last"`
	// Totals since the first start.
	Passes, ClosedHours, OpenMerges, Rows, Dropped int64
}

// Compaction keeps one raw topic's lake table compact
// (docs/adr/0018-continuous-compaction.md): every Poll it runs one pass
// (CompactRaw) that compacts the hours the stream has closed, merged
// across partitions with redeliveries removed, and merges the partitions of
// open hours that reach half the file limit. It says in its current
// details what it did and what the next hour waits for, and continues as
// new before its history grows large.
func Compaction(ctx workflow.Context, st CompactionState) error {
	if st.Poll <= 0 {
		st.Poll = 30 * time.Second
	}
	if err := workflow.SetQueryHandler(ctx, CompactionQueryProgress,
		func() (CompactionState, error) { return st, nil }); err != nil {
		return err
	}
	upsert(ctx, SATopic.ValueSet(st.Topic))
	if !st.ClosedThrough.IsZero() {
		upsert(ctx, SAClosedThrough.ValueSet(st.ClosedThrough))
	}
	var a *activities.Compaction
	pass := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Hour,
		HeartbeatTimeout:    10 * time.Minute, // a heartbeat after every hour; a closed hour of ~7 M rows takes a minute or so
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			NonRetryableErrorTypes: []string{activities.ErrTypeConfig},
		},
	})
	for {
		var res activities.CompactRawResult
		if err := workflow.ExecuteActivity(pass, a.CompactRaw, activities.CompactRawInput{
			Topic: st.Topic, ClosedThrough: st.ClosedThrough,
		}).Get(ctx, &res); err != nil {
			return err
		}
		if res.ClosedThrough.After(st.ClosedThrough) {
			st.ClosedThrough = res.ClosedThrough
			upsert(ctx, SAClosedThrough.ValueSet(st.ClosedThrough))
		}
		st.Last = res
		st.Passes++
		st.ClosedHours += int64(res.ClosedHours)
		st.OpenMerges += int64(res.OpenMerges)
		st.Rows += res.Rows
		st.Dropped += res.Dropped
		workflow.SetCurrentDetails(ctx, DescribeCompaction(st))
		info := workflow.GetInfo(ctx)
		if info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > 2000 {
			return workflow.NewContinueAsNewError(ctx, CompactionWorkflow, st)
		}
		if err := workflow.Sleep(ctx, st.Poll); err != nil {
			return err
		}
	}
}

// DescribeCompaction is the compaction workflow's current details: what it
// did last and what the next hour waits for.
func DescribeCompaction(st CompactionState) string {
	r := st.Last
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** ", st.Topic)
	if st.ClosedThrough.IsZero() {
		b.WriteString("no hour closed yet")
	} else {
		fmt.Fprintf(&b, "hours closed through %s", st.ClosedThrough.UTC().Format("2006-01-02 15:04"))
	}
	fmt.Fprintf(&b, " (%s)\n", mdEscapeLine(r.Basis))
	if r.Waiting != "" {
		fmt.Fprintf(&b, "\n- next hour waits for %s", mdEscapeLine(r.Waiting))
	}
	fmt.Fprintf(&b, "\n- last pass: %s hours, %s closed compacted, %s open merges, %s redeliveries dropped",
		numfmt.Int(int64(r.Hours)), numfmt.Int(int64(r.ClosedHours)), numfmt.Int(int64(r.OpenMerges)), numfmt.Int(r.Dropped))
	fmt.Fprintf(&b, "\n- most files: %d per open partition-hour, %d per closed hour", r.MaxOpenFiles, r.MaxClosedFiles)
	if r.RejectedExpired > 0 {
		fmt.Fprintf(&b, "\n- %s rejected files past retention deleted", numfmt.Int(int64(r.RejectedExpired)))
	}
	for _, f := range r.Failed {
		fmt.Fprintf(&b, "\n- failed (retried next pass): %s", mdEscapeLine(f))
	}
	fmt.Fprintf(&b, "\n- since start: %s passes, %s closed hours, %s rows written, %s dropped", numfmt.Int(st.Passes),
		numfmt.Int(st.ClosedHours), numfmt.Int(st.Rows), numfmt.Int(st.Dropped))
	return b.String()
}
