package bridge

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"reckon/workflows"
	"reckon/zreport"
)

// Re-drive defaults (docs/adr/0037-zreport-parts-recoverable.md).
const (
	// DefaultRedriveLookback is Options.RedriveLookback's default: how far
	// back the first sweep of a bridge looks for entity runs that ended
	// without finalizing. Temporal keeps closed runs for the namespace
	// retention; a lookback longer than that finds nothing more.
	DefaultRedriveLookback = 7 * 24 * time.Hour
	// DefaultMaxRedrives is Options.MaxRedrives's default.
	DefaultMaxRedrives = 3
	// redriveOverlap: each sweep looks this far before the previous one
	// began, as visibility records closed runs a little late.
	redriveOverlap = time.Minute
	// maxChain bounds the runs of one workflow id walked back through
	// continue-as-new.
	maxChain = 10000
)

// Memo keys of a run the sweeper started.
const (
	// MemoRedriveOf is the run id whose parts the run was started with.
	MemoRedriveOf = "reckon.redrive_of"
	// MemoRedrives counts the re-drives in a row of one key: a run started
	// by a re-drive of a run that was itself started by one counts 2.
	MemoRedrives = "reckon.redrives"
)

// failedRunsQuery selects the entity runs that ended without finalizing:
// terminated, failed or timed out. A cancelled run is an operator's
// deliberate stop and is left alone.
const failedRunsQuery = "WorkflowType = '%s' AND ExecutionStatus IN ('Terminated', 'Failed', 'TimedOut') " +
	"AND CloseTime >= '%s'"

// SweepResult says what one sweep did: runs found, runs re-driven, parts
// sent again, runs given up (MaxRedrives reached or parts Temporal
// rejects).
type SweepResult struct {
	Found, Redriven, Parts, GivenUp int
}

// sweeper is the re-drive state of a bridge.
type sweeper struct {
	since time.Time            // closed runs from here on are looked at
	done  map[string]time.Time // run id → close time: runs handled by this bridge
}

// Sweep re-drives the parts of every Z-report entity run that ended
// without finalizing (terminated, failed, timed out) since the last sweep:
// it reads the parts the run and the runs it continued from had received
// (their signals, in Temporal history) and signals them again, to a new
// run when the failed one is still the key's latest — with the failed
// chain's first input and a memo naming the failed run — or to the run
// the bridge has started since for a newer part. The parts keep their
// event ids and origins, so an entity that already holds one counts it as
// a redelivery or a duplicate, never applies it twice. Run calls it every
// Options.RedriveInterval; it is safe to call directly (tests do).
func (b *Bridge) Sweep(ctx context.Context) (SweepResult, error) {
	b.sweepMu.Lock()
	defer b.sweepMu.Unlock()
	var res SweepResult
	began := b.o.Now().UTC()
	if b.sw.since.IsZero() {
		b.sw.since = began.Add(-b.o.RedriveLookback)
		b.sw.done = map[string]time.Time{}
	}
	q := fmt.Sprintf(failedRunsQuery, workflows.ZReportWorkflow, b.sw.since.Format(time.RFC3339Nano))
	var token []byte
	for {
		resp, err := b.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			PageSize: 100, NextPageToken: token, Query: q,
		})
		if err != nil {
			return res, fmt.Errorf("zreport bridge: list failed entity runs: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			id, run := e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId()
			if _, ok := b.sw.done[run]; ok {
				continue
			}
			res.Found++
			n, gaveUp, err := b.redrive(ctx, id, run)
			if err != nil {
				if ctx.Err() != nil {
					return res, ctx.Err()
				}
				// Left for the next sweep.
				b.o.Log.Warn("zreport bridge: re-drive failed; trying again next sweep",
					"workflow_id", id, "run_id", run, "error", err)
				continue
			}
			b.sw.done[run] = e.GetCloseTime().AsTime()
			res.Parts += n
			switch {
			case gaveUp:
				res.GivenUp++
			case n > 0:
				res.Redriven++
			}
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			break
		}
	}
	b.sw.since = began.Add(-redriveOverlap)
	for run, at := range b.sw.done {
		if at.Before(b.sw.since.Add(-redriveOverlap)) {
			delete(b.sw.done, run)
		}
	}
	b.redriven.Add(int64(res.Redriven))
	return res, nil
}

