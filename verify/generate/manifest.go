package generate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"reckon/internal/event"
)

// Manifest is the account of a finite generator run, for checks such as
// the conservation ledger: what was produced, by category, and what the
// right answers are.
//
// Every record is accounted for exactly once: Counts.ByCategory sums to
// Counts.Records; every record that is not on_time is listed in Listed with
// its sequence number (its JSONL line when every record is JSON, its
// production order always) and, when it went to Kafka, its partition and
// offset. On-time records are counted, not listed. The truth covers valid
// unique events only (every category whose Valid is true; redeliveries and
// poison are excluded).
type Manifest struct {
	Scenario Scenario `json:"scenario"`
	Seed     int64    `json:"seed"`
	// Command is the command line that produced the run, when known.
	Command []string    `json:"command,omitempty"`
	Options OptionsJSON `json:"options"`
	Topic   string      `json:"topic"`
	// Complete is false when the run stopped before Count records.
	Complete     bool   `json:"complete"`
	FirstArrival string `json:"first_arrival,omitempty"`
	LastArrival  string `json:"last_arrival,omitempty"`
	Counts       Counts `json:"counts"`
	// Listed: every record that is not on_time, in Seq order.
	Listed []Entry `json:"listed"`
	// Truth per (stream, key, window_start) over valid unique events, with
	// the stream's configured window (sensors, payments).
	Truth []Window `json:"truth,omitempty"`
	// ZReports: expected final state per business key (fiscal).
	ZReports      []ZReport `json:"zreports,omitempty"`
	ZReportTotals *ZTotals  `json:"zreport_totals,omitempty"`
}

// OptionsJSON is Options as written in a manifest.
type OptionsJSON struct {
	Scenario               Scenario     `json:"scenario"`
	Seed                   int64        `json:"seed"`
	IDNonce                uint64       `json:"id_nonce,omitempty"`
	FirstKey               int64        `json:"first_key,omitempty"`
	Start                  string       `json:"start"`
	Count                  int64        `json:"count"`
	Rate                   float64      `json:"rate"`
	Keys                   int          `json:"keys"`
	KeyPrefix              string       `json:"key_prefix,omitempty"`
	LateFraction           float64      `json:"late_fraction"`
	DelayDist              string       `json:"delay_dist"`
	BeyondLatenessFraction float64      `json:"beyond_lateness_fraction"`
	DuplicateFraction      float64      `json:"duplicate_fraction"`
	RedeliveryDelay        string       `json:"redelivery_delay"`
	PoisonFraction         float64      `json:"poison_fraction"`
	PoisonKinds            []PoisonKind `json:"poison_kinds"`
	OversizedShare         float64      `json:"oversized_share,omitempty"`
	SkewFraction           float64      `json:"skew_fraction"`
	MismatchFraction       float64      `json:"mismatch_fraction"`
	MissingFraction        float64      `json:"missing_fraction"`
	CorrectionFraction     float64      `json:"correction_fraction"`
	OFDDelay               string       `json:"ofd_delay"`
	PartDelay              string       `json:"part_delay"`
	Topic                  string       `json:"topic"`
	Stream                 string       `json:"stream,omitempty"`
	Window                 string       `json:"window,omitempty"`
	OutOfOrderness         string       `json:"out_of_orderness,omitempty"`
	AllowedLateness        string       `json:"allowed_lateness,omitempty"`
	MaxFutureSkew          string       `json:"max_future_skew"`
	MaxPayloadBytes        int          `json:"max_payload_bytes"`
}

