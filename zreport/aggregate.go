package zreport

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// SourceFigures are one source's figures in a published record.
type SourceFigures struct {
	Figures
	EventID string `json:"event_id"`
}

// BySource holds the present sources' figures; absent ones are nil and
// left out of JSON.
type BySource struct {
	OFD *SourceFigures `json:"OFD,omitempty"`
	DWH *SourceFigures `json:"DWH,omitempty"`
	RMS *SourceFigures `json:"RMS,omitempty"`
}

// Get returns src's figures or nil.
func (b *BySource) Get(src Source) *SourceFigures {
	switch src {
	case OFD:
		return b.OFD
	case DWH:
		return b.DWH
	case RMS:
		return b.RMS
	}
	return nil
}

func (b *BySource) set(src Source, f *SourceFigures) {
	switch src {
	case OFD:
		b.OFD = f
	case DWH:
		b.DWH = f
	case RMS:
		b.RMS = f
	}
}

// Counts is a counter per source.
type Counts struct {
	OFD int64 `json:"OFD"`
	DWH int64 `json:"DWH"`
	RMS int64 `json:"RMS"`
}

// Get returns src's count.
func (c Counts) Get(src Source) int64 {
	switch src {
	case OFD:
		return c.OFD
	case DWH:
		return c.DWH
	case RMS:
		return c.RMS
	}
	return 0
}

func (c *Counts) set(src Source, n int64) {
	switch src {
	case OFD:
		c.OFD = n
	case DWH:
		c.DWH = n
	case RMS:
		c.RMS = n
	}
}

// Sum returns the total over the three sources.
func (c Counts) Sum() int64 { return c.OFD + c.DWH + c.RMS }

// Difference is one figure of a source that differs from the reference
// source (OFD, the primary document, when present).
type Difference struct {
	Source    Source  `json:"source"`
	Reference Source  `json:"reference"`
	Field     string  `json:"field"` // receipts_count or total_amount
	Value     float64 `json:"value"`
	Expected  float64 `json:"expected"`
	Delta     float64 `json:"delta"` // Value - Expected
}

// Aggregate is one final version of a key: the value of the complete topic
// (keyed by Key.String(), compacted) and a row of the lake's zreports table.
// Consumers keep the highest Version per key.
type Aggregate struct {
	FiscalDrive   string    `json:"fiscal_drive"`
	Shift         int64     `json:"shift"`
	Version       int64     `json:"version"`
	Status        Status    `json:"status"`
	ShiftClosedAt time.Time `json:"shift_closed_at"`
	FinalizedAt   time.Time `json:"finalized_at"`
	// Reason says what finalized this version.
	Reason      string       `json:"reason"`
	Sources     BySource     `json:"sources"`
	Missing     []Source     `json:"missing"`
	Duplicates  Counts       `json:"duplicates"`
	Corrections Counts       `json:"corrections"`
	Differences []Difference `json:"differences"`
}

// Key returns the aggregate's business key.
func (a *Aggregate) Key() Key { return Key{a.FiscalDrive, a.Shift} }

// CloseDate is the lake partition of the aggregate: shift_closed_at's UTC
// date, YYYY-MM-DD.
func (a *Aggregate) CloseDate() string { return a.ShiftClosedAt.UTC().Format(time.DateOnly) }

func (s *State) bySource() BySource {
	var b BySource
	for i := range s.Sources {
		if src := &s.Sources[i]; src.Present {
			b.set(src.Source, &SourceFigures{Figures: src.Figures, EventID: src.EventID})
		}
	}
	return b
}

func (s *State) counts(f func(*SourceState) int64) Counts {
	var c Counts
	for i := range s.Sources {
		c.set(s.Sources[i].Source, f(&s.Sources[i]))
	}
	return c
}

func (s *State) aggregate(now time.Time, reason string) Aggregate {
	a := Aggregate{
		FiscalDrive: s.Key.FiscalDrive, Shift: s.Key.Shift, Version: s.Version,
		ShiftClosedAt: s.ShiftClosedAt, FinalizedAt: now, Reason: reason,
		Sources:     s.bySource(),
		Missing:     s.Missing(),
		Duplicates:  s.counts(func(x *SourceState) int64 { return x.Duplicates }),
		Corrections: s.counts(func(x *SourceState) int64 { return x.Corrections }),
		Differences: s.differences(),
	}
	if s.complete() {
		a.Status = compare([3]Figures{s.Sources[0].Figures, s.Sources[1].Figures, s.Sources[2].Figures})
	} else {
		a.Status = StatusIncomplete
	}
	return a
}

// differences compares every present source with the reference: OFD when
// present, else the first present source. When all are within tolerance of
// the reference but not of each other (two totals 0.004 either side of
// OFD's), the pairs among the others are compared too, so a mismatch is
// always explained.
func (s *State) differences() []Difference {
	out := []Difference{}
	var present []*SourceState
	for i := range s.Sources {
		if s.Sources[i].Present {
			present = append(present, &s.Sources[i])
		}
	}
	diff := func(x, r *SourceState) {
		if x.Receipts != r.Receipts {
			out = append(out,
				Difference{x.Source, r.Source, "receipts_count", float64(x.Receipts), float64(r.Receipts),
					float64(x.Receipts - r.Receipts)})
		}
		if d := x.Total - r.Total; math.Abs(d) > Tolerance+1e-9 {
			out = append(out, Difference{x.Source, r.Source, "total_amount", x.Total, r.Total, math.Round(d*1e6) / 1e6})
		}
	}
	for _, x := range present[min(1, len(present)):] {
		diff(x, present[0])
	}
	if len(out) == 0 {
		for i := 1; i < len(present); i++ {
			for _, x := range present[i+1:] {
				diff(x, present[i])
			}
		}
	}
	return out
}

