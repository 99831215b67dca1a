package zreport

import (
	"bufio"
	"bytes"
	"container/heap"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Line is one JSONL envelope of a Z-report part, as `reckon zreport
// simulate` reads it and `reckon zreport ofd-sim` loads documents: the
// event envelope (docs/requirements.md R-GATE-1) plus a top-level
// arrived_at (the simulated arrival).
type Line struct {
	EventID    string          `json:"event_id"`
	EventType  string          `json:"event_type"`
	OccurredAt string          `json:"occurred_at"`
	ArrivedAt  string          `json:"arrived_at"`
	Data       json.RawMessage `json:"data"`
}

// ParseLine decodes one JSONL line into a part; arrival is the line's
// arrived_at (zero when absent). Numbers keep their exact text, so integer
// fields are checked as integers.
func ParseLine(b []byte) (Part, time.Time, error) {
	var l Line
	if err := json.Unmarshal(b, &l); err != nil {
		return Part{}, time.Time{}, fmt.Errorf("%w: %v", ErrInvalidPart, err)
	}
	var arrived, occurred time.Time
	if l.ArrivedAt != "" {
		t, err := time.Parse(time.RFC3339Nano, l.ArrivedAt)
		if err != nil {
			return Part{}, time.Time{}, fmt.Errorf("%w: arrived_at %q is not RFC 3339", ErrInvalidPart, l.ArrivedAt)
		}
		arrived = t.UTC()
	}
	if l.OccurredAt != "" {
		if t, err := time.Parse(time.RFC3339Nano, l.OccurredAt); err == nil {
			occurred = t
		}
	}
	d := json.NewDecoder(bytes.NewReader(l.Data))
	d.UseNumber()
	var data map[string]any
	if err := d.Decode(&data); err != nil || data == nil {
		return Part{}, time.Time{}, fmt.Errorf("%w: data must be an object", ErrInvalidPart)
	}
	p, err := PartOf(l.EventID, l.EventType, occurred, mapFields(data))
	p.ArrivedAt = arrived
	return p, arrived, err
}

// mapFields serves "data.<name>" paths from a decoded data object.
type mapFields map[string]any

func (m mapFields) get(path string) (any, bool) {
	name, ok := strings.CutPrefix(path, "data.")
	if !ok {
		return nil, false
	}
	v, ok := m[name]
	return v, ok
}

func (m mapFields) String(path string) (string, bool) {
	v, _ := m.get(path)
	s, ok := v.(string)
	return s, ok
}

func (m mapFields) Number(path string) (float64, bool) {
	v, _ := m.get(path)
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

// SimTotals is the last line of a simulation. Parts counts valid input
// parts (duplicates included); matched/mismatched/incomplete count each
// key's latest final version.
type SimTotals struct {
	Type       string `json:"type"` // "totals"
	Parts      int64  `json:"parts"`
	Duplicates int64  `json:"duplicates"`
	Invalid    int64  `json:"invalid"`
	Keys       int64  `json:"keys"`
	Matched    int64  `json:"matched"`
	Mismatched int64  `json:"mismatched"`
	Incomplete int64  `json:"incomplete"`
}

// Simulate runs parts (JSONL, in file order) through the decision code on a
// virtual clock and writes one JSON object per line to out: "state" after
// every applied part before final, "ofd_request" for each request to the
// operator, "final" for every final version, and "totals" last. docs (may
// be nil) are the operator's documents, answered when requested; a key
// without one answers not found.
//
// The clock jumps to each part's arrived_at (never backwards: an earlier
// arrived_at is processed at the current clock), first firing every timer
// due at or before it in order of due time, then fiscal_drive, then shift;
// after the last part it runs on until every key is final. Invalid lines
// are counted and described on errs (may be nil), one line each.
func Simulate(parts, docs io.Reader, out, errs io.Writer, p Policy) (SimTotals, error) {
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		return SimTotals{}, err
	}
	sim := &simulation{p: p, keys: map[Key]*simKey{}, docs: map[Key]Part{}, w: bufio.NewWriter(out)}
	if errs == nil {
		errs = io.Discard
	}
	if docs != nil {
		n := 0
		if err := eachLine(docs, func(b []byte) error {
			n++
			d, _, err := ParseLine(b)
			if err == nil && d.Source != OFD {
				err = fmt.Errorf("%w: source %s is not OFD", ErrInvalidPart, d.Source)
			}
			if err != nil {
				return fmt.Errorf("zreport: ofd documents line %d: %w", n, err)
			}
			sim.docs[d.Key] = d
			return nil
		}); err != nil {
			return SimTotals{}, err
		}
	}
	n := 0
	err := eachLine(parts, func(b []byte) error {
		n++
		part, arrived, err := ParseLine(b)
		if err == nil && arrived.IsZero() {
			err = fmt.Errorf("%w: arrived_at is required", ErrInvalidPart)
		}
		if err != nil {
			sim.totals.Invalid++
			fmt.Fprintf(errs, "line %d: %v\n", n, strings.ReplaceAll(err.Error(), "\n", "; "))
			return nil
		}
		target := sim.now
		if arrived.After(target) {
			target = arrived
		}
		// Timers due at or before the arrival fire first, each at its due
		// time; one already overdue (a deadline before the current clock)
		// fires at the current clock.
		if err := sim.fireUntil(target, false); err != nil {
			return err
		}
		sim.now = target
		return sim.apply(part)
	})
	if err == nil {
		err = sim.fireUntil(time.Time{}, true)
	}
	if err != nil {
		return sim.totals, err
	}
	t := sim.totals
	t.Type = "totals"
	t.Keys = int64(len(sim.order))
	for _, k := range sim.order {
		switch sim.keys[k].st.Status() {
		case StatusMatched:
			t.Matched++
		case StatusMismatched:
			t.Mismatched++
		case StatusIncomplete:
			t.Incomplete++
		}
	}
	sim.emit(t)
	if sim.err == nil {
		sim.err = sim.w.Flush()
	}
	return t, sim.err
}

func eachLine(r io.Reader, f func([]byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if err := f(b); err != nil {
			return err
		}
	}
	return sc.Err()
}

type simKey struct {
	st  *State
	gen int // bumps whenever the key's next timer may have changed
}

type simulation struct {
	p      Policy
	now    time.Time
	keys   map[Key]*simKey
	order  []Key // first-seen order
	docs   map[Key]Part
	timers timerHeap
	totals SimTotals
	w      *bufio.Writer
	err    error
}

func (s *simulation) apply(part Part) error {
	k := s.keys[part.Key]
	if k == nil {
		k = &simKey{st: New(part.Key, s.p)}
		s.keys[part.Key] = k
		s.order = append(s.order, part.Key)
	}
	s.totals.Parts++
	out, err := k.st.Apply(part, s.now)
	if err != nil {
		return err // validated by ParseLine; cannot happen
	}
	if out.Duplicate {
		s.totals.Duplicates++
	}
	s.outcome(k, out)
	return s.err
}

// outcome writes what a step produced and reschedules the key's timer.
func (s *simulation) outcome(k *simKey, out Outcome) {
	if out.Changelog != nil {
		s.emit(simState{"state", k.st.Key.FiscalDrive, k.st.Key.Shift, rfc3339(s.now), out.Changelog.Present,
			out.Changelog.Missing})
	}
	if out.Final != nil {
		s.emit(simFinalOf(out.Final))
	}
	if out.RequestOFD {
		doc, found := s.docs[k.st.Key]
		s.emit(simOFD{"ofd_request", k.st.Key.FiscalDrive, k.st.Key.Shift, rfc3339(s.now), found})
		var d *Part
		if found {
			d = &doc
		}
		next, err := k.st.OFDAnswer(d, s.now)
		if err != nil {
			s.err = err
		}
		s.outcome(k, next)
		return
	}
	k.gen++
	if t, ok := k.st.NextTimer(); ok && t.Kind != TimerClose {
		heap.Push(&s.timers, simTimer{t, k.st.Key, k, k.gen})
	}
}

// fireUntil fires every timer due at or before until (all of them when
// all is set), in (due time, fiscal_drive, shift) order.
func (s *simulation) fireUntil(until time.Time, all bool) error {
	for s.timers.Len() > 0 && s.err == nil {
		t := s.timers[0]
		if !all && t.At.After(until) {
			break
		}
		heap.Pop(&s.timers)
		if t.gen != t.k.gen {
			continue // superseded
		}
		if t.At.After(s.now) {
			s.now = t.At
		}
		s.outcome(t.k, t.k.st.Fire(t.Kind, s.now))
	}
	return s.err
}

func (s *simulation) emit(v any) {
	if s.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		s.err = err
		return
	}
	b = append(b, '\n')
	_, s.err = s.w.Write(b)
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

type simState struct {
	Type        string   `json:"type"`
	FiscalDrive string   `json:"fiscal_drive"`
	Shift       int64    `json:"shift"`
	At          string   `json:"at"`
	Present     []Source `json:"present"`
	Missing     []Source `json:"missing"`
}

type simOFD struct {
	Type        string `json:"type"`
	FiscalDrive string `json:"fiscal_drive"`
	Shift       int64  `json:"shift"`
	At          string `json:"at"`
	Found       bool   `json:"found"`
}

type simFigures struct {
	OFD *Figures `json:"OFD,omitempty"`
	DWH *Figures `json:"DWH,omitempty"`
	RMS *Figures `json:"RMS,omitempty"`
}

type simFinal struct {
	Type        string     `json:"type"`
	FiscalDrive string     `json:"fiscal_drive"`
	Shift       int64      `json:"shift"`
	At          string     `json:"at"`
	Version     int64      `json:"version"`
	Status      Status     `json:"status"`
	Sources     simFigures `json:"sources"`
	Missing     []Source   `json:"missing"`
	Duplicates  Counts     `json:"duplicates"`
}

func simFinalOf(a *Aggregate) simFinal {
	fig := func(f *SourceFigures) *Figures {
		if f == nil {
			return nil
		}
		return &f.Figures
	}
	return simFinal{
		Type: "final", FiscalDrive: a.FiscalDrive, Shift: a.Shift, At: rfc3339(a.FinalizedAt),
		Version: a.Version, Status: a.Status,
		Sources: simFigures{fig(a.Sources.OFD), fig(a.Sources.DWH), fig(a.Sources.RMS)},
		Missing: a.Missing, Duplicates: a.Duplicates,
	}
}

type simTimer struct {
	Timer
	key Key
	k   *simKey
	gen int
}

type timerHeap []simTimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if !a.At.Equal(b.At) {
		return a.At.Before(b.At)
	}
	if a.key.FiscalDrive != b.key.FiscalDrive {
		return a.key.FiscalDrive < b.key.FiscalDrive
	}
	return a.key.Shift < b.key.Shift
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)   { *h = append(*h, x.(simTimer)) }
func (h *timerHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
