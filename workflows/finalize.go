package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"reckon/activities"
)

// FinalizeWorkflow is the finalizer's registered name.
const FinalizeWorkflow = "Finalize"

// FinalizeQueryStatus returns the FinalizeState.
const FinalizeQueryStatus = "status"

// FinalizeWorkflowID is the ID of a stream's finalizer.
func FinalizeWorkflowID(stream string) string { return "finalize/" + stream }

// FinalizeState is the finalizer's state, carried across continue-as-new.
type FinalizeState struct {
	Stream string `json:"stream"`
	// Window is the stream's window size: steps end at window ends.
	Window time.Duration `json:"window"`
	// Cursor: every window of the stream starting before it is final.
	// Zero starts at the beginning of the current UTC day.
	Cursor time.Time `json:"cursor"`
	// Every paces the steps: one starts at most this often. Default 10s.
	Every time.Duration `json:"every"`
	// HorizonPoll bounds one long poll of the horizon. Default 30s.
	HorizonPoll time.Duration `json:"horizon_poll"`

	// The step in progress: the end it picked and the archive targets it
	// captured (docs/adr/0015, "A fixed target"), whether it saw the stream
	// behind, and when the check that picked them was asked.
	StepTo       time.Time                  `json:"step_to,omitzero"`
	Targets      []activities.HorizonTarget `json:"targets,omitempty"`
	StreamWaited bool                       `json:"stream_waited,omitempty"`
	PickedAt     time.Time                  `json:"picked_at,omitzero"`
	// LastPick is when the previous step's check picked its end: the
	// windows after it had not passed then, so a window found passed at
	// the next step's first look passed after LastPick (the time to final
	// is measured from there: an upper bound).
	LastPick time.Time `json:"last_pick,omitzero"`

	// Totals since the first start, and what the last check said.
	Steps     int64  `json:"steps"`
	Windows   int64  `json:"windows"`
	Corrected int64  `json:"corrected"`
	Waiting   string `json:"waiting,omitempty"`
}