// chainRun is one run of a workflow id's continue-as-new chain.
type chainRun struct {
	input *commonpb.Payloads // the start input
	prev  string             // the run it continued from; "" for the first
	parts []zreport.Part     // the parts signalled to it, in order
}

// readRun reads one run's history: its start input, predecessor and, when
// withParts, the parts signalled to it.
func (b *Bridge) readRun(ctx context.Context, id, run string, withParts bool) (chainRun, error) {
	var cr chainRun
	dc := converter.GetDefaultDataConverter()
	it := b.tc.GetWorkflowHistory(ctx, id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return cr, err
		}
		if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			cr.input, cr.prev = a.GetInput(), a.GetContinuedExecutionRunId()
			if !withParts {
				return cr, nil
			}
			continue
		}
		a := ev.GetWorkflowExecutionSignaledEventAttributes()
		if a == nil {
			continue
		}
		switch a.GetSignalName() {
		case workflows.ZReportSignalPart:
			var p zreport.Part
			if err := dc.FromPayloads(a.GetInput(), &p); err != nil {
				b.o.Log.Warn("zreport bridge: re-drive skips an unreadable part signal",
					"workflow_id", id, "run_id", run, "error", err)
				continue
			}
			cr.parts = append(cr.parts, p)
		case workflows.ZReportSignalParts:
			var ps []zreport.Part
			if err := dc.FromPayloads(a.GetInput(), &ps); err != nil {
				b.o.Log.Warn("zreport bridge: re-drive skips an unreadable parts signal",
					"workflow_id", id, "run_id", run, "error", err)
				continue
			}
			cr.parts = append(cr.parts, ps...)
		}
	}
	return cr, nil
}

// firstRun walks run's chain back to its first run and returns that run's
// id and start input, and, when withParts, every part of the chain in the
// order received.
func (b *Bridge) firstRun(ctx context.Context, id, run string, withParts bool) (
	string, *commonpb.Payloads, []zreport.Part, error) {
	var chain [][]zreport.Part
	for range maxChain {
		cr, err := b.readRun(ctx, id, run, withParts)
		if err != nil {
			return "", nil, nil, err
		}
		chain = append(chain, cr.parts)
		if cr.prev == "" {
			var parts []zreport.Part
			for i := len(chain) - 1; i >= 0; i-- {
				parts = append(parts, chain[i]...)
			}
			return run, cr.input, parts, nil
		}
		run = cr.prev
	}
	return "", nil, nil, fmt.Errorf("more than %d runs continue one another", maxChain)
}

// memoOf returns run's memo field key decoded into v; false when absent.
func (b *Bridge) memoOf(ctx context.Context, id, run, key string, v any) (bool, error) {
	d, err := b.tc.DescribeWorkflowExecution(ctx, id, run)
	if err != nil {
		return false, err
	}
	p := d.GetWorkflowExecutionInfo().GetMemo().GetFields()[key]
	if p == nil {
		return false, nil
	}
	return true, converter.GetDefaultDataConverter().FromPayload(p, v)
}

