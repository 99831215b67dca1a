package zreport

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Source is one of the three producers of a Z-report part.
type Source string

// The three sources, in the order every list in this package uses.
const (
	OFD Source = "OFD" // the fiscal data operator: the primary document
	DWH Source = "DWH" // the corporate warehouse: aggregate of receipts
	RMS Source = "RMS" // the operational store: aggregate of operations
)

// Sources lists the sources in canonical order.
var Sources = [3]Source{OFD, DWH, RMS}

// index returns s's position in Sources, or -1.
func (s Source) index() int {
	switch s {
	case OFD:
		return 0
	case DWH:
		return 1
	case RMS:
		return 2
	}
	return -1
}

// Event types of Z-report parts. The per-source types are what the parts
// topic carries (deploy/reckon.yaml has their gate rules); TypePart is the
// source-neutral form `reckon zreport simulate` reads, with data.source.
const (
	TypeOFD  = "zreport.ofd.received"
	TypeDWH  = "zreport.dwh.computed"
	TypeRMS  = "zreport.rms.computed"
	TypePart = "zreport.part.received"
)

// SourceOfType returns the source an event type implies; ok is false for
// TypePart (the source is in the data) and for foreign types.
func SourceOfType(eventType string) (Source, bool) {
	switch eventType {
	case TypeOFD:
		return OFD, true
	case TypeDWH:
		return DWH, true
	case TypeRMS:
		return RMS, true
	}
	return "", false
}

// Errors. Every problem with a part wraps ErrInvalidPart.
var (
	ErrInvalidPart = errors.New("zreport: invalid part")
	ErrWrongKey    = errors.New("zreport: part belongs to another business key")
)

// Key is the business key: fiscal drive number and shift number.
type Key struct {
	FiscalDrive string `json:"fiscal_drive"`
	Shift       int64  `json:"shift"`
}

// MaxShift bounds shift numbers (a fiscal drive never gets near it).
const MaxShift = 1_000_000_000

// Validate reports whether k is a well-formed key: 16 ASCII digits and a
// shift in [1, MaxShift]. Workflow ids and lake file names are built from
// keys, so nothing else may get through.
func (k Key) Validate() error {
	if !IsFiscalDrive(k.FiscalDrive) {
		return fmt.Errorf("%w: fiscal_drive %q is not 16 digits", ErrInvalidPart, k.FiscalDrive)
	}
	if k.Shift < 1 || k.Shift > MaxShift {
		return fmt.Errorf("%w: shift %d is not in [1, %d]", ErrInvalidPart, k.Shift, MaxShift)
	}
	return nil
}

