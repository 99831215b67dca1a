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
)

// Memo keys of a run the sweeper started.
const (
	// MemoRedriveOf is the run id whose parts the run was started with.
	MemoRedriveOf = "reckon.redrive_of"
	// MemoRedrives counts the re-drives in a row of one key: a run started
	// by a re-drive of a run that was itself started by one counts 2. The
	// memo goes over to the runs a run continues as.
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

// Sweep re-drives what every Z-report entity run that ended without
// finalizing (terminated, failed, timed out) since the last sweep held: the
// state it continued from and the parts signalled to it, both in its
// Temporal history (redrive says where they go). The parts keep their
// event ids and origins, so an entity that already holds one counts it as
// a redelivery or a duplicate and never applies it twice. Run calls it
// every Options.RedriveInterval; it is safe to call directly (tests do).
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
	next := began.Add(-redriveOverlap) // the next sweep's since
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
			n, out, err := b.redrive(ctx, id, run)
			if err != nil {
				if ctx.Err() != nil {
					return res, ctx.Err()
				}
				// Left for the next sweep, which must still list it.
				b.o.Log.Warn("zreport bridge: re-drive failed; trying again next sweep",
					"workflow_id", id, "run_id", run, "error", err)
				if at := e.GetCloseTime().AsTime(); at.Before(next) {
					next = at
				}
				continue
			}
			b.sw.done[run] = e.GetCloseTime().AsTime()
			res.Parts += n
			switch out {
			case gaveUp:
				res.GivenUp++
			case redriven:
				res.Redriven++
			}
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			break
		}
	}
	b.sw.since = next
	for run, at := range b.sw.done {
		if at.Before(b.sw.since.Add(-redriveOverlap)) {
			delete(b.sw.done, run)
		}
	}
	b.redriven.Add(int64(res.Redriven))
	return res, nil
}

// errUnreadableRun: a failed run's history cannot say what it held; asking
// again cannot help.
var errUnreadableRun = errors.New("unreadable history")

// failedRun is what a run's history says: its start input and the parts
// signalled to it, in order.
type failedRun struct {
	input workflows.ZReportInput
	parts []zreport.Part
}

// readRun reads one run's history: its start input (with the state carried
// from the run it continued, if any) and the parts signalled to it.
func (b *Bridge) readRun(ctx context.Context, id, run string) (failedRun, error) {
	var fr failedRun
	dc := converter.GetDefaultDataConverter()
	it := b.tc.GetWorkflowHistory(ctx, id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	started := false
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return fr, err
		}
		if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			if err := dc.FromPayloads(a.GetInput(), &fr.input); err != nil {
				return fr, fmt.Errorf("%w: start input: %v", errUnreadableRun, err)
			}
			started = true
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
			fr.parts = append(fr.parts, p)
		case workflows.ZReportSignalParts:
			var ps []zreport.Part
			if err := dc.FromPayloads(a.GetInput(), &ps); err != nil {
				b.o.Log.Warn("zreport bridge: re-drive skips an unreadable parts signal",
					"workflow_id", id, "run_id", run, "error", err)
				continue
			}
			fr.parts = append(fr.parts, ps...)
		}
	}
	if !started {
		return fr, fmt.Errorf("%w: no start event", errUnreadableRun)
	}
	return fr, nil
}

// heldParts rebuilds, from a carried state, the part each present source
// holds now: what a run that cannot take the state itself must be sent.
func heldParts(st *zreport.State) []zreport.Part {
	if st == nil {
		return nil
	}
	var ps []zreport.Part
	for _, src := range st.Sources {
		if src.Present {
			ps = append(ps, zreport.Part{
				EventID: src.EventID, Source: src.Source, Key: st.Key, Figures: src.Figures,
				ShiftClosedAt: src.ShiftClosedAt, Origin: src.Origin,
			})
		}
	}
	return ps
}

// memoOf decodes memo field key into v; false when absent.
func memoOf(m *commonpb.Memo, key string, v any) (bool, error) {
	p := m.GetFields()[key]
	if p == nil {
		return false, nil
	}
	return true, converter.GetDefaultDataConverter().FromPayload(p, v)
}

