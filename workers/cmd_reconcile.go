package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"reckon/activities"
	"reckon/internal/config"
	"reckon/internal/temporalconn"
	"reckon/workflows"
)

// errFailedParts makes the CLI exit non-zero when some (stream, day)
// recompute failed; the report is printed anyway.
var errFailedParts = errors.New("some recomputes failed (see the report)")

// runReconcile is `reckon reconcile --date D [--wait]`: start the daily
// reconciliation of D now (the same workflow the schedule runs) and, with
// --wait, print its price-of-speed report.
func runReconcile(ctx context.Context, cx *cmdContext) error {
	date := cx.fs.String("date", "", "date to reconcile, YYYY-MM-DD (default: batch.days_back days before today in batch.timezone)")
	var streams stringList
	cx.fs.Var(&streams, "stream", "stream to reconcile (repeatable; default: every configured stream)")
	wait := cx.fs.Bool("wait", false, "wait for the result and print the report")
	dry := cx.fs.Bool("dry-run", false, "compute and report what would change; publish and write nothing")
	jsonOut := cx.fs.Bool("json", false, "with --wait: print the report as JSON instead of a table")
	if err := cx.parse(); err != nil {
		return err
	}
	cfg := cx.cfg
	if *date == "" {
		loc, err := time.LoadLocation(cfg.Batch.Timezone)
		if err != nil {
			return err
		}
		*date = time.Now().In(loc).AddDate(0, 0, -cfg.Batch.DaysBack).Format(time.DateOnly)
	}
	if _, err := time.Parse(time.DateOnly, *date); err != nil {
		return fmt.Errorf("%w: --date %q is not YYYY-MM-DD", errUsage, *date)
	}
	c, err := temporalconn.Dial(ctx, cfg.Temporal, slog.New(slog.DiscardHandler), 30*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	in := reconcileParams(cfg)
	in.Date, in.Streams, in.DryRun = *date, streams, *dry
	id := workflows.ReconcileWorkflowID(*date)
	if len(streams) > 0 {
		id += "/" + strings.Join(streams, ",")
	}
	if *dry {
		id += "/dry-run"
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                cfg.Temporal.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:            fmt.Sprintf("reconcile %s (started by hand)", *date),
	}, workflows.ReconcileWorkflow, in)
	if err != nil {
		return fmt.Errorf("reconcile: start: %w", err)
	}
	fmt.Fprintf(cx.stdout, "reconcile %s: workflow %s run %s\n  %s\n", *date, id, run.GetRunID(), uiLink(cfg, id))
	if !*wait {
		return nil
	}
	type result struct {
		rep activities.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.err = run.Get(ctx, &r.rep)
		done <- r
	}()
	// While it runs, say what its recomputes wait for (the same text as
	// their current details in the UI), whenever that changes.
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	var waits waitLines
	for {
		select {
		case r := <-done:
			if r.err != nil {
				if ctx.Err() != nil {
					break
				}
				return fmt.Errorf("reconcile %s: %w", *date, r.err)
			}
			return printReport(cx.stdout, cfg.Lake.Root, r.rep, *jsonOut)
		case <-tick.C:
			if w := strings.Join(childWaits(ctx, c, id), "\n"); w != "" && waits.due(w, time.Now()) {
				fmt.Fprintln(cx.stdout, w)
			}
			continue
		case <-ctx.Done():
		}
		fmt.Fprintf(cx.stdout, "stopped waiting; the reconcile keeps running in Temporal: %s\n", uiLink(cfg, id))
		return nil
	}
}

// uiLink is where the Temporal UI shows workflow id (the dev stack's UI).
func uiLink(cfg *config.Config, id string) string {
	return fmt.Sprintf("http://127.0.0.1:%d/namespaces/%s/workflows/%s", cfg.Dev.UIPort, url.PathEscape(cfg.Temporal.Namespace), url.PathEscape(id))
}

// printReport prints the price-of-speed report as a table (or JSON) and
// returns errFailedParts when some part failed.
func printReport(w io.Writer, lakeRoot string, rep activities.Report, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		title := "price of speed: " + rep.Kind + " " + rep.Name
		if rep.DryRun {
			title += " (dry run: nothing published)"
		}
		fmt.Fprintf(w, "\n%s\n\n", title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "stream\tday\twindows\tstream exact\tcorrected\talready corrected\tmissing\tevents\tbeyond lateness\tcount err max\tcount err mean\tsum err max\tsum err mean\t")
		row := func(name, day string, r activities.TruthReport) {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%g\t%.4g\t%.6g\t%.4g\t\n", name, day,
				r.Windows, r.StreamExact, r.Corrected, r.AlreadyCorrected, r.Missing, r.Events, r.EventsBeyondLateness,
				r.CountErrMax, r.CountErrMean, r.SumErrMax, r.SumErrMean)
		}
		for _, p := range rep.Parts {
			row(p.Stream, p.From.UTC().Format(time.DateOnly), p)
		}
		row("total", "", rep.Total)
		if err := tw.Flush(); err != nil {
			return err
		}
		if err := printFeatureReport(w, rep); err != nil {
			return err
		}
		for _, p := range rep.Parts {
			if !p.OpenUntil.IsZero() {
				fmt.Fprintf(w, "%s: checked windows up to %s; windows to %s still open (day in progress)\n",
					p.Stream, p.To.UTC().Format(time.RFC3339), p.OpenUntil.UTC().Format(time.RFC3339))
			}
		}
		r := rep.Total.Reasons
		fmt.Fprintf(w, "\ncorrection reasons: late beyond lateness %d, missing pane %d, duplicates %d, retracted %d, other %d\n",
			r.BeyondLateness, r.Missing, r.Duplicates, r.Retracted, r.Other)
		if rep.Path != "" {
			fmt.Fprintf(w, "report: %s/%s\n", strings.TrimSuffix(lakeRoot, "/"), rep.Path)
		}
		for _, s := range rep.Skipped {
			fmt.Fprintf(w, "skipped (completed before): %s\n", s)
		}
		for _, f := range rep.Failed {
			fmt.Fprintf(w, "FAILED: %s\n", f)
		}
	}
	if len(rep.Failed) > 0 {
		return errFailedParts
	}
	return nil
}

// printFeatureReport prints the feature half of the price of speed, for
// the parts whose stream has rolling features (TruthReport.Features):
// how many served features the batch checked, how many were exact,
// differed or were never served, and by how much they erred.
func printFeatureReport(w io.Writer, rep activities.Report) error {
	if rep.Total.Features == nil {
		return nil
	}
	fmt.Fprintf(w, "\nrolling features (served vs true)\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stream\tday\tchecked\texact\tdiffers\tnot served\t"+
		"count err max\tcount err mean\tsum err max\tsum err mean\t")
	row := func(name, day string, f *activities.FeatureReport) {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%g\t%.4g\t%.6g\t%.4g\t\n", name, day,
			f.Checked, f.Exact, f.Differs, f.NotServed, f.CountErrMax, f.CountErrMean, f.SumErrMax, f.SumErrMean)
	}
	for _, p := range rep.Parts {
		if p.Features != nil {
			row(p.Stream, p.From.UTC().Format(time.DateOnly), p.Features)
		}
	}
	row("total", "", rep.Total.Features)
	return tw.Flush()
}