func optionsJSON(o Options) OptionsJSON {
	j := OptionsJSON{
		Scenario: o.Scenario, Seed: o.Seed, IDNonce: o.IDNonce, FirstKey: o.FirstKey, Start: fmtTime(o.Start), Count: o.Count, Rate: o.Rate, Keys: o.Keys,
		KeyPrefix:    o.KeyPrefix,
		LateFraction: o.LateFraction, DelayDist: o.Delay.String(), BeyondLatenessFraction: o.BeyondLatenessFraction,
		DuplicateFraction: o.DuplicateFraction, RedeliveryDelay: o.RedeliveryDelay.String(),
		PoisonFraction: o.PoisonFraction, PoisonKinds: o.PoisonKinds, OversizedShare: o.OversizedShare,
		SkewFraction:     o.SkewFraction,
		MismatchFraction: o.MismatchFraction, MissingFraction: o.MissingFraction, CorrectionFraction: o.CorrectionFraction,
		OFDDelay: o.OFDDelay.String(), PartDelay: o.PartDelay.String(),
		Topic: o.Target.Topic, Stream: o.Target.Stream,
		MaxFutureSkew: o.Target.MaxFutureSkew.String(), MaxPayloadBytes: o.Target.MaxPayloadBytes,
	}
	if o.Scenario != Fiscal {
		j.Window, j.OutOfOrderness, j.AllowedLateness = o.Target.Window.String(), o.Target.OutOfOrderness.String(), o.Target.AllowedLateness.String()
	}
	return j
}

// Counts are the manifest's tallies.
type Counts struct {
	// Records produced, every category.
	Records int64 `json:"records"`
	// JSONLRecords: those that are JSON objects, i.e. the lines of --out.
	JSONLRecords int64 `json:"jsonl_records"`
	// ValidUnique: valid records excluding redeliveries (the truth's input).
	ValidUnique int64 `json:"valid_unique"`
	// ByCategory sums to Records.
	ByCategory map[Category]int64 `json:"by_category"`
	// PoisonByKind counts poison per kind and the field the gate is
	// expected to name.
	PoisonByKind map[PoisonKind]map[string]int64 `json:"poison_by_kind"`
}

// Entry is one listed record.
type Entry struct {
	Seq      int64    `json:"seq"`
	Category Category `json:"category"`
	EventID  string   `json:"event_id,omitempty"`
	Key      string   `json:"key"`
	// OccurredAt as written (absent when the record has none).
	OccurredAt string `json:"occurred_at,omitempty"`
	ArrivedAt  string `json:"arrived_at"`
	// Poison only: the kind and the field the gate is expected to name.
	Kind  PoisonKind `json:"kind,omitempty"`
	Field *string    `json:"field,omitempty"`
	// JSONL is false for records that are not JSON (Kafka only).
	JSONL bool `json:"jsonl"`
	// Partition and Offset once produced to Kafka.
	Partition *int32 `json:"partition,omitempty"`
	Offset    *int64 `json:"offset,omitempty"`
}

// Window is the truth of one (stream, key, window).
type Window struct {
	Stream      string  `json:"stream"`
	Key         string  `json:"key"`
	WindowStart string  `json:"window_start"`
	WindowEnd   string  `json:"window_end"`
	Count       int64   `json:"count"`
	Sum         float64 `json:"sum"`
	Min         float64 `json:"min"`
	Max         float64 `json:"max"`
}

// Figures are one source's receipt count and total.
type Figures struct {
	Receipts int     `json:"receipts"`
	Total    float64 `json:"total"`
	EventID  string  `json:"event_id,omitempty"`
}

// ZReport is the expected final state of one business key, applying issue
// 6's rules to the parts in arrival order: a redelivery (same event_id) is
// counted, not applied; a new event_id from a source replaces its figures.
type ZReport struct {
	FiscalDrive   string `json:"fiscal_drive"`
	Shift         int    `json:"shift"`
	ShiftClosedAt string `json:"shift_closed_at"`
	// Sources: the final figures per present source.
	Sources map[string]Figures `json:"sources"`
	// Parts applied per source (a correction makes 2); Duplicates counted.
	Parts       map[string]int `json:"parts"`
	Duplicates  map[string]int `json:"duplicates"`
	Corrections int            `json:"corrections"`
	Present     []string       `json:"present"`
	Missing     []string       `json:"missing"`
	// Status from the parts alone: matched, mismatched or incomplete.
	Status string `json:"status"`
	// OperatorDocument is what the OFD operator serves on request when the
	// OFD part never came; StatusWithOperator is the status once it is
	// applied (still incomplete when DWH or RMS is missing too).
	OperatorDocument   *Figures `json:"operator_document,omitempty"`
	StatusWithOperator string   `json:"status_with_operator"`
	LastArrival        string   `json:"last_arrival"`
}