// redrive sends the parts of the failed run (id, run) and its chain again;
// it returns how many, and whether it gave up instead.
func (b *Bridge) redrive(ctx context.Context, id, run string) (int, bool, error) {
	first, input, parts, err := b.firstRun(ctx, id, run, true)
	if err != nil {
		return 0, false, err
	}
	if len(parts) == 0 {
		return 0, false, nil
	}
	cur, err := b.tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return 0, false, err
	}
	in := b.o.Start
	if input != nil {
		var fin workflows.ZReportInput
		if err := converter.GetDefaultDataConverter().FromPayloads(input, &fin); err == nil {
			in = fin // the configuration stays fixed for the key's life
		}
	}
	in.Key, in.State = parts[0].Key, nil
	if in.ClosedHint.IsZero() {
		in.ClosedHint = parts[0].ShiftClosedAt
	}
	redrives := 0
	if curRun := cur.GetWorkflowExecutionInfo().GetExecution().GetRunId(); curRun != run {
		// A later run exists: started by a re-drive of this run (done), or
		// by the bridge for a newer part (it lacks this run's parts).
		curFirst, _, _, err := b.firstRun(ctx, id, curRun, false)
		if err != nil {
			return 0, false, err
		}
		var of string
		if ok, err := b.memoOf(ctx, id, curFirst, MemoRedriveOf, &of); err != nil {
			return 0, false, err
		} else if ok && of == run {
			return 0, false, nil
		}
	} else if _, err := b.memoOf(ctx, id, first, MemoRedrives, &redrives); err != nil {
		return 0, false, err
	} else if redrives >= b.o.MaxRedrives {
		b.o.Log.Error("zreport bridge: entity run ended without finalizing again; not re-driven any more",
			"workflow_id", id, "run_id", run, "redrives", redrives, "parts", len(parts))
		return 0, true, nil
	}
	b.o.Log.Warn("zreport bridge: entity run ended without finalizing; re-driving its parts",
		"workflow_id", id, "run_id", run, "parts", len(parts), "redrives", redrives+1)
	opts := b.startOptions(in.Key, in.ClosedHint)
	opts.Memo = map[string]any{MemoRedriveOf: run, MemoRedrives: redrives + 1}
	for i := 0; i < len(parts); i += b.o.MaxBatchParts {
		batch := parts[i:min(i+b.o.MaxBatchParts, len(parts))]
		if err := b.signalParts(ctx, opts, in, batch); err != nil {
			var inv *serviceerror.InvalidArgument
			if errors.As(err, &inv) {
				b.o.Log.Error("zreport bridge: Temporal rejects the re-driven parts; giving up on this run",
					"workflow_id", id, "run_id", run, "error", err)
				return i, true, nil
			}
			return i, false, err
		}
	}
	return len(parts), false, nil
}

// startOptions are the signal-with-start options of key k's entity.
func (b *Bridge) startOptions(k zreport.Key, closed time.Time) client.StartWorkflowOptions {
	date := closed.UTC().Format(time.DateOnly)
	return client.StartWorkflowOptions{
		ID:                       k.WorkflowID(),
		TaskQueue:                b.o.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.SAFiscalDrive.ValueSet(k.FiscalDrive),
			workflows.SAShift.ValueSet(strconv.FormatInt(k.Shift, 10)),
			workflows.SADate.ValueSet(date),
			workflows.SAStatus.ValueSet(string(zreport.StatusWaiting))),
		StaticSummary: fmt.Sprintf("Z-report ФН %s, shift %d (closed %s)", k.FiscalDrive, k.Shift, date),
	}
}

// signalParts signal-with-starts parts, retrying all but InvalidArgument
// (MaxAttempts times) until ctx ends.
func (b *Bridge) signalParts(ctx context.Context, opts client.StartWorkflowOptions, in workflows.ZReportInput,
	parts []zreport.Part) error {
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		_, err := b.tc.SignalWithStartWorkflow(ctx, opts.ID, workflows.ZReportSignalParts, parts, opts,
			workflows.ZReportWorkflow, in)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var inv *serviceerror.InvalidArgument
		if errors.As(err, &inv) && attempt >= b.o.MaxAttempts {
			return err
		}
		b.o.Log.Warn("zreport bridge: re-drive signal-with-start failed; retrying", "workflow_id", opts.ID,
			"attempt", attempt, "error", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// sweepEvery runs Sweep every Options.RedriveInterval until ctx ends.
func (b *Bridge) sweepEvery(ctx context.Context) {
	t := time.NewTicker(b.o.RedriveInterval)
	defer t.Stop()
	for {
		if res, err := b.Sweep(ctx); err != nil && ctx.Err() == nil {
			b.o.Log.Warn("zreport bridge: re-drive sweep failed", "error", err)
		} else if res.Redriven > 0 || res.GivenUp > 0 {
			b.o.Log.Info("zreport bridge: re-drive sweep", "found", res.Found, "redriven", res.Redriven,
				"parts", res.Parts, "given_up", res.GivenUp)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