// redriveOutcome is what redrive did with a run.
type redriveOutcome int

const (
	skipped  redriveOutcome = iota // nothing to re-drive, or done before
	redriven                       // sent again
	gaveUp                         // MaxRedrives reached, or Temporal rejects the parts
)

// redrive sends what the failed run (id, run) held again; it returns how
// many parts it sent and what it did.
//
// When the failed run is still the key's latest, a new run is started with
// the failed run's input — the state it continued from, or none, so it
// restores from the lake as the failed run did — and its signalled parts:
// the failed run again, from its start. When a later run exists, it was
// started by a re-drive of this run (its memo says so: nothing to do) or
// by the bridge for a newer part; that run gets the parts the carried
// state held and the failed run's own.
func (b *Bridge) redrive(ctx context.Context, id, run string) (int, redriveOutcome, error) {
	fr, err := b.readRun(ctx, id, run)
	if errors.Is(err, errUnreadableRun) {
		b.o.Log.Error("zreport bridge: entity run ended without finalizing, its history unreadable; not re-driven",
			"workflow_id", id, "run_id", run, "error", err)
		return 0, gaveUp, nil
	}
	if err != nil {
		return 0, skipped, err
	}
	failed, err := b.tc.DescribeWorkflowExecution(ctx, id, run)
	if err != nil {
		return 0, skipped, err
	}
	cur, err := b.tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return 0, skipped, err
	}
	in, parts := fr.input, fr.parts
	redrives := 0
	if _, err := memoOf(failed.GetWorkflowExecutionInfo().GetMemo(), MemoRedrives, &redrives); err != nil {
		return 0, skipped, err
	}
	if cur.GetWorkflowExecutionInfo().GetExecution().GetRunId() != run {
		var of string
		if ok, err := memoOf(cur.GetWorkflowExecutionInfo().GetMemo(), MemoRedriveOf, &of); err != nil {
			return 0, skipped, err
		} else if ok && of == run {
			return 0, skipped, nil
		}
		parts = append(heldParts(in.State), parts...)
		in.State = nil
		redrives = 0 // a newer part started the later run: not a re-drive loop
	} else if redrives >= b.o.MaxRedrives {
		b.o.Log.Error("zreport bridge: entity run ended without finalizing again; not re-driven any more",
			"workflow_id", id, "run_id", run, "redrives", redrives, "parts", len(parts))
		return 0, gaveUp, nil
	}
	if len(parts) == 0 && in.State == nil {
		return 0, skipped, nil // it held nothing
	}
	if in.Key == (zreport.Key{}) {
		in.Key = parts[0].Key
	}
	if in.ClosedHint.IsZero() && len(parts) > 0 {
		in.ClosedHint = parts[0].ShiftClosedAt
	}
	b.o.Log.Warn("zreport bridge: entity run ended without finalizing; re-driving what it held",
		"workflow_id", id, "run_id", run, "parts", len(parts), "carried_state", in.State != nil,
		"redrives", redrives+1)
	closed := in.ClosedHint
	if in.State != nil && !in.State.ShiftClosedAt.IsZero() {
		closed = in.State.ShiftClosedAt
	}
	opts := b.startOptions(in.Key, closed)
	opts.Memo = map[string]any{MemoRedriveOf: run, MemoRedrives: redrives + 1}
	// At least one signal, empty when only the carried state held parts:
	// signal-with-start needs one to start the run.
	for i := 0; i == 0 || i < len(parts); i += b.o.MaxBatchParts {
		batch := parts[i:min(i+b.o.MaxBatchParts, len(parts))]
		if err := b.signalParts(ctx, opts, in, batch); err != nil {
			var inv *serviceerror.InvalidArgument
			if errors.As(err, &inv) {
				b.o.Log.Error("zreport bridge: Temporal rejects the re-driven parts; giving up on this run",
					"workflow_id", id, "run_id", run, "error", err)
				return i, gaveUp, nil
			}
			return i, skipped, err
		}
	}
	return len(parts), redriven, nil
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
