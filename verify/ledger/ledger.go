// Package ledger is reckon's conservation check: for a generator run it
// accounts every produced record exactly once — accepted into windows, sent
// to the late side output, dead-lettered with a reason, or dropped as a
// counted duplicate — and compares every (key, window)'s highest published
// version with the truth from the generator's manifest.
//
// It is pure: the caller reads the manifest, the output topics and the
// stream's committed operator state and hands them in; the ledger decides.
package ledger

import (
	"fmt"
	"io"
	"math"
	"sort"
	"time"

	"reckon/internal/event"
	"reckon/verify/generate"
)

// Outputs is what the system published for one stream, as read back. It
// has the fields of streaming.Outputs (see there), so `ledger.Outputs(o)`
// converts one; the ledger itself needs no Kafka. Windows ending after
// Watermark may still be open: they are counted as Open, not compared.
type Outputs struct {
	Panes                           map[string]event.Pane
	Late                            map[string]bool
	DLQ                             map[string]string
	Accepted, Duplicates, LateCount int64
	Watermark                       time.Time
	OnTime                          int64
	EarlyOnTime                     []string
}

// Ledger is the result.
type Ledger struct {
	Stream string
	// Produced is every record the generator produced to the topic.
	Produced int64
	// Where they went.
	Accepted, Late, DeadLettered, Duplicates int64
	// Unaccounted = Produced − (Accepted + Late + DeadLettered + Duplicates):
	// positive means lost, negative means counted twice.
	Unaccounted int64
	// Problems found record by record.
	PoisonNotDeadLettered []string // listed poison (topic/partition/offset) absent from the DLQ
	DeadLetterNoReason    []string // DLQ records without a reason header
	LateTopicMismatch     bool     // late topic records ≠ the operators' late counter

	// Windows: truth windows checked, equal to their final pane, and the
	// ones that differ (with the first few shown).
	Windows, WindowsMatched int
	WindowsDiffer           []WindowDiff
	// Open counts truth windows not yet closed by the watermark.
	Open int
	// PanesWithoutTruth: windows with a pane but no valid event in the truth.
	PanesWithoutTruth int
	// OnTime counts the stream's on_time panes and EarlyOnTime those
	// fired before window end + out_of_orderness on the processing clock
	// (Outputs.EarlyOnTime).
	OnTime      int64
	EarlyOnTime []string
}

// WindowDiff is one (key, window) whose final pane is not the truth.
type WindowDiff struct {
	Key         string
	WindowStart time.Time
	Truth       event.Agg
	Final       *event.Pane // nil: no pane at all
}

// Compute builds the ledger of stream from the manifest m and the outputs.
func Compute(m *generate.Manifest, stream string, out Outputs) Ledger {
	l := Ledger{Stream: stream, Produced: m.Counts.Records}
	l.Accepted, l.Duplicates, l.Late = out.Accepted, out.Duplicates, int64(len(out.Late))
	l.DeadLettered = int64(len(out.DLQ))
	l.Unaccounted = l.Produced - (l.Accepted + l.Late + l.DeadLettered + l.Duplicates)
	l.LateTopicMismatch = out.LateCount != int64(len(out.Late))
	l.OnTime, l.EarlyOnTime = out.OnTime, out.EarlyOnTime
	for _, e := range m.Listed {
		if e.Category != generate.Poison || e.Partition == nil || e.Offset == nil {
			continue
		}
		src := fmt.Sprintf("%s/%d/%d", m.Topic, *e.Partition, *e.Offset)
		if _, ok := out.DLQ[src]; !ok {
			l.PoisonNotDeadLettered = append(l.PoisonNotDeadLettered, src)
		}
	}
	for src, reason := range out.DLQ {
		if reason == "" {
			l.DeadLetterNoReason = append(l.DeadLetterNoReason, src)
		}
	}
	sort.Strings(l.PoisonNotDeadLettered)
	sort.Strings(l.DeadLetterNoReason)

	seen := map[string]bool{}
	for _, w := range m.Truth {
		if w.Stream != stream {
			continue
		}
		start, err := time.Parse(time.RFC3339Nano, w.WindowStart)
		if err != nil {
			continue
		}
		k := event.WindowKey(stream, w.Key, start)
		seen[k] = true
		if end, err := time.Parse(time.RFC3339Nano, w.WindowEnd); err == nil && !out.Watermark.IsZero() && end.After(out.Watermark) {
			l.Open++
			continue
		}
		l.Windows++
		truth := event.Agg{Count: w.Count, Sum: w.Sum, Min: w.Min, Max: w.Max}
		p, ok := out.Panes[k]
		if ok && sameAgg(truth, p) {
			l.WindowsMatched++
			continue
		}
		d := WindowDiff{Key: w.Key, WindowStart: start, Truth: truth}
		if ok {
			pc := p
			d.Final = &pc
		}
		l.WindowsDiffer = append(l.WindowsDiffer, d)
	}
	for k, p := range out.Panes {
		if !seen[k] && (out.Watermark.IsZero() || !p.WindowEnd.After(out.Watermark)) {
			l.PanesWithoutTruth++
		}
	}
	sort.Slice(l.WindowsDiffer, func(i, j int) bool {
		a, b := l.WindowsDiffer[i], l.WindowsDiffer[j]
		if !a.WindowStart.Equal(b.WindowStart) {
			return a.WindowStart.Before(b.WindowStart)
		}
		return a.Key < b.Key
	})
	return l
}

