package workflows

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"reckon/activities"
	"reckon/internal/numfmt"
)

// The Temporal UI renders a workflow's current details as markdown, where
// single newlines run together into one paragraph: the helpers here turn
// lines into list items and tables, and numbers into grouped plain
// notation (2,974,500, never 2.9745e+06).

// mdList renders lines (one per "\n", as activities.HorizonResult.Waiting
// holds them) as a markdown list, one item per non-empty line.
func mdList(lines string) string {
	var b strings.Builder
	for _, l := range strings.Split(lines, "\n") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("- ")
		b.WriteString(mdEscapeLine(l))
	}
	return b.String()
}

// mdEscapeLine keeps a line of text from becoming markup: table pipes and
// emphasis stars are escaped.
func mdEscapeLine(s string) string {
	return strings.NewReplacer("|", `\|`, "*", `\*`, "_", `\_`).Replace(s)
}

// mdCell is mdEscapeLine for a table cell.
func mdCell(s string) string {
	if s == "" {
		return "–"
	}
	return mdEscapeLine(s)
}

// num3 formats v with three significant digits, in plain notation.
func num3(v float64) string {
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 3, 64), 64)
	if err != nil {
		return numfmt.Float(v)
	}
	return numfmt.Float(r)
}

// changesMarkdown renders a recompute's corrections as a table: which
// window changed, from what to what, and why (the reason the truth gives).
// total is the report's count of corrections; the result holds at most
// activities.MaxChanges of them.
func changesMarkdown(changes []activities.WindowChange, total int64) string {
	if len(changes) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n\n**corrections**")
	if total > int64(len(changes)) {
		fmt.Fprintf(&b, " (the first %d of %s)", len(changes), numfmt.Int(total))
	}
	b.WriteString("\n\n| key | window | published | truth | version | reason |\n|---|---|---|---|---|---|\n")
	for _, c := range changes {
		published := "none"
		if c.PublishedVersion > 0 {
			published = fmt.Sprintf("v%d: %s events, sum %s", c.PublishedVersion, numfmt.Int(c.PublishedCount),
				numfmt.Float(c.PublishedSum))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s events, sum %s | v%d | %s |\n", mdCell(c.Key),
			c.WindowStart.UTC().Format(time.RFC3339), published, numfmt.Int(c.TruthCount), numfmt.Float(c.TruthSum),
			c.Version, mdCell(c.Reason))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// triggerText says why a recompute ran, for its details.
func triggerText(trigger string) string {
	why := map[string]string{
		activities.TriggerCorrection: "too-late events arrived for these windows",
		activities.TriggerReconcile:  "the daily reconciliation",
		activities.TriggerReplay:     "a replay",
		activities.TriggerManual:     "started by hand",
		activities.TriggerFinalize:   "the stream's finalizer",
	}[trigger]
	if why == "" {
		return mdCell(trigger)
	}
	return trigger + " (" + why + ")"
}
