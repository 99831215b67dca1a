package generate

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// Category is what a record is meant to be. Every record has exactly one.
type Category string

// Categories. The first five are valid events and count in the truth; the
// stream may still see a valid event as late (or not) differently from the
// intent when a partition's traffic is sparse or a skewed clock dragged its
// watermark: late categories assume dense traffic (the watermark ≈ arrival −
// out-of-orderness) and keep a margin of min(allowed lateness/5, 30s) from
// every boundary.
const (
	// OnTime: arrives before its window fires (delay ≤ out-of-orderness/2).
	OnTime Category = "on_time"
	// Late: arrives after its window fired, within the allowed lateness
	// (a late pane).
	Late Category = "late"
	// BeyondLateness: arrives after the window was purged (late side
	// output; only the batch side counts it).
	BeyondLateness Category = "beyond_lateness"
	// Skewed: the source clock runs ahead; occurred_at is ahead of arrival
	// by less than the gate's max future skew, so it is accepted.
	Skewed Category = "skewed"
	// Correction: a fiscal part resent with a new event_id and new figures,
	// replacing the source's earlier part.
	Correction Category = "correction"
	// Duplicate: a redelivery of an earlier valid record, same event_id and
	// same bytes.
	Duplicate Category = "duplicate"
	// Poison: rejected by the quality gate (see PoisonKind).
	Poison Category = "poison"
)

// Categories lists every category in manifest order.
var Categories = []Category{OnTime, Late, BeyondLateness, Skewed, Correction, Duplicate, Poison}

// Valid reports whether records of c are valid unique events (counted once
// in the truth).
func (c Category) Valid() bool {
	switch c {
	case OnTime, Late, BeyondLateness, Skewed, Correction:
		return true
	}
	return false
}

// Record is one generated Kafka record with what the generator knows about
// it. Records are immutable once returned; Value and Key may be shared
// between a record and its redeliveries.
type Record struct {
	// Seq is the 0-based position in simulated-arrival order: the JSONL
	// line index when every record is JSON, and the production order.
	Seq int64
	// Topic, Key and Value are the Kafka record.
	Topic string
	Key   []byte
	Value []byte
	// Arrival is the simulated arrival: the Kafka record timestamp and the
	// JSONL arrived_at. Millisecond precision.
	Arrival time.Time
	// EventTime is the occurred_at written (for skewed and future records,
	// the skewed value); zero when the record has none.
	EventTime time.Time
	// EventID is the event_id written; empty when it has none.
	EventID string
	// Category is the record's one category.
	Category Category
	// Poison is the kind of a Poison record.
	Poison PoisonKind
	// Field is the field the quality gate is expected to name for a Poison
	// record: an envelope field, data.<name>, or FieldPayload for
	// record-level rejections (bad JSON, oversized).
	Field string
	// JSON is false when Value is not a JSON object (bad JSON, NaN): such
	// records exist only on Kafka and are skipped in JSONL.
	JSON bool

	// Stream and Measure feed the truth of valid sensor and payment
	// events: the stream name and the aggregated value (suhu_c, amount).
	Stream  string
	KeyName string
	Measure float64
	// Part is set for fiscal parts (valid, correction and their
	// redeliveries).
	Part *Part

	gen uint64 // creation order, ties on Arrival
}

// Part is one Z-report part.
type Part struct {
	Source      string    // OFD, DWH or RMS
	FiscalDrive string    // 16 digits
	Shift       int       //
	Receipts    int       //
	TotalKopeks int64     // total in kopeks (the JSON total has 2 decimals)
	ClosedAt    time.Time // shift_closed_at
}

// Total is the total in roubles, as written.
func (p Part) Total() float64 { return float64(p.TotalKopeks) / 100 }

// BusinessKey is the record key and workflow id suffix: fiscal_drive/shift.
func (p Part) BusinessKey() string { return p.FiscalDrive + "/" + strconv.Itoa(p.Shift) }

// TimeLayout is how the generator writes times: RFC 3339, UTC, milliseconds.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// AppendJSONL appends r as one JSONL line: the envelope with a top-level
// arrived_at added, and a newline. It returns b unchanged for records that
// are not JSON objects.
func (r *Record) AppendJSONL(b []byte) []byte {
	v := r.Value
	if !r.JSON || len(v) < 2 || v[len(v)-1] != '}' {
		return b
	}
	b = append(b, v[:len(v)-1]...)
	if len(v) > 2 {
		b = append(b, ',')
	}
	b = append(b, `"arrived_at":"`...)
	b = r.Arrival.UTC().AppendFormat(b, TimeLayout)
	return append(b, "\"}\n"...)
}

// appendString appends s as a JSON string, escaping what JSON requires
// (and invalid UTF-8 as U+FFFD).
func appendString(b []byte, s string) []byte {
	const hexd = "0123456789abcdef"
	b = append(b, '"')
	plain := 0
	for plain < len(s) {
		c := s[plain]
		if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			break
		}
		plain++
	}
	b = append(b, s[:plain]...)
	for i := plain; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hexd[c>>4], hexd[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}

// field is one data member: its name and its raw JSON value.
type field struct {
	name string
	raw  []byte
}

// envelope is a record value under construction; poison kinds edit it
// before it is rendered.
type envelope struct {
	id       string
	typ      string
	occurred string // already formatted
	data     []field
}

func (e *envelope) set(name string, raw []byte) {
	for i := range e.data {
		if e.data[i].name == name {
			e.data[i].raw = raw
			return
		}
	}
	e.data = append(e.data, field{name, raw})
}

func (e *envelope) remove(name string) {
	for i := range e.data {
		if e.data[i].name == name {
			e.data = append(e.data[:i:i], e.data[i+1:]...)
			return
		}
	}
}

func (e *envelope) get(name string) []byte {
	for _, f := range e.data {
		if f.name == name {
			return f.raw
		}
	}
	return nil
}

func (e *envelope) render() []byte {
	n := 96 + len(e.id) + len(e.typ) + len(e.occurred)
	for _, f := range e.data {
		n += len(f.name) + len(f.raw) + 4
	}
	b := make([]byte, 0, n)
	b = append(b, `{"event_id":`...)
	b = appendString(b, e.id)
	b = append(b, `,"event_type":`...)
	b = appendString(b, e.typ)
	b = append(b, `,"occurred_at":`...)
	b = appendString(b, e.occurred)
	b = append(b, `,"data":{`...)
	for i, f := range e.data {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, f.name)
		b = append(b, ':')
		b = append(b, f.raw...)
	}
	return append(b, "}}"...)
}

func fmtTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

func rawString(s string) []byte { return appendString(nil, s) }
func rawInt(i int64) []byte     { return strconv.AppendInt(nil, i, 10) }
func rawFloat(f float64) []byte { return strconv.AppendFloat(nil, f, 'f', -1, 64) }
func rawKopeks(k int64) []byte {
	b := []byte(nil)
	if k < 0 {
		b = append(b, '-')
		k = -k
	}
	b = strconv.AppendInt(b, k/100, 10)
	b = append(b, '.', byte('0'+k%100/10), byte('0'+k%10))
	return b
}