// ZTotals counts business keys by expected status.
type ZTotals struct {
	Keys       int `json:"keys"`
	Matched    int `json:"matched"`
	Mismatched int `json:"mismatched"`
	Incomplete int `json:"incomplete"`
	// WithOperator: the same after the OFD documents are requested.
	WithOperator map[string]int `json:"with_operator"`
}

// Recorder folds records into a Manifest. Add must be called in Seq order
// from one goroutine; Acked may be called from any goroutine (a producer's
// callbacks). Memory grows with the listed records and the truth, so use it
// for finite runs only.
type Recorder struct {
	g *Generator
	m Manifest

	aggs  map[windowID]*event.Agg
	zkeys map[string]*zstate

	mu sync.Mutex // protects following fields
	// bySeq finds a listed entry for Acked.
	bySeq map[int64]int
}

type windowID struct {
	stream, key string
	start       int64 // unix ms
}

type zstate struct {
	part     Part // for drive/shift/close
	sources  map[string]Figures
	kopeks   map[string]int64
	parts    map[string]int
	dups     map[string]int
	ids      map[string]bool
	corr     int
	lastSeen time.Time
}

// NewRecorder returns a recorder for g's run.
func NewRecorder(g *Generator) *Recorder {
	o := g.Options()
	return &Recorder{
		g: g,
		m: Manifest{
			Scenario: o.Scenario, Seed: o.Seed, Options: optionsJSON(o), Topic: o.Target.Topic,
			Counts: Counts{ByCategory: map[Category]int64{}, PoisonByKind: map[PoisonKind]map[string]int64{}},
			Listed: []Entry{},
		},
		aggs:  map[windowID]*event.Agg{},
		zkeys: map[string]*zstate{},
		bySeq: map[int64]int{},
	}
}

// Add accounts for r.
func (rc *Recorder) Add(r Record) {
	m := &rc.m
	at := fmtTime(r.Arrival)
	if m.FirstArrival == "" {
		m.FirstArrival = at
	}
	m.LastArrival = at
	m.Counts.Records++
	if r.JSON {
		m.Counts.JSONLRecords++
	}
	m.Counts.ByCategory[r.Category]++
	if r.Category.Valid() {
		m.Counts.ValidUnique++
	}
	if r.Category == Poison {
		byField := m.Counts.PoisonByKind[r.Poison]
		if byField == nil {
			byField = map[string]int64{}
			m.Counts.PoisonByKind[r.Poison] = byField
		}
		byField[r.Field]++
	}
	if r.Category != OnTime {
		e := Entry{Seq: r.Seq, Category: r.Category, EventID: r.EventID, Key: string(r.Key), ArrivedAt: at, JSONL: r.JSON}
		if !r.EventTime.IsZero() {
			e.OccurredAt = fmtTime(r.EventTime)
		}
		if r.Category == Poison {
			f := r.Field
			e.Kind, e.Field = r.Poison, &f
		}
		rc.mu.Lock()
		rc.bySeq[r.Seq] = len(m.Listed)
		m.Listed = append(m.Listed, e)
		rc.mu.Unlock()
	}
	switch {
	case r.Part != nil && (r.Category.Valid() || r.Category == Duplicate):
		rc.addPart(r)
	case r.Category.Valid() && r.Stream != "":
		w := rc.g.o.Target.Window
		rc.add(windowID{r.Stream, r.KeyName, r.EventTime.UTC().Truncate(w).UnixMilli()}, r.Measure)
		for _, ts := range rc.g.o.Target.Also {
			// Every window covering the event: starting in (et − window, et].
			hop := ts.Hop
			if hop <= 0 || hop > ts.Window {
				hop = ts.Window
			}
			last := r.EventTime.UTC().Truncate(hop)
			for s := last.Add(hop - ts.Window); !s.After(last); s = s.Add(hop) {
				rc.add(windowID{ts.Stream, r.KeyName, s.UnixMilli()}, r.Measure)
			}
		}
	}
}

