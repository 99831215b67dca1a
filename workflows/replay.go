package workflows

import (
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"reckon/activities"
)

// ReplayQueryProgress returns a ReplayProgress.
const ReplayQueryProgress = "progress"

// Reprocess modes of a replay.
const (
	ReprocessAll    = "all"    // recompute every (stream, day) (the default; idempotent)
	ReprocessFailed = "failed" // skip (stream, day)s whose last replay child completed
)

// ReplayParams starts a replay of the dates From..To (inclusive, YYYY-MM-DD).
type ReplayParams struct {
	From    string   `json:"from"`
	To      string   `json:"to"`
	Streams []string `json:"streams,omitempty"` // empty: every configured stream
	DryRun  bool     `json:"dry_run,omitempty"`
	// Concurrency is how many (stream, day) children run at once. Default 2.
	Concurrency int    `json:"concurrency"`
	Reprocess   string `json:"reprocess,omitempty"`
	// HorizonWait/HorizonPoll are passed to every child.
	HorizonWait time.Duration `json:"horizon_wait"`
	HorizonPoll time.Duration `json:"horizon_poll"`
	// HistoryLimit: continue as new (after draining running children) past
	// this many history events or when the server suggests it. Default 5000.
	HistoryLimit int `json:"history_limit"`
	// State is carried across continue-as-new; nil on a fresh start.
	State *ReplayState `json:"state,omitempty"`
}

// ReplayItem is one child: a stream and a day.
type ReplayItem struct {
	Stream string `json:"stream"`
	Date   string `json:"date"`
	// Skip: not re-run (--reprocess failed found it completed).
	Skip bool `json:"skip,omitempty"`
}

// ReplayState is the replay's progress, carried across continue-as-new.
type ReplayState struct {
	Items []ReplayItem `json:"items"`
	// Next is the index of the next item to start.
	Next int `json:"next"`
	// Done counts finished children (completed or failed); Skipped items
	// count as done too.
	Done   int               `json:"done"`
	Report activities.Report `json:"report"`
	Runs   int               `json:"runs"` // continue-as-new generations
}

// ReplayProgress is what the progress query returns.
type ReplayProgress struct {
	Total   int                    `json:"total"`
	Done    int                    `json:"done"`
	Failed  int                    `json:"failed"`
	Skipped int                    `json:"skipped"`
	Running []string               `json:"running"`
	Totals  activities.TruthReport `json:"totals"`
	Runs    int                    `json:"runs"`
}

// ReplayWorkflowID is the deterministic ID of a replay: starting the same
// replay again while it runs finds it (the CLI then shows its progress).
func ReplayWorkflowID(from, to string, streams []string, dryRun bool) string {
	id := "replay/" + from + "_" + to
	if len(streams) > 0 {
		id += "/" + strings.Join(streams, ",")
	}
	if dryRun {
		id += "/dry-run"
	}
	return id
}

// ReplayChildID is the deterministic ID of the child recomputing stream on
// date: the same for every replay, so --reprocess failed can find the last
// outcome of each (stream, day).
func ReplayChildID(stream, date string, dryRun bool) string {
	id := "replay/" + stream + "/" + date
	if dryRun {
		id += "/dry-run"
	}
	return id
}

// Replay recomputes a date range: one Recompute child per (stream, day)
// with a deterministic ID, at most Concurrency at a time (a sliding window:
// a new child starts as soon as one finishes), continuing as new for long
// ranges. It ends with the summed report (also in the lake unless dry-run).
// A failed child is reported, not fatal: `--reprocess failed` re-runs just
// those.
func Replay(ctx workflow.Context, in ReplayParams) (activities.Report, error) {
	if in.Concurrency <= 0 {
		in.Concurrency = 2
	}
	if in.HistoryLimit <= 0 {
		in.HistoryLimit = 5000
	}
	var a *activities.BatchTruth
	short := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second},
	})
	st := in.State
	if st == nil {
		var err error
		if st, err = replayPlan(ctx, short, in); err != nil {
			return activities.Report{}, err
		}
	}
	st.Report.WorkflowID = workflow.GetInfo(ctx).WorkflowExecution.ID
	running := map[int]bool{} // item index → running (read by the query and ordered iteration only)
	progress := func() ReplayProgress {
		p := ReplayProgress{Total: len(st.Items), Done: st.Done, Failed: len(st.Report.Failed),
			Skipped: len(st.Report.Skipped), Totals: st.Report.Total, Runs: st.Runs}
		for i := range st.Items {
			if running[i] {
				p.Running = append(p.Running, st.Items[i].Stream+"/"+st.Items[i].Date)
			}
		}
		return p
	}
	if err := workflow.SetQueryHandler(ctx, ReplayQueryProgress,
		func() (ReplayProgress, error) { return progress(), nil }); err != nil {
		return st.Report, err
	}
	upsert(ctx, SADate.ValueSet(in.From), SAStatus.ValueSet(StatusRunning))
	if len(in.Streams) == 1 {
		upsert(ctx, SAStream.ValueSet(in.Streams[0]))
	}

	sel := workflow.NewSelector(ctx)
	inflight := 0
	draining := false
	start := func(i int) {
		it := st.Items[i]
		day, _ := time.Parse(time.DateOnly, it.Date)
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:        ReplayChildID(it.Stream, it.Date, in.DryRun),
			StaticSummary:     fmt.Sprintf("recompute %s for %s (replay %s..%s)", it.Stream, it.Date, in.From, in.To),
			ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
			// A finished child of an earlier replay may be started again.
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		})
		f := workflow.ExecuteChildWorkflow(cctx, RecomputeWorkflow, RecomputeParams{
			Stream: it.Stream, From: day, To: day.Add(24 * time.Hour), DryRun: in.DryRun, Trigger: activities.TriggerReplay,
			HorizonWait: in.HorizonWait, HorizonPoll: in.HorizonPoll,
		})
		running[i] = true
		inflight++
		sel.AddFuture(f, func(f workflow.Future) {
			var res activities.RecomputeResult
			if err := f.Get(ctx, &res); err != nil {
				st.Report.Failed = append(st.Report.Failed, fmt.Sprintf("%s %s: %v", it.Stream, it.Date, err))
			} else {
				st.Report.Parts = append(st.Report.Parts, res.Report)
				st.Report.Total.Add(res.Report)
			}
			delete(running, i)
			inflight--
			st.Done++
		})
	}
	for {
		for !draining && inflight < in.Concurrency && st.Next < len(st.Items) {
			i := st.Next
			st.Next++
			if st.Items[i].Skip {
				st.Done++
				continue
			}
			start(i)
		}
		describeReplay(ctx, in, progress())
		if inflight == 0 {
			if st.Next < len(st.Items) {
				// Drained for continue-as-new.
				st.Runs++
				in.State = st
				return activities.Report{}, workflow.NewContinueAsNewError(ctx, ReplayWorkflow, in)
			}
			break
		}
		sel.Select(ctx)
		info := workflow.GetInfo(ctx)
		if info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > in.HistoryLimit {
			draining = true
		}
	}
	if err := workflow.ExecuteActivity(short, a.WriteReport, st.Report).Get(ctx, &st.Report.Path); err != nil {
		return st.Report, err
	}
	status := resultStatus(st.Report.Total)
	if len(st.Report.Failed) > 0 {
		status = StatusFailed
	}
	upsert(ctx, SAStatus.ValueSet(status), SACorrected.ValueSet(st.Report.Total.Corrected),
		SAChecked.ValueSet(st.Report.Total.Windows))
	describeReplay(ctx, in, progress())
	return st.Report, nil
}

