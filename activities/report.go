package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
)

// TruthStreams returns the names of the streams the batch truth covers
// (those with a window), in configuration order. Its name is the activity
// type that recorded reconcile and replay histories (workflows/testdata)
// schedule, so it keeps it.
func (a *BatchTruth) TruthStreams(ctx context.Context) ([]string, error) {
	out := make([]string, 0, len(a.Cfg.Streams))
	for _, s := range a.Cfg.Streams {
		if s.Window > 0 {
			out = append(out, s.Name)
		}
	}
	return out, nil
}

// Report is the price-of-speed report of a reconciliation (one date) or a
// replay (a date range): per stream and day, and the total.
type Report struct {
	// Kind is "reconcile" or "replay".
	Kind string `json:"kind"`
	// Name identifies it: the date, or from_to for a replay.
	Name       string `json:"name"`
	WorkflowID string `json:"workflow_id"`
	DryRun     bool   `json:"dry_run,omitempty"`
	// Parts are the per (stream, day) reports, in order.
	Parts []TruthReport `json:"parts"`
	Total TruthReport   `json:"total"`
	// Failed lists (stream, day) recomputes that failed, with the error.
	Failed []string `json:"failed,omitempty"`
	// Skipped lists (stream, day) recomputes not re-run (--reprocess failed).
	Skipped []string `json:"skipped,omitempty"`
	// Path of the JSON file in the lake, once written.
	Path string `json:"path,omitempty"`
}

// WriteReport writes r as JSON to reports/<kind>/<name>.json in the lake
// and returns the path. Dry runs write nothing.
func (a *BatchTruth) WriteReport(ctx context.Context, r Report) (string, error) {
	if r.DryRun {
		return "", nil
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", badInput("report: %v", err)
	}
	return a.Lake.WriteReport(ctx, r.Kind, r.Name, append(b, '\n'))
}

// WorkflowStatuses returns, for each workflow id, the status of its latest
// run in lowercase ("completed", "failed", "running", ...), or "" when no
// run exists. Replay uses it for --reprocess failed.
func (a *BatchTruth) WorkflowStatuses(ctx context.Context, ids []string) ([]string, error) {
	c := activity.GetClient(ctx)
	out := make([]string, len(ids))
	for i, id := range ids {
		d, err := c.DescribeWorkflowExecution(ctx, id, "")
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			continue
		case err != nil:
			return nil, fmt.Errorf("truth: describe %s: %w", id, err)
		}
		s := d.GetWorkflowExecutionInfo().GetStatus().String()
		out[i] = strings.ToLower(strings.TrimPrefix(s, "WORKFLOW_EXECUTION_STATUS_"))
	}
	return out, nil
}

// ReasonCounts classifies corrections (and for late/duplicates, windows).
type ReasonCounts struct {
	// BeyondLateness: the truth holds events that arrived after the
	// stream's latest pane (the late side output).
	BeyondLateness int64 `json:"late_beyond_lateness"`
	// Missing: the window has events but no pane was ever published.
	Missing int64 `json:"missing"`
	// Duplicates: the stream counted more events than the unique truth.
	Duplicates int64 `json:"duplicates"`
	// Retracted: a pane exists but the lake holds no valid event.
	Retracted int64 `json:"retracted"`
	// Other: equal count, different values.
	Other int64 `json:"other"`
}

