package workflows

import (
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"reckon/activities"
)

// ReconcileParams starts a daily reconciliation. The schedule passes no
// Date: the run reconciles its nominal (scheduled) date in Timezone minus
// DaysBack. Windows and the lake are UTC, so the reconciled range is the
// UTC day of that date.
type ReconcileParams struct {
	// Date (YYYY-MM-DD) to reconcile; empty: from the schedule.
	Date     string `json:"date,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	DaysBack int    `json:"days_back,omitempty"`
	// Streams to reconcile; empty: every configured stream.
	Streams     []string      `json:"streams,omitempty"`
	DryRun      bool          `json:"dry_run,omitempty"`
	HorizonWait time.Duration `json:"horizon_wait"`
	HorizonPoll time.Duration `json:"horizon_poll"`
}

// ReconcileWorkflowID is the ID of a reconciliation started by hand.
func ReconcileWorkflowID(date string) string { return "reconcile/" + date }

// saScheduledStart is set by Temporal Schedules on the workflows they start.
var saScheduledStart = temporal.NewSearchAttributeKeyTime("TemporalScheduledStartTime")

// Reconcile recomputes one date for every stream (one Recompute child per
// stream, each waiting for its horizon), and produces the price-of-speed
// report: as its result, as JSON in the lake (reports/reconcile/<date>.json)
// and in search attributes. A failed stream is reported (Failed, status
// "failed") rather than failing the run, so the other streams' report
// stays available.
func Reconcile(ctx workflow.Context, in ReconcileParams) (activities.Report, error) {
	info := workflow.GetInfo(ctx)
	rep := activities.Report{Kind: "reconcile", WorkflowID: info.WorkflowExecution.ID, DryRun: in.DryRun}
	date, err := reconcileDate(ctx, in)
	if err != nil {
		return rep, err
	}
	rep.Name = date
	day, _ := time.Parse(time.DateOnly, date)
	upsert(ctx, SADate.ValueSet(date), SAWindowStart.ValueSet(day), SAStatus.ValueSet(StatusRunning))

	var a *activities.BatchTruth
	short := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second},
	})
	streams := in.Streams
	if len(streams) == 0 {
		if err := workflow.ExecuteActivity(short, a.TruthStreams).Get(ctx, &streams); err != nil {
			return rep, err
		}
	}
	done := make([]string, len(streams)) // each stream's status once its child finished
	workflow.SetCurrentDetails(ctx, reconcileProgress(date, rep.WorkflowID, streams, done))
	futs := make([]workflow.ChildWorkflowFuture, len(streams))
	for i, s := range streams {
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:        rep.WorkflowID + "/" + s,
			StaticSummary:     fmt.Sprintf("recompute %s for %s (reconcile)", s, date),
			ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		})
		futs[i] = workflow.ExecuteChildWorkflow(cctx, RecomputeWorkflow, RecomputeParams{
			Stream: s, From: day, To: day.Add(24 * time.Hour), DryRun: in.DryRun, Trigger: activities.TriggerReconcile,
			HorizonWait: in.HorizonWait, HorizonPoll: in.HorizonPoll,
		})
	}
	// Children finish in any order; the details say which are done as
	// they finish, the report keeps the streams' order.
	results := make([]activities.RecomputeResult, len(futs))
	errs := make([]error, len(futs))
	running := slices.Clone(streams)
	sel := workflow.NewSelector(ctx)
	for i, f := range futs {
		sel.AddFuture(f, func(f workflow.Future) {
			errs[i] = f.Get(ctx, &results[i])
			running = slices.DeleteFunc(running, func(s string) bool { return s == streams[i] })
			done[i] = resultStatus(results[i].Report)
			if errs[i] != nil {
				done[i] = StatusFailed
			}
			workflow.SetCurrentDetails(ctx, reconcileProgress(date, rep.WorkflowID, streams, done))
		})
	}
	for range futs {
		sel.Select(ctx)
	}
	for i := range futs {
		if errs[i] != nil {
			rep.Failed = append(rep.Failed, fmt.Sprintf("%s %s: %v", streams[i], date, errs[i]))
			continue
		}
		rep.Parts = append(rep.Parts, results[i].Report)
		rep.Total.Add(results[i].Report)
	}
	rep.Total.From, rep.Total.To = day, day.Add(24*time.Hour)
	for _, p := range rep.Parts {
		if !p.OpenUntil.IsZero() && p.To.Before(rep.Total.To) {
			rep.Total.To = p.To // a day in progress: checked up to the earliest stream's end
		}
	}
	if err := workflow.ExecuteActivity(short, a.WriteReport, rep).Get(ctx, &rep.Path); err != nil {
		return rep, err
	}
	status := resultStatus(rep.Total)
	if len(rep.Failed) > 0 {
		status = StatusFailed
	}
	upsert(ctx, SAStatus.ValueSet(status), SACorrected.ValueSet(rep.Total.Corrected),
		SAChecked.ValueSet(rep.Total.Windows))
	workflow.SetCurrentDetails(ctx,
		fmt.Sprintf("**reconcile %s** %s\n\n%s%s", date, status, reportMarkdown(rep.Total), failedMarkdown(rep.Failed)))
	return rep, nil
}

// reconcileDate is in.Date, or the run's nominal date minus DaysBack: the
// schedule's TemporalScheduledStartTime (so a catch-up run after an
// outage reconciles the day it was meant for), else the timestamp the
// schedule appends to the workflow ID, else the workflow's start time.
func reconcileDate(ctx workflow.Context, in ReconcileParams) (string, error) {
	if in.Date != "" {
		if _, err := time.Parse(time.DateOnly, in.Date); err != nil {
			return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("reconcile: date %q is not YYYY-MM-DD", in.Date),
				activities.ErrTypeTruthInput, nil)
		}
		return in.Date, nil
	}
	nominal, ok := workflow.GetTypedSearchAttributes(ctx).GetTime(saScheduledStart)
	if !ok {
		id := workflow.GetInfo(ctx).WorkflowExecution.ID
		if len(id) > 20 {
			if t, err := time.Parse(time.RFC3339, id[len(id)-20:]); err == nil {
				nominal, ok = t, true
			}
		}
	}
	if !ok {
		nominal = workflow.Now(ctx)
	}
	tz, back := in.Timezone, in.DaysBack
	if tz == "" {
		tz = "UTC"
	}
	// Loading a zone reads the zone database: a side effect, recorded.
	var date string
	err := workflow.SideEffect(ctx, func(workflow.Context) any {
		loc, err := time.LoadLocation(tz)
		if err != nil {
			return ""
		}
		return nominal.In(loc).AddDate(0, 0, -back).Format(time.DateOnly)
	}).Get(&date)
	if err != nil {
		return "", err
	}
	if date == "" {
		return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("reconcile: unknown time zone %q", tz),
			activities.ErrTypeTruthInput, nil)
	}
	return date, nil
}

// reconcileProgress is a running reconciliation's details: one list item
// per stream, its status once its child finished, else the child that is
// recomputing it (whose details say what it waits for).
func reconcileProgress(date, id string, streams, done []string) string {
	n := 0
	var b strings.Builder
	for i, s := range streams {
		if done[i] != "" {
			n++
			fmt.Fprintf(&b, "\n- %s: %s", s, done[i])
		} else {
			fmt.Fprintf(&b, "\n- %s: recomputing — `%s/%s` says what it waits for", s, id, s)
		}
	}
	return fmt.Sprintf("**reconcile %s**: %d of %d streams done\n%s", date, n, len(streams), b.String())
}

func failedMarkdown(failed []string) string {
	if len(failed) == 0 {
		return ""
	}
	return "\n\nfailed:\n- " + strings.Join(failed, "\n- ")
}