// replayPlan lists the (stream, day) items, day-major, and for
// --reprocess failed marks those whose last child completed as skipped.
func replayPlan(ctx, short workflow.Context, in ReplayParams) (*ReplayState, error) {
	var a *activities.BatchTruth
	bad := func(format string, args ...any) error {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("replay: "+format, args...), activities.ErrTypeTruthInput,
			nil)
	}
	from, err1 := time.Parse(time.DateOnly, in.From)
	to, err2 := time.Parse(time.DateOnly, in.To)
	switch {
	case err1 != nil || err2 != nil:
		return nil, bad("dates must be YYYY-MM-DD: %q..%q", in.From, in.To)
	case to.Before(from):
		return nil, bad("to %s is before from %s", in.To, in.From)
	case to.Sub(from) > 366*24*time.Hour*10:
		return nil, bad("range %s..%s is longer than ten years", in.From, in.To)
	}
	switch in.Reprocess {
	case "", ReprocessAll, ReprocessFailed:
	default:
		return nil, bad("reprocess %q is not failed or all", in.Reprocess)
	}
	streams := in.Streams
	if len(streams) == 0 {
		if err := workflow.ExecuteActivity(short, a.TruthStreams).Get(ctx, &streams); err != nil {
			return nil, err
		}
	}
	name := in.From + "_" + in.To
	if len(in.Streams) > 0 {
		name += "_" + strings.Join(in.Streams, "-")
	}
	st := &ReplayState{Report: activities.Report{Kind: "replay", Name: name, DryRun: in.DryRun}}
	for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
		for _, s := range streams {
			st.Items = append(st.Items, ReplayItem{Stream: s, Date: d.Format(time.DateOnly)})
		}
	}
	if in.Reprocess == ReprocessFailed {
		ids := make([]string, len(st.Items))
		for i, it := range st.Items {
			ids[i] = ReplayChildID(it.Stream, it.Date, in.DryRun)
		}
		var statuses []string
		if err := workflow.ExecuteActivity(short, a.WorkflowStatuses, ids).Get(ctx, &statuses); err != nil {
			return nil, err
		}
		for i := range st.Items {
			if i < len(statuses) && statuses[i] == "completed" {
				st.Items[i].Skip = true
				st.Report.Skipped = append(st.Report.Skipped, st.Items[i].Stream+" "+st.Items[i].Date)
			}
		}
	}
	return st, nil
}

func describeReplay(ctx workflow.Context, in ReplayParams, p ReplayProgress) {
	const width = 20
	filled := 0
	if p.Total > 0 {
		filled = p.Done * width / p.Total
	}
	bar := strings.Repeat("█", filled) + strings.Repeat("░", width-filled)
	var b strings.Builder
	fmt.Fprintf(&b, "**replay %s..%s** `%s` %d/%d (stream, day)s", in.From, in.To, bar, p.Done, p.Total)
	if p.Failed > 0 {
		fmt.Fprintf(&b, " · %d failed", p.Failed)
	}
	if p.Skipped > 0 {
		fmt.Fprintf(&b, " · %d skipped", p.Skipped)
	}
	if len(p.Running) > 0 {
		fmt.Fprintf(&b, "\n\nrunning: %s", strings.Join(p.Running, ", "))
	}
	fmt.Fprintf(&b, "\n\n%s", reportMarkdown(p.Totals))
	workflow.SetCurrentDetails(ctx, b.String())
}
