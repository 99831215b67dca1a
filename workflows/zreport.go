package workflows

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"reckon/activities"
	"reckon/internal/numfmt"
	"reckon/zreport"
)

// localRetryForever bounds the retries of the entity's local activities
// (loading from and publishing to the lake and Kafka): no outage lasts
// this long.
const localRetryForever = 10 * 365 * 24 * time.Hour

// Z-report entity workflow names (see docs/adr/0005-zreport-entity-workflows.md).
const (
	// ZReportWorkflow is the registered workflow type.
	ZReportWorkflow = "ZReport"
	// ZReportSignalPart carries one zreport.Part (the bridge's signal
	// before parts were coalesced; still handled for running entities and
	// hand-sent parts).
	ZReportSignalPart = "zreport.part"
	// ZReportSignalParts carries a []zreport.Part: the parts of one key
	// the bridge found together, in partition order, applied one by one
	// as if each had come as ZReportSignalPart
	// (docs/adr/0021-zreport-coalescing.md).
	ZReportSignalParts = "zreport.parts"
	// ZReportQueryState returns a zreport.View.
	ZReportQueryState = "state"
)

// ZReportOFDOptions tune the request to the fiscal data operator. Zero
// fields mean defaults.
type ZReportOFDOptions struct {
	// Timeout of one HTTP attempt (the activity's StartToClose). Default 10s.
	Timeout time.Duration `json:"timeout"`
	// Attempts on retryable failures (5xx, 408, 429, network). Default 5.
	Attempts int `json:"attempts"`
	// Backoff is the first retry interval, doubling, capped at 1m. Default 1s.
	Backoff time.Duration `json:"backoff"`
}

// ZReportInput starts, or continues as new, the entity of one business key.
// The bridge fills it from the first part and the configuration; the
// configuration is thereby fixed for the entity's life.
type ZReportInput struct {
	Key    zreport.Key       `json:"key"`
	Policy zreport.Policy    `json:"policy"`
	OFD    ZReportOFDOptions `json:"ofd"`
	// HistoryLimit: continue as new past this many history events (or when
	// the server suggests it). Default 5000.
	HistoryLimit int `json:"history_limit"`
	// ClosedHint is the first part's shift_closed_at: where in the lake an
	// earlier run's versions are looked up.
	ClosedHint time.Time `json:"closed_hint"`
	// State is carried across continue-as-new; nil on a fresh start, which
	// restores the latest published version from the lake if there is one.
	State *zreport.State `json:"state,omitempty"`
}

func (in ZReportInput) withDefaults() ZReportInput {
	in.Policy = in.Policy.WithDefaults()
	if in.OFD.Timeout <= 0 {
		in.OFD.Timeout = 10 * time.Second
	}
	if in.OFD.Attempts <= 0 {
		in.OFD.Attempts = 5
	}
	if in.OFD.Backoff <= 0 {
		in.OFD.Backoff = time.Second
	}
	if in.HistoryLimit <= 0 {
		in.HistoryLimit = 5000
	}
	return in
}

// ZReport is the entity workflow of one business key, ID
// zreport/<fiscal_drive>/<shift>: it collects parts (signals
// ZReportSignalParts and ZReportSignalPart) in any order, lets the pure
// zreport.State decide, and carries out its decisions — publishing
// changelogs and final versions (local activity PublishZReport), asking
// the operator for a missing OFD document at the deadline (activity
// RequestOFD) — until the entity is final and past its retention and
// linger. Timers are absolute, computed from the data, so they survive
// restarts, deploys and continue-as-new. It returns the final state.
//
// It has samples-go's entity shape: newEntity sets up the handlers and the
// state, run is the loop, shouldContinueAsNew decides when the history
// starts over.
func ZReport(ctx workflow.Context, in ZReportInput) (*zreport.State, error) {
	e, err := newEntity(ctx, in)
	if err != nil {
		return nil, err
	}
	return e.run()
}

// newEntity validates in, registers the state query and restores the
// entity: from in.State after continue-as-new, else from the latest
// version published to the lake, else new.
func newEntity(ctx workflow.Context, in ZReportInput) (*entity, error) {
	in = in.withDefaults()
	if err := in.Key.Validate(); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrTypeZReportInput, err)
	}
	e := &entity{ctx: ctx, in: in, st: in.State, log: workflow.GetLogger(ctx)}
	if err := workflow.SetQueryHandler(ctx, ZReportQueryState, func() (zreport.View, error) {
		if e.st == nil {
			return zreport.New(in.Key, in.Policy).View(), nil
		}
		return e.st.View(), nil
	}); err != nil {
		return nil, err
	}
	e.local = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		// Kafka or the lake being down stalls the entity, never loses a
		// publication: retry until it works. The SDK caps the retries at
		// StartToCloseTimeout when ScheduleToCloseTimeout is unset; a
		// failed run waits for the bridge's re-drive sweep to get its
		// parts back (docs/adr/0037-zreport-parts-recoverable.md), so the
		// retries are not capped for any real outage.
		ScheduleToCloseTimeout: localRetryForever,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
		},
	})
	if e.st == nil {
		st, err := e.restore()
		if err != nil {
			return nil, err
		}
		e.st = st
	}
	e.ofdCtx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: in.OFD.Timeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: in.OFD.Backoff, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			MaximumAttempts:        int32(in.OFD.Attempts),
			NonRetryableErrorTypes: []string{activities.ErrTypeOFDClient, activities.ErrTypeOFDBadDocument},
		},
	})
	e.sig = workflow.GetSignalChannel(ctx, ZReportSignalPart)
	e.batch = workflow.GetSignalChannel(ctx, ZReportSignalParts)
	return e, nil
}

// restore loads the latest version the lake holds of the entity's key
// (an earlier run's), or returns a new State.
func (e *entity) restore() (*zreport.State, error) {
	var a *activities.ZReport
	var prev *zreport.Aggregate
	load := workflow.ExecuteLocalActivity(e.local, a.LoadZReport, e.in.Key, e.in.ClosedHint)
	if err := load.Get(e.ctx, &prev); err != nil {
		return nil, err
	}
	if prev == nil {
		return zreport.New(e.in.Key, e.in.Policy), nil
	}
	st, err := zreport.Restore(prev, e.in.Policy)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrTypeZReportInput, err)
	}
	e.log.Info("restored from the lake", "version", st.Version, "status", st.Status())
	return st, nil
}

// run is the entity's loop: take the parts received, fire the deadlines
// due, publish, ask the operator when a deadline says so, then close,
// continue as new, or wait for the next signal, deadline or answer.
func (e *entity) run() (*zreport.State, error) {
	var a *activities.ZReport
	for {
		e.receiveAsync()
		now := workflow.Now(e.ctx)
		requestOFD := e.fireDue(now)
		if err := e.publish(e.local, a); err != nil {
			return nil, err
		}
		if requestOFD {
			e.log.Info("requesting the OFD document from the operator", "requests", e.st.OFD.Requests)
			e.ofd = workflow.ExecuteActivity(e.ofdCtx, a.RequestOFD, e.in.Key)
		}
		e.describe()
		if e.ofd == nil && e.closing(now) {
			e.log.Info("entity closing", "status", e.st.Status(), "version", e.st.Version)
			return e.st, nil
		}
		if e.shouldContinueAsNew() {
			if e.pendingSignals() == 0 {
				next := e.in
				next.State = e.st
				return nil, workflow.NewContinueAsNewError(e.ctx, ZReportWorkflow, next)
			}
			e.wantCAN = true // drain the signals first
			continue
		}
		e.await(now)
	}
}

// receiveAsync applies the parts already received. Single parts first: a
// bridge that coalesces sends only batches, so single parts received in
// the same task come from a bridge of the version before
// (docs/adr/0021-zreport-coalescing.md).
func (e *entity) receiveAsync() {
	for {
		var p zreport.Part
		if !e.sig.ReceiveAsync(&p) {
			break
		}
		e.part(p)
	}
	for {
		var ps []zreport.Part
		if !e.batch.ReceiveAsync(&ps) {
			break
		}
		e.parts(ps)
	}
}

// fireDue fires the deadlines due at now and reports whether one asks
// for the OFD document. While the operator is being asked, no other
// deadline fires: its answer comes first, as in `reckon zreport
// simulate`, so a request due together with the retention can still
// complete the key.
func (e *entity) fireDue(now time.Time) (requestOFD bool) {
	for e.ofd == nil && !requestOFD {
		t, ok := e.st.NextTimer()
		if !ok || t.Kind == zreport.TimerClose || t.At.After(now) {
			break
		}
		out := e.st.Fire(t.Kind, now)
		e.outcome(out)
		requestOFD = out.RequestOFD
		if out == (zreport.Outcome{}) {
			break // cannot happen: a due timer always acts; never spin
		}
	}
	return requestOFD
}

// closing reports whether the entity's close deadline has passed with
// no signal waiting.
func (e *entity) closing(now time.Time) bool {
	t, ok := e.st.NextTimer()
	return ok && t.Kind == zreport.TimerClose && !t.At.After(now) && e.pendingSignals() == 0
}

// shouldContinueAsNew reports whether the run should start over with its
// state: Temporal suggests it, the history reached in.HistoryLimit, or an
// earlier round wanted to. Never while the operator is being asked: then
// it is wanted once the request completes.
func (e *entity) shouldContinueAsNew() bool {
	info := workflow.GetInfo(e.ctx)
	limit := info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= e.in.HistoryLimit
	if e.ofd != nil {
		if limit {
			e.wantCAN = true // after the request completes
		}
		return false
	}
	return e.wantCAN || limit
}

func (e *entity) pendingSignals() int { return e.sig.Len() + e.batch.Len() }

// await waits for the next part, batch, deadline or operator answer and
// applies it. A request in flight, or a close deadline already passed,
// means only the operator's answer or signals are awaited: no timer, or
// the loop would spin.
func (e *entity) await(now time.Time) {
	sel := workflow.NewSelector(e.ctx)
	sel.AddReceive(e.sig, func(c workflow.ReceiveChannel, _ bool) {
		var p zreport.Part
		c.Receive(e.ctx, &p)
		e.part(p)
	})
	sel.AddReceive(e.batch, func(c workflow.ReceiveChannel, _ bool) {
		var ps []zreport.Part
		c.Receive(e.ctx, &ps)
		e.parts(ps)
	})
	if t, ok := e.st.NextTimer(); ok && e.ofd == nil && (t.Kind != zreport.TimerClose || t.At.After(now)) {
		if e.timer == nil || !t.At.Equal(e.timerAt) {
			if e.cancelTimer != nil {
				e.cancelTimer()
			}
			tctx, cancel := workflow.WithCancel(e.ctx)
			e.timer, e.timerAt, e.cancelTimer = workflow.NewTimer(tctx, max(t.At.Sub(now), 0)), t.At, cancel
		}
		sel.AddFuture(e.timer, func(workflow.Future) { e.timer, e.cancelTimer = nil, nil })
	}
	if e.ofd != nil {
		sel.AddFuture(e.ofd, func(f workflow.Future) {
			e.ofd = nil
			e.ofdAnswered(f)
		})
	}
	sel.Select(e.ctx)
}

// ofdAnswered applies the operator's answer (or the request's failure).
func (e *entity) ofdAnswered(f workflow.Future) {
	var ans activities.OFDAnswer
	err := f.Get(e.ctx, &ans)
	now := workflow.Now(e.ctx)
	switch {
	case err != nil:
		e.log.Warn("OFD request failed; asking again after ofd_retry", "error", err)
		e.st.OFDFailed(ofdFailure(err), now)
	case ans.Found:
		out, err := e.st.OFDAnswer(ans.Document, now)
		if err != nil {
			e.log.Warn("OFD document rejected", "error", err)
		}
		e.outcome(out)
	default:
		_, _ = e.st.OFDAnswer(nil, now)
	}
}

// ofdFailure names a failed request briefly: the cause's message.
func ofdFailure(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Error()
	}
	return err.Error()
}

// entity carries out a State's decisions: the ZReport workflow's state
// between the steps of its run.
type entity struct {
	ctx     workflow.Context
	local   workflow.Context // the local activities' options
	ofdCtx  workflow.Context // RequestOFD's options
	log     log.Logger
	st      *zreport.State
	in      ZReportInput
	pending []activities.ZReportPublication
	details string

	sig, batch workflow.ReceiveChannel // ZReportSignalPart, ZReportSignalParts

	ofd         workflow.Future // the operator request in flight
	timer       workflow.Future // the pending deadline's timer
	timerAt     time.Time
	cancelTimer workflow.CancelFunc
	wantCAN     bool // continue as new once the signals or the request are done
}

func (e *entity) part(p zreport.Part) {
	out, err := e.st.Apply(p, workflow.Now(e.ctx))
	if err != nil {
		// The bridge validates parts; this is a part for another key or a
		// malformed signal sent by hand. Never fail the entity for it.
		workflow.GetLogger(e.ctx).Warn("part rejected", "error", err, "event_id", p.EventID)
		return
	}
	e.outcome(out)
}

