package workers

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"reckon/internal/numfmt"
	"reckon/internal/temporalconn"
	"reckon/workflows"
	"reckon/zreport"
	"reckon/zreport/ofdsim"
)

const zreportUsage = `usage:
  reckon zreport show --drive FISCAL_DRIVE --shift N [--json]   (or: show FISCAL_DRIVE N)
  reckon zreport list [--status waiting|matched|mismatched|incomplete] [--date YYYY-MM-DD] [--drive D] [--limit N]
  reckon zreport ofd-sim [--addr HOST:PORT]
  reckon zreport simulate --input PARTS.jsonl [--ofd DOCS.jsonl] [--ofd-request-after 144h] [--retention 720h] [--ofd-retry 24h]`

func runZReport(ctx context.Context, cx *cmdContext) error {
	if len(cx.args) == 0 || cx.args[0] == "-h" || cx.args[0] == "--help" {
		fmt.Fprintln(cx.stderr, zreportUsage)
		if len(cx.args) == 0 {
			return fmt.Errorf("%w: a subcommand is required", errUsage)
		}
		return flag.ErrHelp
	}
	sub := cx.args[0]
	cx.args = cx.args[1:]
	cx.fs.Init("reckon zreport "+sub, flag.ContinueOnError)
	switch sub {
	case "show":
		return zreportShow(ctx, cx)
	case "list":
		return zreportList(ctx, cx)
	case "ofd-sim":
		return zreportOFDSim(ctx, cx)
	case "simulate":
		return zreportSimulate(cx)
	}
	fmt.Fprintln(cx.stderr, zreportUsage)
	return fmt.Errorf("%w: unknown subcommand %q", errUsage, sub)
}

func dialTemporal(ctx context.Context, cx *cmdContext) (client.Client, error) {
	log := slog.New(slog.NewTextHandler(cx.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return temporalconn.Dial(ctx, cx.cfg.Temporal, log, 10*time.Second)
}

func zreportShow(ctx context.Context, cx *cmdContext) error {
	drive := cx.fs.String("drive", "", "fiscal drive number (16 digits)")
	shift := cx.fs.Int64("shift", 0, "shift number")
	asJSON := cx.fs.Bool("json", false, "print the query answer as JSON")
	if err := cx.parse(); err != nil {
		return err
	}
	switch rest := cx.fs.Args(); {
	case len(rest) == 2 && *drive == "" && *shift == 0:
		*drive = rest[0]
		n, err := strconv.ParseInt(rest[1], 10, 64)
		if err != nil {
			return fmt.Errorf("%w: shift %q is not a number", errUsage, rest[1])
		}
		*shift = n
	case len(rest) == 1 && *drive == "" && *shift == 0:
		k, err := zreport.ParseKey(rest[0])
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		*drive, *shift = k.FiscalDrive, k.Shift
	case len(rest) != 0:
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, rest)
	}
	k := zreport.Key{FiscalDrive: *drive, Shift: *shift}
	if err := k.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	c, err := dialTemporal(ctx, cx)
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := c.QueryWorkflow(ctx, k.WorkflowID(), "", workflows.ZReportQueryState)
	if err != nil {
		return fmt.Errorf("zreport: query %s: %w", k.WorkflowID(), err)
	}
	var view zreport.View
	if err := v.Get(&view); err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(cx.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(view)
	}
	printView(cx.stdout, view)
	return nil
}

// printView writes an operator's summary of a Z-report.
func printView(w io.Writer, v zreport.View) {
	st := v.State
	fmt.Fprintf(w, "%s\n", v.WorkflowID)
	fmt.Fprintf(w, "status:          %s", v.Status)
	if v.Version > 0 {
		fmt.Fprintf(w, " (version %d)", v.Version)
	}
	fmt.Fprintln(w)
	if !st.ShiftClosedAt.IsZero() {
		fmt.Fprintf(w, "shift closed at: %s\n", st.ShiftClosedAt.Format(time.RFC3339))
	}
	fmt.Fprintf(w, "present:         %s\nmissing:         %s\n", joinSources(v.Present), joinSources(v.Missing))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "source\treceipts\ttotal\tevent_id\tduplicates\tcorrections")
	for _, s := range st.Sources {
		if s.Present {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\n", s.Source, numfmt.Int(s.Receipts), numfmt.Fixed(s.Total, 2), s.EventID,
				s.Duplicates, s.Corrections)
		} else {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t%d\t%d\n", s.Source, s.Duplicates, s.Corrections)
		}
	}
	tw.Flush()
	if st.Final != nil {
		for _, d := range st.Final.Differences {
			fmt.Fprintf(w, "difference:      %s %s %s vs %s %s (delta %s)\n", d.Source, d.Field, numfmt.Float(d.Value),
				d.Reference,
				numfmt.Float(d.Expected), numfmt.Float(d.Delta))
		}
		fmt.Fprintf(w, "finalized at:    %s (%s)\n", st.Final.FinalizedAt.Format(time.RFC3339), st.Final.Reason)
	}
	d := v.Deadlines
	if !d.OFDRequestAt.IsZero() {
		fmt.Fprintf(w, "OFD request at:  %s\n", d.OFDRequestAt.Format(time.RFC3339))
	}
	if st.OFD.Requests > 0 {
		fmt.Fprintf(w, "OFD requests:    %d (not found %d, failed %d), last: %s\n", st.OFD.Requests, st.OFD.NotFound,
			st.OFD.Failures, st.OFD.LastResult)
	}
	if !d.RetentionAt.IsZero() {
		fmt.Fprintf(w, "retention until: %s\n", d.RetentionAt.Format(time.RFC3339))
	}
	if !d.CloseAt.IsZero() {
		fmt.Fprintf(w, "entity closes:   %s\n", d.CloseAt.Format(time.RFC3339))
	}
}