// Finalize makes a stream's windows final while traffic flows: in steps, it
// waits (long-polling activities.BatchTruth.CheckHorizon in its "so far"
// form) until the stream has purged windows past the cursor and the lake
// holds every record of them, recomputes those windows from the lake
// (RecomputeWindows: truth rows, corrections published as versions), brings
// the curated tables up to date, and moves the cursor on. A step never
// crosses an hour's last window, so each hour's truth rows share one file
// (truth/…/final-YYYYMMDDTHH.parquet, merged step by step). The time from
// a window's horizon passing to its truth in the lake is the metric
// reckon_batch_time_to_final_seconds{trigger="finalize"}
// (docs/adr/0034-finalizer.md).
func Finalize(ctx workflow.Context, st FinalizeState) error {
	if st.Every <= 0 {
		st.Every = 10 * time.Second
	}
	if st.HorizonPoll <= 0 {
		st.HorizonPoll = defaultHorizonPoll
	}
	if st.Window <= 0 {
		return temporal.NewNonRetryableApplicationError("finalize: no window size", activities.ErrTypeTruthInput, nil)
	}
	if st.Cursor.IsZero() {
		st.Cursor = workflow.Now(ctx).UTC().Truncate(24 * time.Hour)
	}
	status := func() (FinalizeState, error) { return st, nil }
	if err := workflow.SetQueryHandler(ctx, FinalizeQueryStatus, status); err != nil {
		return err
	}
	upsert(ctx, SAStream.ValueSet(st.Stream))
	var a *activities.BatchTruth
	check := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: st.HorizonPoll + 2*time.Minute,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrTypeTruthInput, activities.ErrTypeTruthTopic,
				activities.ErrTypeConfig, activities.ErrTypeTruthSettings, activities.ErrTypeTruthProgressWentBack},
		},
	})
	recompute := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Hour,
		HeartbeatTimeout:    2 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 20,
			NonRetryableErrorTypes: []string{activities.ErrTypeTruthInput, activities.ErrTypeTruthTopic,
				activities.ErrTypeConfig},
		},
	})
	nextStep := workflow.Now(ctx)
	for {
		if wait := nextStep.Sub(workflow.Now(ctx)); wait > 0 {
			if err := workflow.Sleep(ctx, wait); err != nil {
				return err
			}
		}
		asked := workflow.Now(ctx)
		limit := finalizeLimit(st.Cursor, st.Window)
		if now := floorTo(asked, st.Window); limit.After(now) {
			limit = now // never past the present: an idle topic must not run ahead
		}
		if !limit.After(st.Cursor) {
			nextStep = asked.Add(st.Every)
			continue
		}
		hin := activities.HorizonInput{Stream: st.Stream, SoFar: true, From: st.Cursor, To: limit,
			WaitUpTo: st.HorizonPoll, Targets: st.Targets}
		if !st.StepTo.IsZero() {
			hin.SoFar, hin.To = false, st.StepTo
		}
		var h activities.HorizonResult
		if err := workflow.ExecuteActivity(check, a.CheckHorizon, hin).Get(ctx, &h); err != nil {
			// The finalizer never gives up: it says why and tries the
			// step afresh (a reset stream's progress fixes new targets).
			st.Waiting = "the horizon check failed: " + err.Error()
			st.StepTo, st.Targets, st.StreamWaited = time.Time{}, nil, false
			workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s** finalized up to %s; %s", st.Stream,
				fmtTime(st.Cursor), st.Waiting))
			nextStep = workflow.Now(ctx).Add(st.HorizonPoll)
			continue
		}
		if len(h.Targets) > 0 && st.StepTo.IsZero() {
			st.StepTo, st.PickedAt = h.To, h.PickedAt
		}
		st.Targets = h.Targets
		if !h.Ready {
			if slices.ContainsFunc(h.Causes, func(c string) bool { return c != activities.HorizonArchive }) {
				st.StreamWaited = true
			}
			st.Waiting = h.Waiting
			workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s** finalized up to %s; waiting for the horizon\n\n%s\n\n%s",
				st.Stream, fmtTime(st.Cursor), mdList(h.Waiting), pollNote(st.HorizonPoll)))
			// A long poll took its time; a quick answer waits out the rest.
			nextStep = asked.Add(st.HorizonPoll)
			if workflow.Now(ctx).Sub(asked) >= st.HorizonPoll/2 {
				nextStep = workflow.Now(ctx)
			}
			continue
		}
		to := h.To
		if to.IsZero() || !to.After(st.Cursor) {
			to = limit // nothing of the range holds records
		}
		if st.PickedAt.IsZero() {
			st.PickedAt = asked
		}
		// When the stream passed the step's end: seen, if it was behind
		// when the step looked; else after the previous step picked.
		passedAt := st.LastPick
		if st.StreamWaited || h.StreamWaited {
			passedAt = h.PassedAt
		}
		var res activities.RecomputeResult
		if err := workflow.ExecuteActivity(recompute, a.RecomputeWindows, activities.RecomputeInput{
			Stream: st.Stream, From: st.Cursor, To: to, Trigger: activities.TriggerFinalize,
			HorizonPassedAt: passedAt, TruthFile: FinalizeTruthFile(st.Cursor),
		}).Get(ctx, &res); err != nil {
			st.Waiting = "the recompute failed: " + err.Error()
			workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s** finalized up to %s; %s", st.Stream,
				fmtTime(st.Cursor), st.Waiting))
			nextStep = workflow.Now(ctx).Add(st.HorizonPoll)
			continue // the same step again, with its targets
		}
		if len(res.Files) > 0 {
			curateWindows(ctx, res.Files)
		}
		st.Cursor, st.LastPick = to, st.PickedAt
		st.StepTo, st.Targets, st.StreamWaited, st.PickedAt, st.Waiting = time.Time{}, nil, false, time.Time{}, ""
		st.Steps++
		st.Windows += int64(res.Report.Windows)
		st.Corrected += int64(res.Report.Corrected)
		workflow.SetCurrentDetails(ctx, fmt.Sprintf(
			"**%s** finalized up to %s · %d steps · %d windows checked · %d corrected", st.Stream, fmtTime(st.Cursor),
			st.Steps, st.Windows, st.Corrected))
		// A step that stopped at its hour's end has more final windows
		// behind it (catching up after a start or an outage): the next
		// goes at once. Otherwise the next comes every Every.
		nextStep = asked.Add(st.Every)
		if to.Equal(limit) {
			nextStep = workflow.Now(ctx)
		}
		info := workflow.GetInfo(ctx)
		if info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > 2000 {
			return workflow.NewContinueAsNewError(ctx, FinalizeWorkflow, st)
		}
	}
}

// FinalizeTruthFile names the truth file of the finalizer's windows
// starting in cursor's UTC hour.
func FinalizeTruthFile(cursor time.Time) string {
	return "final-" + cursor.UTC().Format("20060102T15")
}

// finalizeLimit is where a step from cursor ends at the latest: the first
// window end at or after the end of cursor's hour, so the windows of a
// step all start in one hour.
func finalizeLimit(cursor time.Time, window time.Duration) time.Time {
	hourEnd := cursor.UTC().Truncate(time.Hour).Add(time.Hour)
	end := floorTo(hourEnd, window)
	if end.Before(hourEnd) {
		end = end.Add(window)
	}
	return end
}

// floorTo is the window start at or before t (windows are aligned to the
// Unix epoch, as the stream's are).
func floorTo(t time.Time, window time.Duration) time.Time {
	n, w := t.UnixNano(), int64(window)
	f := n - n%w
	if n%w < 0 {
		f -= w
	}
	return time.Unix(0, f).UTC()
}

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }
