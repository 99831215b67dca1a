package workflows

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

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
// ZReportSignalParts and ZReportSignalPart) in any order, lets the pure zreport.State decide, and
// carries out its decisions — publishing changelogs and final versions
// (local activity PublishZReport), asking the operator for a missing OFD
// document at the deadline (activity RequestOFD) — until the entity is
// final and past its retention and linger. Timers are absolute, computed
// from the data, so they survive restarts, deploys and continue-as-new. It
// returns the final state.
func ZReport(ctx workflow.Context, in ZReportInput) (*zreport.State, error) {
	in = in.withDefaults()
	if err := in.Key.Validate(); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrTypeZReportInput, err)
	}
	var a *activities.ZReport
	log := workflow.GetLogger(ctx)
	st := in.State
	if err := workflow.SetQueryHandler(ctx, ZReportQueryState, func() (zreport.View, error) {
		if st == nil {
			return zreport.New(in.Key, in.Policy).View(), nil
		}
		return st.View(), nil
	}); err != nil {
		return nil, err
	}
	local := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		// Kafka or the lake being down stalls the entity, never loses a
		// publication: retry until it works. The SDK caps the retries at
		// StartToCloseTimeout when ScheduleToCloseTimeout is unset; a
		// failed run waits for the bridge's re-drive sweep to get its
		// parts back (docs/adr/0037-zreport-parts-recoverable.md), so the
		// retries are not capped for any real outage.
		ScheduleToCloseTimeout: localRetryForever,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute},
	})
	if st == nil {
		var prev *zreport.Aggregate
		if err := workflow.ExecuteLocalActivity(local, a.LoadZReport, in.Key, in.ClosedHint).Get(ctx, &prev); err != nil {
			return nil, err
		}
		st = zreport.New(in.Key, in.Policy)
		if prev != nil {
			restored, err := zreport.Restore(prev, in.Policy)
			if err != nil {
				return nil, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrTypeZReportInput, err)
			}
			st = restored
			log.Info("restored from the lake", "version", st.Version, "status", st.Status())
		}
	}
	ofdCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: in.OFD.Timeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: in.OFD.Backoff, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			MaximumAttempts:        int32(in.OFD.Attempts),
			NonRetryableErrorTypes: []string{activities.ErrTypeOFDClient, activities.ErrTypeOFDBadDocument},
		},
	})

	e := &entity{ctx: ctx, st: st, in: in}
	sig := workflow.GetSignalChannel(ctx, ZReportSignalPart)
	batch := workflow.GetSignalChannel(ctx, ZReportSignalParts)
	pendingSignals := func() int { return sig.Len() + batch.Len() }
	var (
		ofd         workflow.Future // the operator request in flight
		timer       workflow.Future // the pending deadline's timer
		timerAt     time.Time
		cancelTimer workflow.CancelFunc
		wantCAN     bool
	)
	for {
		// Single parts first: a bridge that coalesces sends only batches,
		// so single parts received in the same task come from a bridge of
		// the version before (docs/adr/0021-zreport-coalescing.md).
		for {
			var p zreport.Part
			if !sig.ReceiveAsync(&p) {
				break
			}
			e.part(p)
		}
		for {
			var ps []zreport.Part
			if !batch.ReceiveAsync(&ps) {
				break
			}
			e.parts(ps)
		}
		now := workflow.Now(ctx)
		requestOFD := false
		// While the operator is being asked, no other deadline fires: its
		// answer comes first, as in `reckon zreport simulate`, so a request
		// due together with the retention can still complete the key.
		for ofd == nil && !requestOFD {
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
		if err := e.publish(local, a); err != nil {
			return nil, err
		}
		if requestOFD {
			log.Info("requesting the OFD document from the operator", "requests", e.st.OFD.Requests)
			ofd = workflow.ExecuteActivity(ofdCtx, a.RequestOFD, in.Key)
		}
		e.describe()

		if ofd == nil {
			info := workflow.GetInfo(ctx)
			if t, ok := e.st.NextTimer(); ok && t.Kind == zreport.TimerClose && !t.At.After(now) && pendingSignals() == 0 {
				log.Info("entity closing", "status", e.st.Status(), "version", e.st.Version)
				return e.st, nil
			}
			if wantCAN || info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= in.HistoryLimit {
				if pendingSignals() == 0 {
					next := in
					next.State = e.st
					return nil, workflow.NewContinueAsNewError(ctx, ZReportWorkflow, next)
				}
				wantCAN = true // drain the signals first
				continue
			}
		} else if info := workflow.GetInfo(ctx); info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= in.HistoryLimit {
			wantCAN = true // after the request completes
		}

		sel := workflow.NewSelector(ctx)
		sel.AddReceive(sig, func(c workflow.ReceiveChannel, _ bool) {
			var p zreport.Part
			c.Receive(ctx, &p)
			e.part(p)
		})
		sel.AddReceive(batch, func(c workflow.ReceiveChannel, _ bool) {
			var ps []zreport.Part
			c.Receive(ctx, &ps)
			e.parts(ps)
		})
		// A request in flight, or a close deadline already passed, means
		// only the operator's answer or signals are awaited: no timer, or
		// the loop would spin.
		if t, ok := e.st.NextTimer(); ok && ofd == nil && (t.Kind != zreport.TimerClose || t.At.After(now)) {
			if timer == nil || !t.At.Equal(timerAt) {
				if cancelTimer != nil {
					cancelTimer()
				}
				tctx, cancel := workflow.WithCancel(ctx)
				timer, timerAt, cancelTimer = workflow.NewTimer(tctx, max(t.At.Sub(now), 0)), t.At, cancel
			}
			sel.AddFuture(timer, func(workflow.Future) { timer, cancelTimer = nil, nil })
		}
		if ofd != nil {
			sel.AddFuture(ofd, func(f workflow.Future) {
				ofd = nil
				var ans activities.OFDAnswer
				err := f.Get(ctx, &ans)
				now := workflow.Now(ctx)
				switch {
				case err != nil:
					log.Warn("OFD request failed; asking again after ofd_retry", "error", err)
					e.st.OFDFailed(ofdFailure(err), now)
				case ans.Found:
					out, err := e.st.OFDAnswer(ans.Document, now)
					if err != nil {
						log.Warn("OFD document rejected", "error", err)
					}
					e.outcome(out)
				default:
					_, _ = e.st.OFDAnswer(nil, now)
				}
			})
		}
		sel.Select(ctx)
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

// entity carries out a State's decisions.
type entity struct {
	ctx     workflow.Context
	st      *zreport.State
	in      ZReportInput
	pending []activities.ZReportPublication
	details string
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
