package workflows

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"reckon/activities"
	"reckon/internal/numfmt"
)

// Batch-truth workflow names (docs/adr/0008-batch-truth.md).
const (
	RecomputeWorkflow    = "Recompute"
	ReconcileWorkflow    = "Reconcile"
	ReplayWorkflow       = "Replay"
	CorrectWorkflow      = "Correct"
	LateWatchWorkflow    = "LateWatch"
	PaneArchiveWorkflow  = "PaneArchive"
	CurateTablesWorkflow = "CurateTables"

	// RecomputeQueryStatus returns a RecomputeStatus.
	RecomputeQueryStatus = "status"
)

// Statuses in ReckonStatus of the batch-truth workflows.
const (
	StatusWaiting        = "waiting"         // for the horizon
	StatusRunning        = "running"         // recomputing, or children running
	StatusMatched        = "matched"         // nothing to correct
	StatusCorrected      = "corrected"       // corrections published
	StatusDryRun         = "dry_run"         // computed, nothing published
	StatusFailed         = "failed"          // a recompute failed (reconcile/replay: at least one)
	StatusHorizonTimeout = "horizon_timeout" // gave up waiting for the horizon
)

// ErrTypeHorizon is the failure type of a recompute that gave up waiting.
const ErrTypeHorizon = "HorizonNotReached"

// Defaults of the horizon wait when a caller leaves them zero.
const (
	defaultHorizonWait = 6 * time.Hour
	defaultHorizonPoll = 30 * time.Second
)

