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

// Targeted correction (docs/adr/0008-batch-truth.md): a LateWatch per
// partition of the late topic hands too-late events to one Correct
// workflow per stream (signal-with-start on CorrectWorkflowID), which
// debounces them and recomputes exactly the affected (key, window)s.
const (
	// CorrectSignalLate carries []activities.LateItem.
	CorrectSignalLate = "late"
	// CorrectQueryState returns a CorrectProgress.
	CorrectQueryState = "state"
	// LateWatchQueryProgress returns the LateWatchState.
	LateWatchQueryProgress = "progress"
)

// CorrectWorkflowID is the deterministic ID of stream's correction workflow.
func CorrectWorkflowID(stream string) string { return "correct/" + stream }

// LateWatchWorkflowID is the deterministic ID of the watcher of one late
// topic partition.
func LateWatchWorkflowID(topic string, partition int32) string {
	return fmt.Sprintf("late-watch/%s/%d", topic, partition)
}

// CorrectParams starts (or continues as new) a stream's correction workflow.
type CorrectParams struct {
	Stream string `json:"stream"`
	// Debounce: recompute once no too-late event came for this long
	// (default 10s), but at most MaxDelay after the first pending one
	// (default 1m).
	Debounce time.Duration `json:"debounce"`
	MaxDelay time.Duration `json:"max_delay"`
	// IdleClose: complete after this long with nothing pending; the next
	// signal-with-start begins a new run. Default 1h.
	IdleClose time.Duration `json:"idle_close"`
	// HorizonWait/HorizonPoll for the recompute children: they wait for the
	// archive to hold the late events. Defaults 15m and 2s.
	HorizonWait time.Duration `json:"horizon_wait"`
	HorizonPoll time.Duration `json:"horizon_poll"`
	// HistoryLimit: continue as new past this many events. Default 3000.
	HistoryLimit int `json:"history_limit"`

	// Carried across continue-as-new.
	Pending []activities.LateItem `json:"pending,omitempty"`
	Seq     int64                 `json:"seq"`
	Totals  CorrectTotals         `json:"totals"`
}

// CorrectTotals count what a correction workflow did (across runs).
type CorrectTotals struct {
	LateEvents int64 `json:"late_events"`
	Recomputes int64 `json:"recomputes"`
	Failed     int64 `json:"failed"`
	Windows    int64 `json:"windows_checked"`
	Corrected  int64 `json:"corrected"`
}

// CorrectProgress is what the state query returns.
type CorrectProgress struct {
	Pending int           `json:"pending"`
	Totals  CorrectTotals `json:"totals"`
}

func (p *CorrectParams) defaults() {
	if p.Debounce <= 0 {
		p.Debounce = 10 * time.Second
	}
	if p.MaxDelay < p.Debounce {
		p.MaxDelay = max(p.Debounce, time.Minute)
	}
	if p.IdleClose <= 0 {
		p.IdleClose = time.Hour
	}
	if p.HorizonWait <= 0 {
		p.HorizonWait = 15 * time.Minute
	}
	if p.HorizonPoll <= 0 {
		p.HorizonPoll = 2 * time.Second
	}
	if p.HistoryLimit <= 0 {
		p.HistoryLimit = 3000
	}
}

// Correct collects too-late events of one stream and, debounced,
// recomputes their windows: one Recompute child per UTC date, restricted
// to the affected (key, window)s and waiting only until the lake holds the
// late events (their arrival on the late topic proves the stream purged
// the window, so the next version is the batch's).
func Correct(ctx workflow.Context, p CorrectParams) error {
	p.defaults()
	upsert(ctx, SAStream.ValueSet(p.Stream))
	if err := workflow.SetQueryHandler(ctx, CorrectQueryState, func() (CorrectProgress, error) {
		return CorrectProgress{Pending: len(p.Pending), Totals: p.Totals}, nil
	}); err != nil {
		return err
	}
	ch := workflow.GetSignalChannel(ctx, CorrectSignalLate)
	var first, last time.Time
	receive := func(items []activities.LateItem) {
		now := workflow.Now(ctx)
		if len(p.Pending) == 0 {
			first = now
		}
		last = now
		p.Totals.LateEvents += int64(len(items))
		p.Pending = mergeLate(p.Pending, items)
	}
	drain := func() {
		for {
			var items []activities.LateItem
			if !ch.ReceiveAsync(&items) {
				return
			}
			receive(items)
		}
	}
	if len(p.Pending) > 0 {
		first, last = workflow.Now(ctx), workflow.Now(ctx)
	}
	for {
		describeCorrect(ctx, p)
		var wait time.Duration
		if len(p.Pending) == 0 {
			wait = p.IdleClose
		} else {
			deadline := last.Add(p.Debounce)
			if d := first.Add(p.MaxDelay); d.Before(deadline) {
				deadline = d
			}
			wait = max(deadline.Sub(workflow.Now(ctx)), 0)
		}
		tctx, cancel := workflow.WithCancel(ctx)
		timer := workflow.NewTimer(tctx, wait)
		fired := false
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(ch, func(c workflow.ReceiveChannel, _ bool) {
			var items []activities.LateItem
			c.Receive(ctx, &items)
			receive(items)
		})
		sel.AddFuture(timer, func(workflow.Future) { fired = true })
		sel.Select(ctx)
		if !fired {
			cancel()
			continue
		}
		if len(p.Pending) == 0 {
			drain()
			if len(p.Pending) == 0 {
				return nil // idle: the next signal-with-start begins a new run
			}
			continue
		}
		p.Pending = flushCorrections(ctx, &p)
		info := workflow.GetInfo(ctx)
		if info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > p.HistoryLimit {
			drain()
			return workflow.NewContinueAsNewError(ctx, CorrectWorkflow, p)
		}
	}
}

