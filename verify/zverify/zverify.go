// Package zverify checks the Z-report path's outcome against a fiscal
// generator run's manifest (generate.Manifest.ZReports): every business
// key's latest final version — read from the complete topic or from the
// lake's zreports table — has the status the manifest expects once the
// operator's documents are requested (StatusWithOperator), the sources and
// figures of the parts applied last, and no more duplicates than the
// generator sent; every poison part is in the dead-letter topic, and
// nothing else from the parts topic is.
//
// It serves the end-to-end checks (workers' TestZReportGeneratorShifts,
// tools/outages), which read real topics and lakes; it is not for
// production code.
package zverify

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/activities"
	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
	"reckon/lake"
	"reckon/verify/generate"
	"reckon/zreport"
)

// Final is a key's latest final version.
type Final struct {
	Aggregate *zreport.Aggregate
	// At is when the version reached the complete topic (the record's
	// timestamp); zero when read from the lake.
	At time.Time
}

// Finals is the latest final version per business key
// (zreport.Key.String(): fiscal_drive/shift). Not safe for concurrent use.
type Finals map[string]Final

// Add folds one record of the complete topic: its aggregate replaces the
// key's when its version is higher. A version published again (a retried
// publication: the same value) keeps the earlier At, when it first
// reached the topic.
func (f Finals) Add(r *kgo.Record) error {
	var a zreport.Aggregate
	if err := json.Unmarshal(r.Value, &a); err != nil {
		return fmt.Errorf("zverify: complete topic %d/%d: %w", r.Partition, r.Offset, err)
	}
	k := a.Key().String()
	cur, ok := f[k]
	switch {
	case !ok || a.Version > cur.Aggregate.Version:
		f[k] = Final{&a, r.Timestamp}
	case a.Version == cur.Aggregate.Version && r.Timestamp.Before(cur.At):
		f[k] = Final{cur.Aggregate, r.Timestamp}
	}
	return nil
}

// ReadComplete reads the complete topic (cfg.Topics.ZReportComplete) up to
// its last stable offset, as a read-committed consumer with the client id
// role.
func ReadComplete(ctx context.Context, cfg *config.Config, role string) (Finals, error) {
	f := Finals{}
	err := kafkaconn.ReadTopic(ctx, cfg.Kafka, role, cfg.Topics.ZReportComplete, f.Add)
	return f, err
}

// ReadLake reads the latest version of each of m's keys from the lake's
// zreports table; a key without a file is absent.
func ReadLake(ctx context.Context, lk *lake.Lake, m *generate.Manifest) (Finals, error) {
	f := Finals{}
	for _, z := range m.ZReports {
		closed, err := time.Parse(generate.TimeLayout, z.ShiftClosedAt)
		if err != nil {
			return nil, fmt.Errorf("zverify: manifest %s/%d: shift_closed_at %q: %w", z.FiscalDrive, z.Shift, z.ShiftClosedAt, err)
		}
		a, err := activities.ReadLatestZReport(ctx, lk, zreport.Key{FiscalDrive: z.FiscalDrive, Shift: int64(z.Shift)}, closed)
		if err != nil {
			return nil, err
		}
		if a != nil {
			f[a.Key().String()] = Final{Aggregate: a}
		}
	}
	return f, nil
}

// Key is the manifest entry's business key as Finals names it.
func Key(z generate.ZReport) string { return z.FiscalDrive + "/" + strconv.Itoa(z.Shift) }

// Result is the comparison of Finals with a manifest.
type Result struct {
	Keys      int // business keys the manifest plans
	Finalized int // of them, with a final version
	// Settled: finalized with the expected status (Problems may still
	// name their figures).
	Settled int
	// ByStatus counts the keys by their latest final's status ("" when
	// none); Expected by the manifest's StatusWithOperator.
	ByStatus, Expected map[string]int
	// Duplicates counted by the latest finals, and sent by the generator.
	// Fewer may be counted (a redelivery after a key's last version makes
	// no new version), never more.
	Duplicates, PlannedDuplicates int64
	// Last is the latest At among the keys' latest finals.
	Last time.Time
	// Problems, sorted: one line per key that differs from the manifest.
	Problems []string
}

// Check compares got with m's expected final states.
func Check(m *generate.Manifest, got Finals) Result {
	r := Result{Keys: len(m.ZReports), ByStatus: map[string]int{}, Expected: map[string]int{}}
	for _, z := range m.ZReports {
		k := Key(z)
		r.Expected[z.StatusWithOperator]++
		for _, n := range z.Duplicates {
			r.PlannedDuplicates += int64(n)
		}
		f, ok := got[k]
		if !ok {
			r.ByStatus[""]++
			r.Problems = append(r.Problems, fmt.Sprintf("%s: no final version (expected %s)", k, z.StatusWithOperator))
			continue
		}
		a := f.Aggregate
		r.Finalized++
		r.ByStatus[string(a.Status)]++
		r.Duplicates += a.Duplicates.Sum()
		if f.At.After(r.Last) {
			r.Last = f.At
		}
		if string(a.Status) != z.StatusWithOperator {
			r.Problems = append(r.Problems, fmt.Sprintf("%s: latest final %s (v%d, %s), expected %s", k, a.Status, a.Version, a.Reason, z.StatusWithOperator))
			continue
		}
		r.Settled++
		if p := figuresProblem(z, a); p != "" {
			r.Problems = append(r.Problems, fmt.Sprintf("%s: v%d %s", k, a.Version, p))
		}
	}
	slices.Sort(r.Problems)
	return r
}