// RecomputeParams starts a Recompute: windows of Stream starting in [From,
// To), aligned to the stream's window and within one UTC day.
type RecomputeParams struct {
	Stream string    `json:"stream"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	// Windows, when set, restricts the recompute to these windows
	// (targeted correction); After then replaces the time horizon.
	Windows []activities.WindowRef       `json:"windows,omitempty"`
	After   []activities.PartitionOffset `json:"after,omitempty"`
	DryRun  bool                         `json:"dry_run,omitempty"`
	Trigger string                       `json:"trigger"`
	// HorizonWait bounds the wait for the horizon (default 6h), checked
	// every HorizonPoll (default 30s).
	HorizonWait time.Duration `json:"horizon_wait"`
	HorizonPoll time.Duration `json:"horizon_poll"`
}

// RecomputeStatus is what the status query returns.
type RecomputeStatus struct {
	Status  string                      `json:"status"`
	Waiting string                      `json:"waiting,omitempty"`
	Result  *activities.RecomputeResult `json:"result,omitempty"`
}

// RecomputeWorkflowID is the ID of a stand-alone recompute of a range.
func RecomputeWorkflowID(stream string, from, to time.Time) string {
	return fmt.Sprintf("recompute/%s/%s_%s", stream, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
}

// Recompute narrows a full range to the part holding events or panes
// (RecomputeExtent), waits (bounded, visibly) until that part is final, then
// recomputes its truth from the lake and publishes corrections
// (activities.BatchTruth.RecomputeWindows). Its result is small: the price-of-
// speed report of the range and a sample of the changes.
func Recompute(ctx workflow.Context, in RecomputeParams) (activities.RecomputeResult, error) {
	if in.HorizonWait <= 0 {
		in.HorizonWait = defaultHorizonWait
	}
	if in.HorizonPoll <= 0 {
		in.HorizonPoll = defaultHorizonPoll
	}
	st := RecomputeStatus{Status: StatusWaiting}
	if err := workflow.SetQueryHandler(ctx, RecomputeQueryStatus,
		func() (RecomputeStatus, error) { return st, nil }); err != nil {
		return activities.RecomputeResult{}, err
	}
	upsert(ctx, SAStream.ValueSet(in.Stream), SADate.ValueSet(in.From.UTC().Format(time.DateOnly)),
		SAWindowStart.ValueSet(in.From.UTC()), SAStatus.ValueSet(StatusWaiting))

	var a *activities.BatchTruth
	short := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrTypeTruthInput, activities.ErrTypeTruthTopic,
				activities.ErrTypeConfig},
		},
	})
	// A whole day still in progress (a reconciliation or replay of today)
	// is checked "so far"; any other range waits for its end.
	wholeDay := len(in.Windows) == 0 && in.From.Equal(in.From.UTC().Truncate(24*time.Hour)) &&
		in.To.Equal(dayEnd(in.From))
	if len(in.Windows) == 0 {
		// Only the part of the range that holds anything needs the horizon.
		var end time.Time
		if err := workflow.ExecuteActivity(short, a.RecomputeExtent,
			activities.ExtentInput{Stream: in.Stream, From: in.From, To: in.To}).Get(ctx, &end); err != nil {
			upsert(ctx, SAStatus.ValueSet(StatusFailed))
			return activities.RecomputeResult{}, err
		}
		if !end.After(in.From) {
			st.Status = StatusMatched
			upsert(ctx, SAStatus.ValueSet(StatusMatched), SACorrected.ValueSet(0), SAChecked.ValueSet(0))
			workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s** nothing to check: no events, no panes", describeRange(in)))
			return activities.RecomputeResult{Report: activities.TruthReport{Stream: in.Stream, From: in.From, To: in.From,
				DryRun: in.DryRun}}, nil
		}
		in.To = end
	}
	what := describeRange(in)
	asked := in.To
	var passedAt time.Time
	if workflow.GetVersion(ctx, horizonTargetChangeID, workflow.DefaultVersion, 1) == 1 {
		var err error
		if in.To, passedAt, err = awaitHorizon(ctx, &st, in, what, wholeDay); err != nil {
			return activities.RecomputeResult{}, err
		}
		what = describeRange(in)
	} else if err := awaitHorizonV0(ctx, short, &st, in, what); err != nil {
		return activities.RecomputeResult{}, err
	}

	st.Status, st.Waiting = StatusRunning, ""
	upsert(ctx, SAStatus.ValueSet(StatusRunning))
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s** recomputing from the lake", what))
	// The only retry of RecomputeWindows: a publish fenced by another
	// recompute of the same stream and date fails the attempt, and the
	// next one reads and decides anew.
	long := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Hour,
		HeartbeatTimeout:    2 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 20,
			NonRetryableErrorTypes: []string{activities.ErrTypeTruthInput, activities.ErrTypeTruthTopic,
				activities.ErrTypeConfig},
		},
	})
	var res activities.RecomputeResult
	err := workflow.ExecuteActivity(long, a.RecomputeWindows, activities.RecomputeInput{
		Stream: in.Stream, From: in.From, To: in.To, Windows: in.Windows, DryRun: in.DryRun, Trigger: in.Trigger,
		HorizonPassedAt: passedAt,
	}).Get(ctx, &res)
	if err != nil {
		st.Status = StatusFailed
		upsert(ctx, SAStatus.ValueSet(StatusFailed))
		return res, err
	}
	// After publishing, never before, and without waiting for it: a
	// correction workflow starts its next recompute when this one returns
	// (docs/adr/0019-curated-tables.md).
	if !in.DryRun && len(res.Files) > 0 && workflow.GetVersion(ctx, curateChangeID, workflow.DefaultVersion, 1) == 1 {
		startCurateTables(ctx, res.Files)
	}
	if asked.After(in.To) {
		res.Report.OpenUntil = asked
	}
	st.Status = resultStatus(res.Report)
	st.Result = &res
	upsert(ctx, SAStatus.ValueSet(st.Status), SACorrected.ValueSet(res.Report.Corrected),
		SAChecked.ValueSet(res.Report.Windows))
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s** %s%s · trigger: %s\n\n%s%s", what, st.Status,
		openNote(res.Report), triggerText(in.Trigger), reportMarkdown(res.Report),
		changesMarkdown(res.Changes, res.Report.Corrected)))
	return res, nil
}

// openNote says which windows of a day in progress were left open.
func openNote(r activities.TruthReport) string {
	if r.OpenUntil.IsZero() {
		return ""
	}
	return fmt.Sprintf(" (windows up to %s checked; windows to %s still open)",
		r.To.UTC().Format(time.RFC3339), r.OpenUntil.UTC().Format(time.RFC3339))
}

// horizonTargetChangeID versions the horizon wait: version 1 keeps each
// partition's archive target once captured, long-polls the check, and
// for a day in progress checks the windows final so far
// (docs/adr/0015-stream-progress.md, "A fixed target"); the default
// version is the old poll, kept so recorded histories replay.
const horizonTargetChangeID = "horizon-fixed-target"

// awaitHorizon waits until the range is final and returns its end: in.To,
// or for a whole day (wholeDay) still in progress the end of the windows
// final so far. passedAt
// is when the stream's progress passed that end, known only when this
// run waited for it (else zero: it passed before the run looked).
func awaitHorizon(ctx workflow.Context, st *RecomputeStatus, in RecomputeParams, what string, wholeDay bool) (
	to, passedAt time.Time, err error) {
	var a *activities.BatchTruth
	hin := activities.HorizonInput{Stream: in.Stream, To: in.To, After: in.After, WaitUpTo: in.HorizonPoll}
	if wholeDay && dayEnd(in.From).After(workflow.Now(ctx)) {
		hin.SoFar, hin.From = true, in.From
	}
	check := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: in.HorizonPoll + 2*time.Minute,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrTypeTruthInput, activities.ErrTypeTruthTopic,
				activities.ErrTypeConfig, activities.ErrTypeTruthSettings, activities.ErrTypeTruthProgressWentBack},
		},
	})
	started := workflow.Now(ctx)
	waitedForStream := false
	for polls := 0; ; polls++ {
		asked := workflow.Now(ctx)
		var h activities.HorizonResult
		// The first check answers at once, so a waiting recompute says
		// why (its details, `reckon reconcile --wait`) without a poll's
		// delay; the later ones long-poll.
		hin.WaitUpTo = in.HorizonPoll
		if polls == 0 {
			hin.WaitUpTo = 0
		}
		if err := workflow.ExecuteActivity(check, a.CheckHorizon, hin).Get(ctx, &h); err != nil {
			upsert(ctx, SAStatus.ValueSet(StatusFailed))
			return time.Time{}, time.Time{}, err
		}
		if h.Ready {
			if waitedForStream || h.StreamWaited {
				passedAt = h.PassedAt
			}
			if hin.SoFar && !h.To.IsZero() {
				return h.To, passedAt, nil // final so far, on the first check
			}
			return hin.To, passedAt, nil
		}
		// Keep what the check captured: the targets, and for a day in
		// progress the end it picked (docs/adr/0015, "A fixed target").
		hin.Targets = h.Targets
		if hin.SoFar && len(h.Targets) > 0 {
			hin.SoFar, hin.To = false, h.To
			what = describeRange(RecomputeParams{Stream: in.Stream, From: in.From, To: h.To, DryRun: in.DryRun})
		}
		if slices.ContainsFunc(h.Causes, func(c string) bool { return c != activities.HorizonArchive }) {
			waitedForStream = true
		}
		st.Waiting = h.Waiting
		waited := workflow.Now(ctx).Sub(started)
		if waited >= in.HorizonWait {
			st.Status = StatusHorizonTimeout
			upsert(ctx, SAStatus.ValueSet(StatusHorizonTimeout))
			return time.Time{}, time.Time{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("recompute %s: horizon not reached after %v: %s", what, waited, h.Waiting), ErrTypeHorizon, nil)
		}
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s** waiting for the horizon (check %d, %v of at most %v)\n\n%s\n\n%s",
			what, polls+1, waited.Round(time.Second), in.HorizonWait, mdList(h.Waiting), pollNote(in.HorizonPoll)))
		// A long poll returns after HorizonPoll; a quicker answer (a short
		// poll, a retried attempt) waits out the rest of it.
		if rest := in.HorizonPoll - workflow.Now(ctx).Sub(asked); rest > 0 {
			if err := workflow.Sleep(ctx, rest); err != nil {
				return time.Time{}, time.Time{}, err
			}
		}
	}
}

// dayEnd is the end of the UTC day holding t.
func dayEnd(t time.Time) time.Time {
	return t.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
}

// awaitHorizonV0 is the horizon wait of histories recorded before
// horizonTargetChangeID: it compares with the stream's latest offset.
func awaitHorizonV0(ctx, short workflow.Context, st *RecomputeStatus, in RecomputeParams, what string) error {
	var a *activities.BatchTruth
	started := workflow.Now(ctx)
	for polls := 0; ; polls++ {
		var h activities.HorizonResult
		hin := activities.HorizonInput{Stream: in.Stream, To: in.To, After: in.After}
		if err := workflow.ExecuteActivity(short, a.CheckHorizon, hin).Get(ctx, &h); err != nil {
			upsert(ctx, SAStatus.ValueSet(StatusFailed))
			return err
		}
		if h.Ready {
			return nil
		}
		st.Waiting = h.Waiting
		waited := workflow.Now(ctx).Sub(started)
		if waited >= in.HorizonWait {
			st.Status = StatusHorizonTimeout
			upsert(ctx, SAStatus.ValueSet(StatusHorizonTimeout))
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("recompute %s: horizon not reached after %v: %s", what, waited, h.Waiting), ErrTypeHorizon, nil)
		}
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s** waiting for the horizon (check %d, %v of at most %v)\n\n%s\n\n%s",
			what, polls+1, waited.Round(time.Second), in.HorizonWait, mdList(h.Waiting), pollNote(in.HorizonPoll)))
		if err := workflow.Sleep(ctx, in.HorizonPoll); err != nil {
			return err
		}
	}
}

func resultStatus(r activities.TruthReport) string {
	switch {
	case r.DryRun:
		return StatusDryRun
	case r.Corrected > 0:
		return StatusCorrected
	}
	return StatusMatched
}

func describeRange(in RecomputeParams) string {
	s := fmt.Sprintf("%s [%s, %s)", in.Stream, in.From.UTC().Format(time.RFC3339), in.To.UTC().Format(time.RFC3339))
	if len(in.Windows) > 0 {
		s += fmt.Sprintf(", %d windows", len(in.Windows))
	}
	if in.DryRun {
		s += " (dry run)"
	}
	return s
}

// reportMarkdown renders a report for the Temporal UI.
func reportMarkdown(r activities.TruthReport) string {
	var b strings.Builder
	fmt.Fprintf(&b,
		"| windows | stream exact | matched | corrected | missing | events beyond lateness | count err max/mean | sum err "+
			"max/mean |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s / %s | %s / %s |",
		numfmt.Int(r.Windows), numfmt.Int(r.StreamExact), numfmt.Int(r.Matched),
		numfmt.Int(r.Corrected), numfmt.Int(r.Missing), numfmt.Int(r.EventsBeyondLateness),
		numfmt.Float(r.CountErrMax), num3(r.CountErrMean), numfmt.Float(r.SumErrMax), num3(r.SumErrMean))
	return b.String()
}

// upsert sets search attributes; a failure to set them (e.g. attributes
// not registered on the cluster) must not fail the work, so it is logged.
func upsert(ctx workflow.Context, ups ...temporal.SearchAttributeUpdate) {
	if err := workflow.UpsertTypedSearchAttributes(ctx, ups...); err != nil {
		workflow.GetLogger(ctx).Warn("search attributes not set", "error", err)
	}
}