func joinSources(s []zreport.Source) string {
	if len(s) == 0 {
		return "-"
	}
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = string(x)
	}
	return strings.Join(out, ", ")
}

func zreportList(ctx context.Context, cx *cmdContext) error {
	status := cx.fs.String("status", "", "only this status: waiting, matched, mismatched or incomplete")
	date := cx.fs.String("date", "", "only shifts closed on this UTC date, YYYY-MM-DD")
	drive := cx.fs.String("drive", "", "only this fiscal drive")
	limit := cx.fs.Int("limit", 100, "at most this many workflows")
	if err := cx.parse(); err != nil {
		return err
	}
	q, err := zreportListQuery(*status, *date, *drive)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *limit < 1 {
		return fmt.Errorf("%w: --limit %d: want at least 1", errUsage, *limit)
	}
	c, err := dialTemporal(ctx, cx)
	if err != nil {
		return err
	}
	defer c.Close()
	tw := tabwriter.NewWriter(cx.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKFLOW ID\tSTATUS\tSHIFT DATE\tRUN\tSTARTED")
	n := 0
	var token []byte
	for n < *limit {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: cx.cfg.Temporal.Namespace, Query: q, PageSize: int32(min(*limit-n, 1000)), NextPageToken: token,
		})
		if err != nil {
			return fmt.Errorf("zreport: list: %w", err)
		}
		for _, e := range resp.Executions {
			sa := e.GetSearchAttributes().GetIndexedFields()
			kw := func(name string) string {
				var s string
				if p, ok := sa[name]; ok {
					_ = json.Unmarshal(p.GetData(), &s)
				}
				return s
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.GetExecution().GetWorkflowId(), kw("ReckonStatus"), kw("ReckonDate"),
				strings.ToLower(strings.TrimPrefix(e.GetStatus().String(),
					"WORKFLOW_EXECUTION_STATUS_")), e.GetStartTime().AsTime().UTC().Format(time.RFC3339))
			n++
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			break
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if n >= *limit && len(token) > 0 {
		// Stopped at the limit with pages left: say so, with the total when
		// visibility can count it.
		total := int64(-1)
		if resp, err := c.CountWorkflow(ctx,
			&workflowservice.CountWorkflowExecutionsRequest{Namespace: cx.cfg.Temporal.Namespace, Query: q}); err == nil {
			total = resp.GetCount()
		}
		if f := truncatedFooter(n, total, "--limit"); f != "" {
			fmt.Fprintln(cx.stdout, f)
		}
	}
	return nil
}

// truncatedFooter is the line a list prints when it stopped at its limit
// after shown rows: total is how many there are, or -1 when unknown (then
// more are assumed). Empty when nothing was left out.
func truncatedFooter(shown int, total int64, flag string) string {
	switch {
	case total < 0:
		return fmt.Sprintf("(showing the first %d; there are more: %s N for more)", shown, flag)
	case total > int64(shown):
		return fmt.Sprintf("(showing %d of %d; %s N for more)", shown, total, flag)
	}
	return ""
}

// zreportListQuery builds the visibility query. Values are validated, so
// nothing can be injected into the query.
func zreportListQuery(status, date, drive string) (string, error) {
	q := fmt.Sprintf("WorkflowType = '%s'", workflows.ZReportWorkflow)
	if status != "" {
		switch zreport.Status(status) {
		case zreport.StatusWaiting, zreport.StatusMatched, zreport.StatusMismatched, zreport.StatusIncomplete:
		default:
			return "", fmt.Errorf("--status %q is not waiting, matched, mismatched or incomplete", status)
		}
		q += fmt.Sprintf(" AND ReckonStatus = '%s'", status)
	}
	if date != "" {
		if _, err := time.Parse(time.DateOnly, date); err != nil {
			return "", fmt.Errorf("--date %q is not YYYY-MM-DD", date)
		}
		q += fmt.Sprintf(" AND ReckonDate = '%s'", date)
	}
	if drive != "" {
		if !zreport.IsFiscalDrive(drive) {
			return "", fmt.Errorf("--drive %q is not 16 digits", drive)
		}
		q += fmt.Sprintf(" AND ReckonFiscalDrive = '%s'", drive)
	}
	return q, nil
}

func zreportOFDSim(ctx context.Context, cx *cmdContext) error {
	addr := cx.fs.String("addr", "",
		"listen address (default: zreport.ofd_sim_addr, else the host:port of zreport.ofd_url)")
	if err := cx.parse(); err != nil {
		return err
	}
	srv, sim, err := newOFDSimulator(cx.cfg)
	if err != nil {
		return err
	}
	if *addr != "" {
		srv.Addr = *addr
	}
	fmt.Fprintf(cx.stdout, "reckon zreport ofd-sim: simulated fiscal data operator on http://%s (GET /v1/zreports/{fiscal_drive}/{shift})\n", srv.Addr)
	err = ofdsim.ListenAndServe(ctx, srv)
	st := sim.Stats()
	fmt.Fprintf(cx.stdout, "reckon zreport ofd-sim: found %d, not found %d, failed %d, bad requests %d\n", st.Found,
		st.NotFound, st.Failed, st.BadRequest)
	return err
}

func zreportSimulate(cx *cmdContext) error {
	input := cx.fs.String("input", "", "parts, JSONL envelopes with arrived_at (required; - for stdin)")
	ofd := cx.fs.String("ofd", "", "the operator's OFD documents, JSONL (a key without one answers not found)")
	after := cx.fs.Duration("ofd-request-after", 0,
		"request a missing OFD document this long after shift close (default: zreport.ofd_request_after, 144h)")
	retention := cx.fs.Duration("retention", 0,
		"finalize a key still waiting this long after shift close (default: zreport.retention, 720h)")
	retry := cx.fs.Duration("ofd-retry", 0,
		"ask the operator again this long after not found (default: zreport.ofd_retry, 24h)")
	if err := cx.parse(); err != nil {
		return err
	}
	if *input == "" {
		return fmt.Errorf("%w: --input is required", errUsage)
	}
	p := zreportPolicy(cx.cfg)
	for _, o := range []struct {
		v   time.Duration
		dst *time.Duration
	}{{*after, &p.OFDRequestAfter}, {*retention, &p.Retention}, {*retry, &p.OFDRetry}} {
		if o.v < 0 {
			return fmt.Errorf("%w: durations must not be negative", errUsage)
		}
		if o.v > 0 {
			*o.dst = o.v
		}
	}
	var in io.Reader = cx.stdin
	if *input != "-" {
		f, err := os.Open(*input)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	var docs io.Reader
	if *ofd != "" {
		f, err := os.Open(*ofd)
		if err != nil {
			return err
		}
		defer f.Close()
		docs = f
	}
	_, err := zreport.Simulate(in, docs, cx.stdout, cx.stderr, p)
	if errors.Is(err, zreport.ErrInvalidPart) {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return err
}