func (rc *Recorder) add(id windowID, v float64) {
	a := rc.aggs[id]
	if a == nil {
		a = &event.Agg{}
		rc.aggs[id] = a
	}
	a.Add(v)
}

func (rc *Recorder) addPart(r Record) {
	p := r.Part
	k := p.BusinessKey()
	z := rc.zkeys[k]
	if z == nil {
		z = &zstate{part: *p, sources: map[string]Figures{}, kopeks: map[string]int64{}, parts: map[string]int{}, dups: map[string]int{}, ids: map[string]bool{}}
		rc.zkeys[k] = z
	}
	z.lastSeen = r.Arrival
	if z.ids[r.EventID] {
		z.dups[p.Source]++
		return
	}
	z.ids[r.EventID] = true
	if _, ok := z.sources[p.Source]; ok {
		z.corr++
	}
	z.parts[p.Source]++
	z.sources[p.Source] = Figures{Receipts: p.Receipts, Total: p.Total(), EventID: r.EventID}
	z.kopeks[p.Source] = p.TotalKopeks
}

// Acked records where a listed record landed on Kafka.
func (rc *Recorder) Acked(seq int64, partition int32, offset int64) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if i, ok := rc.bySeq[seq]; ok {
		rc.m.Listed[i].Partition, rc.m.Listed[i].Offset = &partition, &offset
	}
}

// Manifest finishes the account. complete says whether the run produced
// every record it was asked for; command is the command line, if any.
func (rc *Recorder) Manifest(complete bool, command []string) *Manifest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	m := rc.m
	m.Complete, m.Command = complete, command
	m.Listed = slices.Clone(rc.m.Listed)
	windows := map[string]time.Duration{rc.g.o.Target.Stream: rc.g.o.Target.Window}
	for _, ts := range rc.g.o.Target.Also {
		windows[ts.Stream] = ts.Window
	}
	m.Truth = nil
	for id, a := range rc.aggs {
		start := time.UnixMilli(id.start).UTC()
		w := windows[id.stream]
		m.Truth = append(m.Truth, Window{
			Stream: id.stream, Key: id.key, WindowStart: fmtTime(start), WindowEnd: fmtTime(start.Add(w)),
			Count: a.Count, Sum: a.Sum, Min: a.Min, Max: a.Max,
		})
	}
	slices.SortFunc(m.Truth, func(a, b Window) int {
		return cmpChain(strings.Compare(a.Stream, b.Stream), strings.Compare(a.Key, b.Key), strings.Compare(a.WindowStart, b.WindowStart))
	})
	if rc.g.o.Scenario == Fiscal {
		m.ZReports = nil
		t := &ZTotals{WithOperator: map[string]int{}}
		for _, z := range rc.zkeys {
			zr := ZReport{
				FiscalDrive: z.part.FiscalDrive, Shift: z.part.Shift, ShiftClosedAt: fmtTime(z.part.ClosedAt),
				Sources: z.sources, Parts: z.parts, Duplicates: z.dups, Corrections: z.corr,
				Present: []string{}, Missing: []string{}, LastArrival: fmtTime(z.lastSeen),
			}
			for _, s := range Sources {
				if _, ok := z.sources[s]; ok {
					zr.Present = append(zr.Present, s)
				} else {
					zr.Missing = append(zr.Missing, s)
				}
			}
			zr.Status = zstatus(z.kopeks, z.sources)
			zr.StatusWithOperator = zr.Status
			if _, ok := z.sources[SourceOFD]; !ok {
				if doc, ok := rc.g.OFDDocument(z.part.FiscalDrive, z.part.Shift); ok {
					zr.OperatorDocument = &Figures{Receipts: doc.Receipts, Total: doc.Total()}
					src := maps.Clone(z.sources)
					kop := maps.Clone(z.kopeks)
					src[SourceOFD], kop[SourceOFD] = *zr.OperatorDocument, doc.TotalKopeks
					zr.StatusWithOperator = zstatus(kop, src)
				}
			}
			t.Keys++
			switch zr.Status {
			case "matched":
				t.Matched++
			case "mismatched":
				t.Mismatched++
			default:
				t.Incomplete++
			}
			t.WithOperator[zr.StatusWithOperator]++
			m.ZReports = append(m.ZReports, zr)
		}
		slices.SortFunc(m.ZReports, func(a, b ZReport) int {
			return cmpChain(strings.Compare(a.FiscalDrive, b.FiscalDrive), a.Shift-b.Shift)
		})
		m.ZReportTotals = t
	}
	return &m
}