// mergeLate adds items to pending, one entry per (key, window, source
// partition) with the highest source offset (the lake must hold it).
func mergeLate(pending, items []activities.LateItem) []activities.LateItem {
	for _, it := range items {
		i := slices.IndexFunc(pending, func(x activities.LateItem) bool {
			return x.Key == it.Key && x.WindowStart.Equal(it.WindowStart) && x.SourcePartition == it.SourcePartition
		})
		if i < 0 {
			pending = append(pending, it)
		} else if it.SourceOffset > pending[i].SourceOffset {
			pending[i] = it
		}
	}
	return pending
}

// flushCorrections recomputes the pending windows: one child per UTC date,
// in date order, run concurrently. It returns what is still pending (the
// windows of failed children are dropped: the daily reconciliation covers
// them).
func flushCorrections(ctx workflow.Context, p *CorrectParams) []activities.LateItem {
	type group struct {
		date     string
		from, to time.Time
		windows  []activities.WindowRef
		after    []activities.PartitionOffset
	}
	var groups []*group
	for _, it := range p.Pending {
		d := it.WindowStart.UTC().Format(time.DateOnly)
		// The range of window starts, on window boundaries: for tumbling
		// windows the window itself; a hopping window (docs/adr/0041)
		// starts between two boundaries (sizes divide a day, so Truncate
		// aligns to the epoch too).
		size := it.WindowEnd.Sub(it.WindowStart)
		from := it.WindowStart.UTC().Truncate(size)
		to := from.Add(size)
		gi := slices.IndexFunc(groups, func(g *group) bool { return g.date == d })
		if gi < 0 {
			groups = append(groups, &group{date: d, from: from, to: to})
			gi = len(groups) - 1
		}
		g := groups[gi]
		if from.Before(g.from) {
			g.from = from
		}
		if to.After(g.to) {
			g.to = to
		}
		w := activities.WindowRef{Key: it.Key, Start: it.WindowStart.UTC()}
		if !slices.Contains(g.windows, w) {
			g.windows = append(g.windows, w)
		}
		ai := slices.IndexFunc(g.after, func(po activities.PartitionOffset) bool { return po.Partition == it.SourcePartition })
		if ai < 0 {
			g.after = append(g.after, activities.PartitionOffset{Partition: it.SourcePartition, Offset: it.SourceOffset})
		} else if it.SourceOffset > g.after[ai].Offset {
			g.after[ai].Offset = it.SourceOffset
		}
	}
	slices.SortFunc(groups, func(a, b *group) int { return strings.Compare(a.date, b.date) })
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	futs := make([]workflow.ChildWorkflowFuture, len(groups))
	for i, g := range groups {
		slices.SortFunc(g.windows, func(a, b activities.WindowRef) int {
			if c := strings.Compare(a.Key, b.Key); c != 0 {
				return c
			}
			return a.Start.Compare(b.Start)
		})
		slices.SortFunc(g.after, func(a, b activities.PartitionOffset) int { return int(a.Partition - b.Partition) })
		p.Seq++
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:        fmt.Sprintf("%s/%d", id, p.Seq),
			StaticSummary:     fmt.Sprintf("targeted correction of %s: %d windows on %s", p.Stream, len(g.windows), g.date),
			ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON,
		})
		futs[i] = workflow.ExecuteChildWorkflow(cctx, RecomputeWorkflow, RecomputeParams{
			Stream: p.Stream, From: g.from, To: g.to, Windows: g.windows, After: g.after,
			Trigger: activities.TriggerCorrection, HorizonWait: p.HorizonWait, HorizonPoll: p.HorizonPoll,
		})
	}
	for i, f := range futs {
		var res activities.RecomputeResult
		p.Totals.Recomputes++
		if err := f.Get(ctx, &res); err != nil {
			p.Totals.Failed++
			workflow.GetLogger(ctx).Warn("targeted correction failed; the daily reconciliation will cover it", "date", groups[i].date, "error", err)
			continue
		}
		p.Totals.Windows += res.Report.Windows
		p.Totals.Corrected += res.Report.Corrected
	}
	upsert(ctx, SACorrected.ValueSet(p.Totals.Corrected), SAChecked.ValueSet(p.Totals.Windows))
	return nil
}

