package workers

import (
	"bufio"
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"reckon/internal/numfmt"
	"reckon/lake"
)

// queryLakeWindows prints the curated windows table of stream for window
// starts in [from, to) (docs/lake.md): one row per window, its latest
// figure and status, by key then window start.
func queryLakeWindows(ctx context.Context, cx *cmdContext, l *lake.Lake, stream string, from, to time.Time, keys []string, format string) error {
	ws, err := l.ReadWindows(ctx, stream, from, to)
	if errors.Is(err, lake.ErrBadName) {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if err != nil {
		return err
	}
	if len(keys) > 0 {
		ws = slices.DeleteFunc(ws, func(w lake.WindowRow) bool { return !slices.Contains(keys, w.Key) })
	}
	slices.SortFunc(ws, func(a, b lake.WindowRow) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return cmp.Compare(a.WindowStart, b.WindowStart)
	})
	return printLakeWindows(cx.stdout, format, ws)
}

// lakeWindowJSON is one line of `lake query --stream --format json`.
type lakeWindowJSON struct {
	lakeAggJSON
	Status     string `json:"status"`
	Version    int64  `json:"version"`
	ComputedBy string `json:"computed_by"`
	Reason     string `json:"reason,omitempty"`
	UpdatedAt  string `json:"updated_at"`
}

func printLakeWindows(out io.Writer, format string, ws []lake.WindowRow) error {
	if format == "arrow" {
		return writeArrowWindows(out, ws)
	}
	bw := bufio.NewWriter(out)
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	ts := func(us int64) string { return lakeRFC3339(time.UnixMicro(us)) }
	// A retraction (count 0) has no average: 0 in text formats.
	avg := func(w *lake.WindowRow) float64 {
		if w.Count == 0 {
			return 0
		}
		return w.Sum / float64(w.Count)
	}
	switch format {
	case "json":
		enc := json.NewEncoder(bw)
		for i := range ws {
			w := &ws[i]
			if err := enc.Encode(lakeWindowJSON{lakeAggJSON{w.Key, ts(w.WindowStart), ts(w.WindowEnd), w.Count, w.Sum, avg(w), w.Min, w.Max},
				w.Status, w.Version, w.ComputedBy, w.Reason, ts(w.UpdatedAt)}); err != nil {
				return err
			}
		}
	case "csv":
		cw := csv.NewWriter(bw)
		cw.Write([]string{"key", "window_start", "window_end", "count", "sum", "avg", "min", "max", "status", "version", "computed_by", "reason", "updated_at"})
		for i := range ws {
			w := &ws[i]
			cw.Write([]string{w.Key, ts(w.WindowStart), ts(w.WindowEnd), strconv.FormatInt(w.Count, 10), f(w.Sum), f(avg(w)), f(w.Min), f(w.Max),
				w.Status, strconv.FormatInt(w.Version, 10), w.ComputedBy, w.Reason, ts(w.UpdatedAt)})
		}
		cw.Flush()
		if err := cw.Error(); err != nil {
			return err
		}
	default:
		tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tWINDOW_START\tWINDOW_END\tCOUNT\tSUM\tAVG\tMIN\tMAX\tSTATUS\tVERSION\tBY\tUPDATED_AT\tREASON")
		for i := range ws {
			w := &ws[i]
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", w.Key, ts(w.WindowStart), ts(w.WindowEnd),
				numfmt.Int(w.Count), numfmt.Float(w.Sum), numfmt.Float(avg(w)), numfmt.Float(w.Min), numfmt.Float(w.Max),
				w.Status, w.Version, w.ComputedBy, ts(w.UpdatedAt), w.Reason)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// runLakeCurate rebuilds the curated tables of one stream and window date
// from the whole summaries and truth tables (lake.Lake.RebuildCurated),
// and its feature_status table from the features and feature_truth tables
// of that event date (lake.Lake.RebuildFeatureStatus):
// the repair when a curation failed for good.
func runLakeCurate(ctx context.Context, cx *cmdContext) error {
	dir := lakeFlag(cx)
	stream := cx.fs.String("stream", "", "stream whose windows and corrections tables to rebuild (required)")
	dateS := cx.fs.String("date", "", "UTC window date YYYY-MM-DD (required)")
	if err := cx.parse(); err != nil {
		return err
	}
	if err := lakeNoArgs(cx); err != nil {
		return err
	}
	date, err := time.Parse(time.DateOnly, *dateS)
	if *stream == "" || err != nil {
		return fmt.Errorf("%w: --stream and --date YYYY-MM-DD required", errUsage)
	}
	l, err := openLake(cx, *dir)
	if err != nil {
		return err
	}
	res, err := l.RebuildCurated(ctx, *stream, date)
	if errors.Is(err, lake.ErrBadName) {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if err != nil {
		return err
	}
	// And the feature_status table of the same event date.
	fres, err := l.RebuildFeatureStatus(ctx, *stream, date)
	if err != nil {
		return err
	}
	for _, f := range append(res.Files, fres.Files...) {
		fmt.Fprintln(cx.stdout, f)
	}
	fmt.Fprintf(cx.stdout, "%s %s: %d windows, %d corrections, %d features\n",
		*stream, *dateS, res.Windows, res.Corrections, fres.Features)
	return nil
}