// figuresProblem says how a's sources differ from the parts the manifest
// applied last (the operator's document standing in for a withheld OFD
// part), or counted more duplicates than were sent; "" when they agree.
func figuresProblem(z generate.ZReport, a *zreport.Aggregate) string {
	var bad []string
	for _, s := range generate.Sources {
		want, ok := z.Sources[s]
		if !ok && s == generate.SourceOFD && z.OperatorDocument != nil {
			want, ok = *z.OperatorDocument, true
		}
		got := a.Sources.Get(zreport.Source(s))
		switch {
		case ok && got == nil:
			bad = append(bad, s+" missing (a part lost)")
		case !ok && got != nil:
			bad = append(bad, s+" present, the generator sent none")
		case ok && (got.Receipts != int64(want.Receipts) || math.Abs(got.Total-want.Total) >= zreport.Tolerance):
			bad = append(bad, fmt.Sprintf("%s figures %d/%.2f, expected %d/%.2f", s, got.Receipts, got.Total, want.Receipts, want.Total))
		case ok && s != generate.SourceOFD && want.EventID != "" && got.EventID != want.EventID:
			// OFD's is not compared: the operator's document, requested
			// while the part was late, may be applied after it.
			bad = append(bad, fmt.Sprintf("%s part %s applied last, expected %s", s, got.EventID, want.EventID))
		}
		if n := a.Duplicates.Get(zreport.Source(s)); n > int64(z.Duplicates[s]) {
			bad = append(bad, fmt.Sprintf("%s %d duplicates counted, %d sent", s, n, z.Duplicates[s]))
		}
	}
	return strings.Join(bad, "; ")
}

// Err is nil when every key is finalized as the manifest expects.
func (r Result) Err() error {
	if len(r.Problems) == 0 {
		return nil
	}
	return fmt.Errorf("zverify: %d of %d keys differ from the manifest, e.g. %s", len(r.Problems), r.Keys, strings.Join(r.Problems[:min(5, len(r.Problems))], "; "))
}

// String summarises r on one line.
func (r Result) String() string {
	return fmt.Sprintf("%d keys, %d finalized, %d with the expected status; latest finals %v, expected %v; duplicates counted %d of %d sent",
		r.Keys, r.Finalized, r.Settled, r.ByStatus, r.Expected, r.Duplicates, r.PlannedDuplicates)
}

// DeadLetters is the dead-letter topic's account of a run's parts.
type DeadLetters struct {
	Poison int // poison parts the generator produced (with an offset)
	// Dead: distinct parts of the run's topic in the dead-letter topic;
	// Repeats: further dead letters for a part already counted.
	Dead, Repeats int
	// Problems, sorted: poison not dead-lettered, dead letters not poison.
	Problems []string
}

// Err is nil when exactly the poison parts are dead-lettered.
func (d DeadLetters) Err() error {
	if len(d.Problems) == 0 {
		return nil
	}
	return fmt.Errorf("zverify: %d dead-letter problem(s), e.g. %s", len(d.Problems), strings.Join(d.Problems[:min(5, len(d.Problems))], "; "))
}

// ReadDeadLetters reads the dead-letter topic (cfg.Topics.DLQ) and matches
// its records from m's topic against m's poison parts by partition and
// offset. Dead letters of other topics (a stream's) are ignored.
func ReadDeadLetters(ctx context.Context, cfg *config.Config, role string, m *generate.Manifest) (DeadLetters, error) {
	var d DeadLetters
	poison := map[string]bool{}
	for _, e := range m.Listed {
		if e.Category == generate.Poison && e.Partition != nil && e.Offset != nil {
			poison[fmt.Sprintf("%d/%d", *e.Partition, *e.Offset)] = true
		}
	}
	d.Poison = len(poison)
	seen := map[string]bool{}
	err := kafkaconn.ReadTopic(ctx, cfg.Kafka, role, cfg.Topics.DLQ, func(r *kgo.Record) error {
		h := map[string]string{}
		for _, x := range r.Headers {
			h[x.Key] = string(x.Value)
		}
		if h[event.HeaderSourceTopic] != m.Topic {
			return nil
		}
		src := h[event.HeaderSourcePartition] + "/" + h[event.HeaderSourceOffset]
		if seen[src] {
			d.Repeats++
			return nil
		}
		seen[src] = true
		d.Dead++
		if !poison[src] {
			d.Problems = append(d.Problems, fmt.Sprintf("%s/%s dead-lettered, not poison", m.Topic, src))
		}
		return nil
	})
	if err != nil {
		return d, err
	}
	for src := range poison {
		if !seen[src] {
			d.Problems = append(d.Problems, fmt.Sprintf("poison %s/%s not dead-lettered", m.Topic, src))
		}
	}
	slices.Sort(d.Problems)
	return d, nil
}