// IsFiscalDrive reports whether s is exactly 16 ASCII digits.
func IsFiscalDrive(s string) bool {
	if len(s) != 16 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// String is the Kafka record key of every Z-report topic: fiscal_drive/shift.
func (k Key) String() string { return k.FiscalDrive + "/" + strconv.FormatInt(k.Shift, 10) }

// WorkflowIDPrefix starts every Z-report entity workflow id.
const WorkflowIDPrefix = "zreport/"

// WorkflowID is the id of k's entity workflow: zreport/<fiscal_drive>/<shift>.
func (k Key) WorkflowID() string { return WorkflowIDPrefix + k.String() }

// ParseKey parses "fiscal_drive/shift" (with or without the zreport/
// prefix of a workflow id).
func ParseKey(s string) (Key, error) {
	s = strings.TrimPrefix(s, WorkflowIDPrefix)
	d, sh, ok := strings.Cut(s, "/")
	if !ok {
		return Key{}, fmt.Errorf("%w: key %q is not fiscal_drive/shift", ErrInvalidPart, s)
	}
	n, err := strconv.ParseInt(sh, 10, 64)
	if err != nil {
		return Key{}, fmt.Errorf("%w: key %q: shift is not a number", ErrInvalidPart, s)
	}
	k := Key{d, n}
	return k, k.Validate()
}

// Figures are what each source reports for a shift.
type Figures struct {
	Receipts int64   `json:"receipts_count"`
	Total    float64 `json:"total_amount"`
}

// Part is one source's contribution to a business key.
type Part struct {
	// EventID is the source's id of the part: the dedup key per source.
	EventID string `json:"event_id"`
	Source  Source `json:"source"`
	Key
	Figures
	// ShiftClosedAt is when the shift closed, as the source reports it.
	ShiftClosedAt time.Time `json:"shift_closed_at"`
	// OccurredAt is the envelope's event time (informational).
	OccurredAt time.Time `json:"occurred_at,omitzero"`
	// ArrivedAt is the arrival (Kafka record timestamp; informational).
	ArrivedAt time.Time `json:"arrived_at,omitzero"`
	// Origin says where the part came from, e.g. "zreport-parts/2/1234"
	// or "ofd-api" (informational).
	Origin string `json:"origin,omitempty"`
}

// Validate checks a part completely: a part that passes can be applied.
func (p Part) Validate() error {
	var errs []error
	if p.EventID == "" || len(p.EventID) > 128 {
		errs = append(errs, fmt.Errorf("%w: event_id must be 1..128 bytes", ErrInvalidPart))
	}
	if p.Source.index() < 0 {
		errs = append(errs, fmt.Errorf("%w: source %q is not OFD, DWH or RMS", ErrInvalidPart, p.Source))
	}
	if err := p.Key.Validate(); err != nil {
		errs = append(errs, err)
	}
	if p.Receipts < 0 {
		errs = append(errs, fmt.Errorf("%w: receipts_count %d is negative", ErrInvalidPart, p.Receipts))
	}
	if !(p.Total >= 0) || math.IsInf(p.Total, 0) {
		errs = append(errs, fmt.Errorf("%w: total_amount %v is not a finite number ≥ 0", ErrInvalidPart, p.Total))
	}
	if p.ShiftClosedAt.IsZero() {
		errs = append(errs, fmt.Errorf("%w: shift_closed_at is required", ErrInvalidPart))
	}
	return errors.Join(errs...)
}

// Fields is what a decoded envelope offers; *event.Envelope satisfies it.
// Paths are dotted from the envelope root, e.g. "data.shift".
type Fields interface {
	String(path string) (string, bool)
	Number(path string) (float64, bool)
}

// PartOf builds a part from an envelope's fields. The source comes from the
// event type (zreport.ofd.received, zreport.dwh.computed,
// zreport.rms.computed) or, for zreport.part.received, from data.source.
// Figures are read from data.receipts / data.total, or their long names
// data.receipts_count / data.total_amount. The result is validated.
func PartOf(eventID, eventType string, occurredAt time.Time, f Fields) (Part, error) {
	p := Part{EventID: eventID, OccurredAt: occurredAt.UTC()}
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidPart}, a...)...))
	}
	if s, ok := SourceOfType(eventType); ok {
		p.Source = s
	} else if eventType == TypePart {
		s, _ := f.String("data.source")
		p.Source = Source(strings.ToUpper(s))
		if p.Source.index() < 0 {
			bad("data.source %q is not OFD, DWH or RMS", s)
		}
	} else {
		bad("event_type %q is not a Z-report part", eventType)
	}
	p.FiscalDrive, _ = f.String("data.fiscal_drive")
	if n, ok := integer(f, "data.shift"); ok {
		p.Shift = n
	} else {
		bad("data.shift must be an integer")
	}
	if n, ok := integer(f, "data.receipts", "data.receipts_count"); ok {
		p.Receipts = n
	} else {
		bad("data.receipts must be an integer")
	}
	if x, ok := number(f, "data.total", "data.total_amount"); ok {
		p.Total = x
	} else {
		bad("data.total must be a number")
	}
	if s, ok := f.String("data.shift_closed_at"); ok {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			bad("data.shift_closed_at %q is not RFC 3339", s)
		}
		p.ShiftClosedAt = t.UTC()
	} else {
		bad("data.shift_closed_at must be an RFC 3339 string")
	}
	if len(errs) > 0 {
		return p, errors.Join(errs...)
	}
	return p, p.Validate()
}

func number(f Fields, paths ...string) (float64, bool) {
	for _, p := range paths {
		if x, ok := f.Number(p); ok {
			return x, true
		}
	}
	return 0, false
}

func integer(f Fields, paths ...string) (int64, bool) {
	x, ok := number(f, paths...)
	if !ok || x != math.Trunc(x) || math.Abs(x) > 1<<53 {
		return 0, false
	}
	return int64(x), true
}