func describeCorrect(ctx workflow.Context, p CorrectParams) {
	t := p.Totals
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s** %d windows pending · %d too-late events seen · %d recomputes (%d failed) · %d windows checked, %d corrected",
		p.Stream, len(p.Pending), t.LateEvents, t.Recomputes, t.Failed, t.Windows, t.Corrected))
}

// LateWatchState is a late-topic watcher's state, carried across
// continue-as-new. Cursor -1 starts at the partition's current end.
type LateWatchState struct {
	Topic     string        `json:"topic"`
	Partition int32         `json:"partition"`
	Cursor    int64         `json:"cursor"`
	Wait      time.Duration `json:"wait"`
	Records   int64         `json:"records"`
	Items     int64         `json:"items"`
	Skipped   int64         `json:"skipped"`
	Steps     int64         `json:"steps"`
	// Refreshed counts the refresh records published.
	Refreshed int64 `json:"refreshed"`
}

// LateWatch follows one partition of the late topic (cursor in workflow
// state) and signals each stream's Correct workflow with its too-late
// events (activities.BatchTruth.ReadLate). It runs forever, continuing as new.
func LateWatch(ctx workflow.Context, st LateWatchState) error {
	if st.Wait <= 0 {
		st.Wait = 5 * time.Second
	}
	if err := workflow.SetQueryHandler(ctx, LateWatchQueryProgress, func() (LateWatchState, error) { return st, nil }); err != nil {
		return err
	}
	upsert(ctx, SATopic.ValueSet(st.Topic), SAPartition.ValueSet(int64(st.Partition)))
	var a *activities.BatchTruth
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: st.Wait + 2*time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			NonRetryableErrorTypes: []string{activities.ErrTypeConfig, activities.ErrTypeCursor, activities.ErrTypePartition},
		},
	})
	// Refresh records (docs/adr/0040-feature-lookups.md): published once
	// the lake holds the step's too-late events, for the stream workers to
	// fold them into their rolling features. A run started before this
	// step existed keeps its history (GetVersion).
	refresh := workflow.GetVersion(ctx, "late-refresh", workflow.DefaultVersion, 1) == 1
	rctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 15 * time.Minute, HeartbeatTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 5,
			NonRetryableErrorTypes: []string{activities.ErrTypeConfig},
		},
	})
	for {
		var res activities.ReadLateResult
		from := st.Cursor
		if err := workflow.ExecuteActivity(actx, a.ReadLate, activities.ReadLateInput{
			Topic: st.Topic, Partition: st.Partition, From: st.Cursor, Wait: st.Wait,
		}).Get(ctx, &res); err != nil {
			return err
		}
		if refresh && res.Records > 0 && from >= 0 {
			var rr activities.PublishRefreshResult
			if err := workflow.ExecuteActivity(rctx, a.PublishRefresh, activities.PublishRefreshInput{
				Topic: st.Topic, Partition: st.Partition, From: from, To: res.Next,
			}).Get(ctx, &rr); err != nil {
				// The targeted correction and the daily reconciliation
				// still correct the batch figures; only the live state
				// misses these events.
				workflow.GetLogger(ctx).Warn("refresh records not published; the live rolling features miss these "+
					"too-late events", "from", from, "to", res.Next, "error", err)
			}
			st.Refreshed += rr.Published
		}
		st.Cursor = res.Next
		st.Records += res.Records
		st.Items += res.Items
		st.Skipped += res.Skipped
		st.Steps++
		if res.Records > 0 {
			workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s/%d** cursor %d · %d late events → %d windows signalled (%d unusable)",
				st.Topic, st.Partition, st.Cursor, st.Records, st.Items, st.Skipped))
		}
		info := workflow.GetInfo(ctx)
		if info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > 2000 {
			return workflow.NewContinueAsNewError(ctx, LateWatchWorkflow, st)
		}
	}
}
