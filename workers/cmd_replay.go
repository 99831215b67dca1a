package workers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"reckon/activities"
	"reckon/internal/temporalconn"
	"reckon/workflows"
)

// runReplay is `reckon replay --from D --to D [--stream S] [--dry-run]
// [--concurrency N] [--reprocess failed|all]`: start (or attach to) the
// replay workflow of the range, draw its progress from the workflow's
// progress query, and print the summed report.
func runReplay(ctx context.Context, cx *cmdContext) error {
	from := cx.fs.String("from", "", "first date, YYYY-MM-DD (required)")
	to := cx.fs.String("to", "", "last date, YYYY-MM-DD, inclusive (default: --from)")
	var streams stringList
	cx.fs.Var(&streams, "stream", "stream to replay (repeatable; default: every configured stream)")
	dry := cx.fs.Bool("dry-run", false, "compute and report what would change; publish and write nothing")
	conc := cx.fs.Int("concurrency", 0, "(stream, day) recomputes at once (default batch.replay_concurrency)")
	reprocess := cx.fs.String("reprocess", workflows.ReprocessAll,
		"all: recompute every (stream, day); failed: only those whose last replay did not complete")
	detach := cx.fs.Bool("detach", false, "start and return; do not follow progress")
	jsonOut := cx.fs.Bool("json", false, "print the final report as JSON instead of a table")
	every := cx.fs.Duration("progress-interval", 500*time.Millisecond, "how often to query progress")
	if err := cx.parse(); err != nil {
		return err
	}
	cfg := cx.cfg
	if *to == "" {
		*to = *from
	}
	f, err1 := time.Parse(time.DateOnly, *from)
	t, err2 := time.Parse(time.DateOnly, *to)
	switch {
	case err1 != nil || err2 != nil:
		return fmt.Errorf("%w: --from and --to must be YYYY-MM-DD (got %q, %q)", errUsage, *from, *to)
	case t.Before(f):
		return fmt.Errorf("%w: --to %s is before --from %s", errUsage, *to, *from)
	case *reprocess != workflows.ReprocessAll && *reprocess != workflows.ReprocessFailed:
		return fmt.Errorf("%w: --reprocess %q: want failed or all", errUsage, *reprocess)
	case *conc < 0:
		return fmt.Errorf("%w: --concurrency must be positive", errUsage)
	}
	if *conc == 0 {
		*conc = cfg.Batch.ReplayConcurrency
	}
	c, err := temporalconn.Dial(ctx, cfg.Temporal, slog.New(slog.DiscardHandler), 30*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	in := workflows.ReplayParams{
		From: *from, To: *to, Streams: streams, DryRun: *dry, Concurrency: *conc, Reprocess: *reprocess,
		HorizonWait: cfg.Batch.HorizonWait, HorizonPoll: cfg.Batch.HorizonPoll,
	}
	id := workflows.ReplayWorkflowID(*from, *to, streams, *dry)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                cfg.Temporal.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary: fmt.Sprintf("replay %s..%s (%s)", *from, *to,
			map[bool]string{true: "dry run", false: "publishes corrections"}[*dry]),
	}, workflows.ReplayWorkflow, in)
	if err != nil {
		return fmt.Errorf("replay: start: %w", err)
	}
	fmt.Fprintf(cx.stdout, "replay %s..%s: workflow %s run %s\n  %s\n", *from, *to, id, run.GetRunID(), uiLink(cfg, id))
	if *detach {
		return nil
	}
	type result struct {
		rep activities.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.err = run.Get(ctx, &r.rep) // follows continue-as-new
		done <- r
	}()
	bar := newProgressBar(cx.stdout)
	tick := time.NewTicker(*every)
	defer tick.Stop()
	for {
		select {
		case r := <-done:
			if r.err == nil {
				bar.draw(workflows.ReplayProgress{Total: len(r.rep.Parts) + len(r.rep.Failed) + len(r.rep.Skipped),
					Done: len(r.rep.Parts) + len(r.rep.Failed) + len(r.rep.Skipped), Failed: len(r.rep.Failed), Skipped: len(r.rep.Skipped), Totals: r.rep.Total})
			}
			bar.finish()
			if r.err != nil {
				return fmt.Errorf("replay %s..%s: %w", *from, *to, r.err)
			}
			return printReport(cx.stdout, cfg.Lake.Root, r.rep, *jsonOut)
		case <-tick.C:
			v, err := c.QueryWorkflow(ctx, id, "", workflows.ReplayQueryProgress)
			if err != nil {
				continue // not yet started, or between runs of a continue-as-new
			}
			var p workflows.ReplayProgress
			if v.Get(&p) == nil {
				bar.waits = childWaits(ctx, c, id)
				bar.draw(p)
			}
		case <-ctx.Done():
			bar.finish()
			fmt.Fprintf(cx.stdout,
				"detached; the replay keeps running in Temporal: follow it with `reckon replay --from %s --to %s` again or in "+
					"the UI: %s\n", *from, *to, uiLink(cfg, id))
			return nil
		}
	}
}

// progressBar draws replay progress: redrawn in place on a terminal, one
// line per change otherwise (logs, tests).
type progressBar struct {
	w    io.Writer
	tty  bool
	last string
	// waits are what running children wait for (childWaits), drawn
	// after the bar.
	waits []string
}

func newProgressBar(w io.Writer) *progressBar {
	b := &progressBar{w: w}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			b.tty = true
		}
	}
	return b
}

func (b *progressBar) draw(p workflows.ReplayProgress) {
	const width = 30
	filled := 0
	if p.Total > 0 {
		filled = p.Done * width / p.Total
	}
	line := fmt.Sprintf("[%s%s] %d/%d (stream, day)s · corrected %d of %d windows",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), p.Done, p.Total, p.Totals.Corrected, p.Totals.Windows)
	if p.Failed > 0 {
		line += fmt.Sprintf(" · %d failed", p.Failed)
	}
	if p.Skipped > 0 {
		line += fmt.Sprintf(" · %d skipped", p.Skipped)
	}
	if len(p.Running) > 0 {
		line += " · running " + strings.Join(p.Running, " ")
	}
	for _, w := range b.waits {
		line += "\n  " + w
	}
	if line == b.last {
		return
	}
	b.last = line
	if b.tty && !strings.Contains(line, "\n") {
		fmt.Fprintf(b.w, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(b.w, line)
	}
}

func (b *progressBar) finish() {
	if b.tty && b.last != "" {
		fmt.Fprintln(b.w)
	}
}