func cmpChain(cs ...int) int {
	for _, c := range cs {
		if c != 0 {
			return c
		}
	}
	return 0
}

// zstatus applies the rule of docs/requirements.md R-Z-3 and R-Z-6: all
// three sources present, then matched
// when receipts are equal and totals equal within 0.005 (kopeks equal).
func zstatus(kopeks map[string]int64, src map[string]Figures) string {
	for _, s := range Sources {
		if _, ok := src[s]; !ok {
			return "incomplete"
		}
	}
	o, d, r := src[SourceOFD], src[SourceDWH], src[SourceRMS]
	if o.Receipts == d.Receipts && o.Receipts == r.Receipts && kopeks[SourceOFD] == kopeks[SourceDWH] && kopeks[SourceOFD] == kopeks[SourceRMS] {
		return "matched"
	}
	return "mismatched"
}

// WriteTo writes m as JSON: the header indented, the lists one element per
// line so a manifest stays greppable. It is ordinary JSON; ReadManifest (or
// any JSON decoder) reads it back.
func (m *Manifest) WriteTo(w io.Writer) (int64, error) {
	head := *m
	head.Listed, head.Truth, head.ZReports = nil, nil, nil
	b, err := json.MarshalIndent(head, "", "  ")
	if err != nil {
		return 0, fmt.Errorf("generate: manifest: %w", err)
	}
	var buf bytes.Buffer
	buf.Write(b[:len(b)-2]) // drop "\n}"
	buf.WriteString(",\n  \"listed\": [")
	if err := writeList(&buf, m.Listed); err != nil {
		return 0, err
	}
	if m.Truth != nil {
		buf.WriteString(",\n  \"truth\": [")
		if err := writeList(&buf, m.Truth); err != nil {
			return 0, err
		}
	}
	if m.ZReports != nil {
		buf.WriteString(",\n  \"zreports\": [")
		if err := writeList(&buf, m.ZReports); err != nil {
			return 0, err
		}
	}
	buf.WriteString("\n}\n")
	n, err := w.Write(buf.Bytes())
	return int64(n), err
}

func writeList[T any](buf *bytes.Buffer, xs []T) error {
	for i, x := range xs {
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Errorf("generate: manifest: %w", err)
		}
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString("\n    ")
		buf.Write(b)
	}
	if len(xs) > 0 {
		buf.WriteString("\n  ")
	}
	buf.WriteByte(']')
	return nil
}

// ReadManifest decodes a manifest written by WriteTo.
func ReadManifest(r io.Reader) (*Manifest, error) {
	var m Manifest
	if err := json.NewDecoder(r).Decode(&m); err != nil {
		return nil, fmt.Errorf("generate: manifest: %w", err)
	}
	return &m, nil
}
