package workflows

import (
	"fmt"
	"regexp"
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

// mdList renders what activities.HorizonResult.Waiting holds as a
// markdown list, one item per partition: its lines are joined by "\n", a
// targeted check's by "; " (a "; " inside a line, before no
// "topic/partition", stays in it).
func mdList(waiting string) string {
	var items []string
	for _, l := range strings.Split(waiting, "\n") {
		for i, part := range strings.Split(l, "; ") {
			if i > 0 && !partitionPrefix.MatchString(part) {
				items[len(items)-1] += "; " + part
				continue
			}
			items = append(items, part)
		}
	}
	var b strings.Builder
	for _, it := range items {
		if it = strings.TrimSpace(it); it == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("- ")
		b.WriteString(mdEscapeLine(it))
	}
	return b.String()
}

// partitionPrefix matches the start of a horizon line: "topic/partition"
// then a space or a colon.
var partitionPrefix = regexp.MustCompile(`^[A-Za-z0-9._-]+/[0-9]+[ :]`)

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
// window changed (its UTC start time: a recompute covers one UTC day, named
// above), from what to what, and why (the reason the truth gives). total
// is the report's count of corrections; the result holds at most
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
	b.WriteString(" — version, events, sum\n\n| key | window | published | truth | reason |\n|---|---|---|---|---|\n")
	for _, c := range changes {
		published := "none"
		if c.PublishedVersion > 0 {
			published = fmt.Sprintf("v%d, %s, %s", c.PublishedVersion, numfmt.Int(c.PublishedCount),
				numfmt.Float(c.PublishedSum))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | v%d, %s, %s | %s |\n", mdCell(c.Key), c.WindowStart.UTC().Format(time.TimeOnly),
			published, c.Version, numfmt.Int(c.TruthCount), numfmt.Float(c.TruthSum), mdCell(c.Reason))
	}
	// Last, where the UI's frame may clip a few pixels: where to see all.
	b.WriteString("\nevery correction is in the lake's `corrections` table (docs/lake.md)")
	return b.String()
}

// pollNote ends a waiting workflow's details (the UI's frame may clip its
// last line by a few pixels): when it looks again.
func pollNote(poll time.Duration) string {
	return fmt.Sprintf("checked again every %v", poll)
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