// TruthReport is the price of speed for a range (docs/requirements.md
// R-TRUTH-7, R-ROLL-4): how far the
// stream's answers were from the truth, and what the batch did about it.
// Errors compare the stream's own latest pane (no pane: 0) with the truth.
type TruthReport struct {
	Stream string    `json:"stream,omitempty"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	// OpenUntil, when set, is the end of the range asked for a day still in
	// progress: its windows in [To, OpenUntil) were still open (the stream
	// had not purged them) and are not checked by this run ("today so far").
	OpenUntil time.Time `json:"open_until,omitzero"`
	DryRun    bool      `json:"dry_run,omitempty"`
	// Windows checked: every window with events in the lake or a
	// published pane.
	Windows int64 `json:"windows_checked"`
	// StreamExact: the stream's own latest pane equals the truth.
	StreamExact int64 `json:"stream_exact"`
	// Matched: the latest published pane (stream or an earlier
	// correction) equals the truth; nothing to publish.
	Matched int64 `json:"matched"`
	// AlreadyCorrected: of Matched, those an earlier batch correction fixed.
	AlreadyCorrected int64 `json:"already_corrected"`
	// Corrected: corrections published by this run (dry run: that would be).
	Corrected int64 `json:"corrected"`
	// Superseded: corrections not published because another recompute
	// published to the window after this one read it.
	Superseded int64 `json:"superseded,omitempty"`
	// Missing: windows with events but no stream pane.
	Missing int64 `json:"missing"`
	// Events: valid unique events in the lake for the windows checked.
	Events int64 `json:"events"`
	// EventsBeyondLateness: of Events, those that arrived after the
	// stream's latest pane of their window (or for a window it never
	// published): what the stream could not count.
	EventsBeyondLateness int64        `json:"events_beyond_lateness"`
	Reasons              ReasonCounts `json:"reasons"`
	CountErrMax          float64      `json:"count_abs_err_max"`
	CountErrMean         float64      `json:"count_abs_err_mean"`
	SumErrMax            float64      `json:"sum_abs_err_max"`
	SumErrMean           float64      `json:"sum_abs_err_mean"`
	// Totals of absolute errors, so reports can be summed.
	CountErrTotal float64 `json:"count_abs_err_total"`
	SumErrTotal   float64 `json:"sum_abs_err_total"`
	// Features: served features against their truth, for a stream with
	// rolling set (nil otherwise).
	Features *FeatureReport `json:"features,omitempty"`
}

// Add sums o into r (ranges widen; means are recomputed).
func (r *TruthReport) Add(o TruthReport) {
	if o.Features != nil {
		var f FeatureReport // a copy: r may share its pointer with another report
		if r.Features != nil {
			f = *r.Features
		}
		f.Add(*o.Features)
		r.Features = &f
	}
	if r.From.IsZero() || (!o.From.IsZero() && o.From.Before(r.From)) {
		r.From = o.From
	}
	if o.To.After(r.To) {
		r.To = o.To
	}
	if o.OpenUntil.After(r.OpenUntil) {
		r.OpenUntil = o.OpenUntil
	}
	r.DryRun = r.DryRun || o.DryRun
	r.Windows += o.Windows
	r.StreamExact += o.StreamExact
	r.Matched += o.Matched
	r.AlreadyCorrected += o.AlreadyCorrected
	r.Corrected += o.Corrected
	r.Superseded += o.Superseded
	r.Missing += o.Missing
	r.Events += o.Events
	r.EventsBeyondLateness += o.EventsBeyondLateness
	r.Reasons.BeyondLateness += o.Reasons.BeyondLateness
	r.Reasons.Missing += o.Reasons.Missing
	r.Reasons.Duplicates += o.Reasons.Duplicates
	r.Reasons.Retracted += o.Reasons.Retracted
	r.Reasons.Other += o.Reasons.Other
	r.CountErrMax = math.Max(r.CountErrMax, o.CountErrMax)
	r.SumErrMax = math.Max(r.SumErrMax, o.SumErrMax)
	r.CountErrTotal += o.CountErrTotal
	r.SumErrTotal += o.SumErrTotal
	r.means()
}

func (r *TruthReport) means() {
	r.CountErrMean, r.SumErrMean = 0, 0
	if r.Windows > 0 {
		r.CountErrMean = r.CountErrTotal / float64(r.Windows)
		r.SumErrMean = r.SumErrTotal / float64(r.Windows)
	}
}