// parts applies a batch in order, each part as if it had come alone: a
// duplicate inside the batch counts as a duplicate, and every applied part
// yields its own changelog entry or version.
func (e *entity) parts(ps []zreport.Part) {
	for _, p := range ps {
		e.part(p)
	}
}

func (e *entity) outcome(out zreport.Outcome) {
	if out.Changelog != nil {
		e.pending = append(e.pending, activities.ZReportPublication{Changelog: out.Changelog})
	}
	if out.Final != nil {
		e.pending = append(e.pending, activities.ZReportPublication{Final: out.Final})
	}
}

// publish hands every pending publication, in order, to one local activity
// call, then brings search attributes up to date.
func (e *entity) publish(ctx workflow.Context, a *activities.ZReport) error {
	if len(e.pending) == 0 {
		return nil
	}
	var res activities.ZReportPublished
	if err := workflow.ExecuteLocalActivity(ctx, a.PublishZReport, e.pending).Get(ctx, &res); err != nil {
		return err
	}
	e.pending = nil
	return e.upsertSearchAttributes()
}

// upsertSearchAttributes sets fiscal drive, shift, close date and status,
// writing only what changed (each upsert is a history event).
func (e *entity) upsertSearchAttributes() error {
	sa := workflow.GetTypedSearchAttributes(e.ctx)
	var ups []temporal.SearchAttributeUpdate
	if v, _ := sa.GetKeyword(SAFiscalDrive); v != e.st.Key.FiscalDrive {
		ups = append(ups, SAFiscalDrive.ValueSet(e.st.Key.FiscalDrive))
	}
	shift := strconv.FormatInt(e.st.Key.Shift, 10)
	if v, _ := sa.GetKeyword(SAShift); v != shift {
		ups = append(ups, SAShift.ValueSet(shift))
	}
	if !e.st.ShiftClosedAt.IsZero() {
		d := e.st.ShiftClosedAt.UTC().Format(time.DateOnly)
		if v, _ := sa.GetKeyword(SADate); v != d {
			ups = append(ups, SADate.ValueSet(d))
		}
	}
	if v, _ := sa.GetKeyword(SAStatus); v != string(e.st.Status()) {
		ups = append(ups, SAStatus.ValueSet(string(e.st.Status())))
	}
	if len(ups) == 0 {
		return nil
	}
	return workflow.UpsertTypedSearchAttributes(e.ctx, ups...)
}

// describe sets the workflow's current details shown in the Temporal UI.
func (e *entity) describe() {
	st := e.st
	var b strings.Builder
	// A blank line before the list: the UI's markdown does not let a list
	// interrupt a paragraph.
	fmt.Fprintf(&b, "**%s**\n", st.Summary())
	for i := range st.Sources {
		s := &st.Sources[i]
		if s.Present {
			fmt.Fprintf(&b, "\n- %s: %s receipts, total %s (duplicates %d, corrections %d)", s.Source,
				numfmt.Int(s.Receipts), numfmt.Fixed(s.Total, 2), s.Duplicates, s.Corrections)
		} else {
			fmt.Fprintf(&b, "\n- %s: **missing**", s.Source)
		}
	}
	d := st.Deadlines()
	if !d.OFDRequestAt.IsZero() {
		fmt.Fprintf(&b, "\n- OFD request at %s", d.OFDRequestAt.Format(time.RFC3339))
	}
	if st.OFD.Requests > 0 {
		fmt.Fprintf(&b, "\n- OFD requests %d, last: %s", st.OFD.Requests, st.OFD.LastResult)
	}
	if !d.RetentionAt.IsZero() {
		fmt.Fprintf(&b, "\n- retention until %s", d.RetentionAt.Format(time.RFC3339))
	}
	if st.Final != nil && len(st.Final.Differences) > 0 {
		b.WriteString("\n\n| differs | source | value | reference | value | delta |\n|---|---|---|---|---|---|")
		for _, d := range st.Final.Differences {
			fmt.Fprintf(&b, "\n| %s | %s | %s | %s | %s | %s |", d.Field, d.Source, numfmt.Float(d.Value), d.Reference,
				numfmt.Float(d.Expected), numfmt.Float(d.Delta))
		}
	}
	// Last, where the UI's frame may clip a few pixels: where to see more.
	fmt.Fprintf(&b, "\n\n`reckon zreport show %s %d` prints it with the event ids", st.Key.FiscalDrive, st.Key.Shift)
	if s := b.String(); s != e.details {
		e.details = s
		workflow.SetCurrentDetails(e.ctx, s)
	}
}