// Changelog is one entry of the incomplete topic (keyed by Key.String(),
// compacted): the state of a key still waiting, after each applied part.
// Finalization writes a tombstone for the key there.
type Changelog struct {
	FiscalDrive string    `json:"fiscal_drive"`
	Shift       int64     `json:"shift"`
	Seq         int64     `json:"seq"`
	At          time.Time `json:"at"`
	Status      Status    `json:"status"`
	Cause       string    `json:"cause"`
	Present     []Source  `json:"present"`
	Missing     []Source  `json:"missing"`
	Sources     BySource  `json:"sources"`
	// Parts counts applied parts per source (first part and corrections).
	Parts         Counts    `json:"parts"`
	Duplicates    Counts    `json:"duplicates"`
	Corrections   Counts    `json:"corrections"`
	ShiftClosedAt time.Time `json:"shift_closed_at"`
	Deadlines     Deadlines `json:"deadlines"`
	OFDRequests   int64     `json:"ofd_requests"`
}

// Key returns the changelog's business key.
func (c *Changelog) Key() Key { return Key{c.FiscalDrive, c.Shift} }

func (s *State) changelog(now time.Time, cause string) Changelog {
	return Changelog{
		FiscalDrive: s.Key.FiscalDrive, Shift: s.Key.Shift, Seq: s.Seq, At: now,
		Status: StatusWaiting, Cause: cause,
		Present: s.Present(), Missing: s.Missing(), Sources: s.bySource(),
		Parts: s.counts(func(x *SourceState) int64 {
			if !x.Present {
				return 0
			}
			return 1 + x.Corrections
		}),
		Duplicates:    s.counts(func(x *SourceState) int64 { return x.Duplicates }),
		Corrections:   s.counts(func(x *SourceState) int64 { return x.Corrections }),
		ShiftClosedAt: s.ShiftClosedAt,
		Deadlines:     s.Deadlines(),
		OFDRequests:   s.OFD.Requests,
	}
}

// Restore rebuilds the state of a key from its latest published version,
// for an entity started again after its earlier run ended (a part that
// arrives after the retention). Versions continue from a.Version. The ids
// seen before the latest parts are not in an Aggregate, so only a
// redelivery of a current part is recognized as a duplicate.
func Restore(a *Aggregate, p Policy) (*State, error) {
	k := a.Key()
	if err := k.Validate(); err != nil {
		return nil, err
	}
	if a.Version < 1 {
		return nil, fmt.Errorf("zreport: restore %s: version %d", k, a.Version)
	}
	s := New(k, p)
	s.ShiftClosedAt = a.ShiftClosedAt.UTC()
	s.Version = a.Version
	s.LastChangeAt = a.FinalizedAt.UTC()
	final := *a
	s.Final = &final
	for i := range s.Sources {
		src := &s.Sources[i]
		src.Duplicates = a.Duplicates.Get(src.Source)
		src.Corrections = a.Corrections.Get(src.Source)
		if f := a.Sources.Get(src.Source); f != nil {
			src.Present = true
			src.EventID, src.Figures, src.ShiftClosedAt = f.EventID, f.Figures, s.ShiftClosedAt
			src.AppliedAt = s.LastChangeAt
			src.Origin = "restored"
			src.Seen = []string{f.EventID}
		}
	}
	return s, nil
}

// View is the answer to the workflow's state query: the state plus what an
// operator wants first.
type View struct {
	WorkflowID string    `json:"workflow_id"`
	Status     Status    `json:"status"`
	Version    int64     `json:"version"`
	Present    []Source  `json:"present"`
	Missing    []Source  `json:"missing"`
	Deadlines  Deadlines `json:"deadlines"`
	State      *State    `json:"state"`
}

// View returns s's view.
func (s *State) View() View {
	return View{
		WorkflowID: s.Key.WorkflowID(), Status: s.Status(), Version: s.Version,
		Present: s.Present(), Missing: s.Missing(), Deadlines: s.Deadlines(), State: s,
	}
}

// Summary is a one-line description for the Temporal UI: the status and,
// when any, the missing sources by name ("waiting for OFD; present DWH,
// POS"; "incomplete v1, missing OFD").
func (s *State) Summary() string {
	st := s.Status()
	head := fmt.Sprintf("Z-report ФН %s shift %d: ", s.Key.FiscalDrive, s.Key.Shift)
	missing := joinSources(s.Missing())
	if st == StatusWaiting {
		return head + fmt.Sprintf("waiting for %s; present %s", missing, joinSources(s.Present()))
	}
	if missing == "none" {
		return head + fmt.Sprintf("%s v%d", st, s.Version)
	}
	return head + fmt.Sprintf("%s v%d, missing %s", st, s.Version, missing)
}

// joinSources lists sources by name, "none" for none.
func joinSources(srcs []Source) string {
	if len(srcs) == 0 {
		return "none"
	}
	out := make([]string, len(srcs))
	for i, x := range srcs {
		out[i] = string(x)
	}
	return strings.Join(out, ", ")
}