func sameAgg(a event.Agg, p event.Pane) bool {
	if a.Count != p.Count {
		return false
	}
	if a.Count == 0 {
		return true
	}
	return close(a.Sum, p.Sum) && close(a.Min, p.Min) && close(a.Max, p.Max)
}

// close compares within 1e-9 relative (sums of many doubles differ in the
// last bits by summation order).
func close(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// Conserved reports whether every record is accounted for exactly once.
func (l Ledger) Conserved() bool {
	return l.Unaccounted == 0 && len(l.PoisonNotDeadLettered) == 0 && len(l.DeadLetterNoReason) == 0 && !l.LateTopicMismatch
}

// Truthful reports whether every window's final version equals the truth.
func (l Ledger) Truthful() bool { return len(l.WindowsDiffer) == 0 && l.PanesWithoutTruth == 0 }

// Timely reports that no on_time pane claimed its window complete before
// the stream's clock reached window end + out_of_orderness.
func (l Ledger) Timely() bool { return len(l.EarlyOnTime) == 0 }

// Print writes the ledger as a small report.
func (l Ledger) Print(w io.Writer) {
	fmt.Fprintf(w, "ledger %s\n", l.Stream)
	fmt.Fprintf(w, "  produced        %d\n", l.Produced)
	fmt.Fprintf(w, "  accepted        %d\n", l.Accepted)
	fmt.Fprintf(w, "  late output     %d\n", l.Late)
	fmt.Fprintf(w, "  dead-lettered   %d\n", l.DeadLettered)
	fmt.Fprintf(w, "  duplicates      %d\n", l.Duplicates)
	fmt.Fprintf(w, "  unaccounted     %d   (positive: lost, negative: double-counted)\n", l.Unaccounted)
	if len(l.PoisonNotDeadLettered) > 0 {
		fmt.Fprintf(w, "  poison not in the DLQ: %d, e.g. %v\n", len(l.PoisonNotDeadLettered), first(l.PoisonNotDeadLettered, 5))
	}
	if len(l.DeadLetterNoReason) > 0 {
		fmt.Fprintf(w, "  dead letters without a reason: %d\n", len(l.DeadLetterNoReason))
	}
	if l.LateTopicMismatch {
		fmt.Fprintf(w, "  late topic and the operators' late counter disagree\n")
	}
	fmt.Fprintf(w, "  on_time panes   %d, %d fired before window end + out_of_orderness\n", l.OnTime, len(l.EarlyOnTime))
	for _, e := range first(l.EarlyOnTime, 5) {
		fmt.Fprintf(w, "    early: %s\n", e)
	}
	fmt.Fprintf(w, "  windows         %d closed and checked, %d equal to the truth, %d differ, %d panes without truth, %d still open\n",
		l.Windows, l.WindowsMatched, len(l.WindowsDiffer), l.PanesWithoutTruth, l.Open)
	for i, d := range l.WindowsDiffer {
		if i == 5 {
			fmt.Fprintf(w, "    ...\n")
			break
		}
		final := "no pane"
		if d.Final != nil {
			final = fmt.Sprintf("v%d %s count %d sum %g", d.Final.Version, d.Final.Timing, d.Final.Count, d.Final.Sum)
		}
		fmt.Fprintf(w, "    %s %s: truth count %d sum %g, final %s\n", d.Key, d.WindowStart.UTC().Format(time.RFC3339), d.Truth.Count, d.Truth.Sum, final)
	}
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
