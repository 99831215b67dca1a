package event

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"
)

// Gate defaults; config.Load fills the same values.
const (
	DefaultMaxPayloadBytes = 1 << 20
	DefaultMaxFutureSkew   = 5 * time.Minute
	DefaultMaxDepth        = 32
)

// ErrInvalidOptions is wrapped by every problem NewGate reports.
var ErrInvalidOptions = errors.New("event: invalid gate options")

// unixEpoch is the earliest occurred_at the gate accepts: Kafka timestamps
// and the lake's partitions cannot represent earlier event times, and no
// source of reckon's emits them except by a broken clock.
var unixEpoch = time.Unix(0, 0).UTC()

// Result is the gate's verdict on one record. Fields names each failing
// field once: envelope fields by name ("event_id"), data fields as
// "data.<name>", and "payload" for size, JSON and depth problems. Reasons is
// aligned with Fields; each reason starts with its field and a colon, e.g.
// "data.suhu_c: 75 above max 60".
type Result struct {
	Valid   bool
	Fields  []string
	Reasons []string
}

// Reason returns the first reason, "" when valid.
func (r Result) Reason() string {
	if len(r.Reasons) == 0 {
		return ""
	}
	return r.Reasons[0]
}

// NewDeadLetter fills a DeadLetter from a failed Result: stage "gate",
// attempts 1. recordTime is the record's Kafka timestamp, now the time of
// dead-lettering. It keeps r's slices.
func NewDeadLetter(r Result, topic string, partition int32, offset int64, recordTime, now time.Time) DeadLetter {
	return DeadLetter{
		Reason:          r.Reason(),
		Reasons:         r.Reasons,
		Fields:          r.Fields,
		SourceTopic:     topic,
		SourcePartition: partition,
		SourceOffset:    offset,
		SourceTimestamp: recordTime,
		DeadAt:          now,
		Attempts:        1,
		Stage:           "gate",
	}
}

// Gate is the quality gate: it decodes envelopes and validates them against
// the envelope contract and the per-type data rules of GateOptions.
//
// A Gate is not safe for concurrent use (it reuses its decoder's buffers):
// use one per goroutine or partition. Decoding a valid envelope allocates
// nothing but, every 56 records, a 2 KiB chunk the EventID strings are cut
// from.
type Gate struct {
	maxPayload    int
	maxFutureSkew time.Duration
	maxPastAge    time.Duration
	allowUnknown  bool
	maxDepth      int
	types         map[string]*typeRules

	// Per-record state, reset by decode.
	tape    tape
	env     Envelope
	typ     *typeRules // rules of env.EventType; nil when unknown
	idN     int32      // value nodes of the envelope fields; -1 when absent
	typeN   int32
	timeN   int32
	timeOK  bool // env.OccurredAt holds a valid time
	fields  []string
	reasons []string

	// Scratch buffers reused across records.
	keys     []keyRef
	keyBuf   []byte // unescaped keys
	valBuf   []byte // an unescaped string value
	slots    []int32
	dupSeen  map[string]struct{}
	ids      []byte     // the current chunk EventID strings are cut from
	lastType *typeRules // the last known event type seen
}

// idChunk is the size of the chunks EventID strings are cut from: one
// allocation per 56 records instead of one per record. A kept EventID
// keeps its chunk alive, at most idChunk bytes.
const idChunk = 2048

// idString returns s (a 36-byte event id) as a string in the current
// chunk. Bytes handed out are never written again, so the strings are
// immutable like any other.
func (g *Gate) idString(s []byte) string {
	if len(g.ids)+len(s) > cap(g.ids) {
		g.ids = make([]byte, 0, max(idChunk, len(s)))
	}
	off := len(g.ids)
	g.ids = append(g.ids, s...)
	return unsafe.String(&g.ids[off], len(s))
}

// maxRetainedBytes bounds each scratch buffer kept between records.
const maxRetainedBytes = 64 << 10

// keyRef is one object member collected by collectKeys.
type keyRef struct {
	name    []byte // the decoded key, aliasing the input or Gate.keyBuf
	node    int32  // the member's value node
	special bool   // name holds a byte badKeyName must look at
}

// NewGate compiles opts. Zero-valued fields get the config defaults (1 MiB
// payloads, 5m future skew, depth 32). It reports every bad option and rule
// at once, each wrapping ErrInvalidOptions.
func NewGate(opts GateOptions) (*Gate, error) {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, a...)))
	}
	g := &Gate{
		maxPayload:    opts.MaxPayloadBytes,
		maxFutureSkew: opts.MaxFutureSkew,
		maxPastAge:    opts.MaxPastAge,
		allowUnknown:  opts.AllowUnknownTypes,
		maxDepth:      opts.MaxDepth,
		types:         make(map[string]*typeRules, len(opts.Types)),
	}
	switch {
	case g.maxPayload < 0:
		bad("gate.max_payload_bytes: %d is negative", g.maxPayload)
	case g.maxPayload == 0:
		g.maxPayload = DefaultMaxPayloadBytes
	}
	switch {
	case g.maxFutureSkew < 0:
		bad("gate.max_future_skew: %v is negative", g.maxFutureSkew)
	case g.maxFutureSkew == 0:
		g.maxFutureSkew = DefaultMaxFutureSkew
	}
	if g.maxPastAge < 0 {
		bad("gate.max_past_age: %v is negative", g.maxPastAge)
	}
	switch {
	case g.maxDepth < 0 || g.maxDepth == 1:
		bad("gate.max_depth: %d must be at least 2 (the envelope and its data)", g.maxDepth)
	case g.maxDepth == 0:
		g.maxDepth = DefaultMaxDepth
	}
	for _, tn := range slices.Sorted(maps.Keys(opts.Types)) {
		if !isEventType(tn) {
			bad("gate.types.%s: not a valid event type (object.action: lowercase letters and digits, dot separated)", tn)
		}
		tr := &typeRules{name: tn}
		fieldsIn := opts.Types[tn].Fields
		for _, fn := range slices.Sorted(maps.Keys(fieldsIn)) {
			if r, ok := compileField(fmt.Sprintf("gate.types.%s.fields.%s", tn, fn), fn, fieldsIn[fn], bad); ok {
				tr.fields = append(tr.fields, r)
			}
		}
		if len(tr.fields) > 8 {
			tr.index = make(map[string]int, len(tr.fields))
			for i, r := range tr.fields {
				tr.index[r.name] = i
			}
		}
		g.types[tn] = tr
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return g, nil
}

// Parse does the structural minimum every consumer needs: the size limit, a
// valid JSON object (strict RFC 8259, valid UTF-8, no duplicate or malformed
// top-level keys) nested at most MaxDepth deep, no NaN/Infinity or
// overflowing numbers anywhere, event_id a lowercase canonical UUID other
// than the nil UUID, occurred_at present and RFC 3339 with any offset
// (converted to UTC), not before 1970. It sets EventType when event_type is
// a string but does not validate it.
//
// The Envelope is nil unless the Result is valid; see Envelope for how long
// it stays valid.
func (g *Gate) Parse(raw []byte) (*Envelope, Result) {
	g.decode(raw)
	return g.result()
}

// Check is Parse plus: event_type present and `object.action`
// (^[a-z0-9]+(\.[a-z0-9]+)+$, at most 255 bytes); a known type unless
// AllowUnknownTypes; data an object whose top-level keys are unique and
// well-formed; the type's data rules (required, type, pattern anchored at
// both ends, min/max, integer, min_len/max_len, enum; extra fields are
// allowed, null counts as absent); occurred_at at most MaxFutureSkew ahead
// of arrival and, when MaxPastAge > 0, at most MaxPastAge behind it. A zero
// arrival skips the two time checks.
func (g *Gate) Check(raw []byte, arrival time.Time) (*Envelope, Result) {
	if !g.decode(raw) {
		return g.result()
	}
	g.checkEventType()
	if g.timeOK && !arrival.IsZero() {
		g.checkArrival(arrival)
	}
	dataN := g.env.data
	switch {
	case g.failed("data"): // a duplicate: which one the rules should see is ambiguous
	case dataN < 0:
		g.add("data", "required")
	case g.tape.nodes[dataN].kind != kindObject:
		g.add("data", "must be an object, got "+g.describeValue(dataN))
	default:
		g.checkData(dataN)
	}
	return g.result()
}

// result hands the verdict over; the issue slices then belong to the caller.
func (g *Gate) result() (*Envelope, Result) {
	if len(g.fields) == 0 {
		return &g.env, Result{Valid: true}
	}
	r := Result{Fields: g.fields, Reasons: g.reasons}
	g.fields, g.reasons = nil, nil
	return nil, r
}

// failed reports whether field has already failed.
func (g *Gate) failed(field string) bool { return slices.Contains(g.fields, field) }

// add records a failing field once; later reasons for the same field are
// dropped so Fields stays unique.
func (g *Gate) add(field, msg string) {
	for _, f := range g.fields {
		if f == field {
			return
		}
	}
	g.fields = append(g.fields, field)
	g.reasons = append(g.reasons, field+": "+msg)
}

// decode runs Parse's checks and reports whether the record is a JSON
// object the later checks can look into.
func (g *Gate) decode(raw []byte) bool {
	g.fields, g.reasons = nil, nil
	if cap(g.keys) > maxRetainedNodes || cap(g.keyBuf) > maxRetainedBytes || cap(g.valBuf) > maxRetainedBytes {
		g.keys, g.keyBuf, g.valBuf = nil, nil, nil // let one huge record's scratch go
	}
	g.env = Envelope{raw: raw, data: -1}
	g.typ, g.idN, g.typeN, g.timeN, g.timeOK = nil, -1, -1, -1, false
	if len(raw) > g.maxPayload {
		g.add("payload", fmt.Sprintf("%d bytes exceeds max_payload_bytes %d", len(raw), g.maxPayload))
		return false
	}
	if perr := g.tape.parse(raw, g.maxDepth); perr.kind != parseOK {
		g.add("payload", perr.reason(g.maxDepth))
		return false
	}
	nodes := g.tape.nodes
	g.env.nodes = nodes

	g.collectKeys(0)
	g.checkKeys("")
	for _, k := range g.keys {
		v := k.node
		var slot *int32
		switch string(k.name) {
		case "event_id":
			slot = &g.idN
		case "event_type":
			slot = &g.typeN
		case "occurred_at":
			slot = &g.timeN
		case "data":
			slot = &g.env.data
		default:
			continue
		}
		if *slot < 0 { // the first of duplicates; checkKeys reported the rest
			*slot = v
		}
	}
	if g.tape.nonFinite > 0 {
		g.reportNonFinite()
	}

	switch n := g.idN; {
	case n < 0:
		g.add("event_id", "required")
	case nodes[n].kind != kindString:
		g.add("event_id", "must be a string, got "+g.describeValue(n))
	default:
		s := g.stringValue(n)
		id, ok := parseUUID(s)
		switch {
		case !ok:
			g.add("event_id", g.literal(n)+" is not a lowercase canonical UUID (8-4-4-4-12 hex digits)")
		case id == [16]byte{}:
			g.add("event_id", "the nil UUID is not an event id")
		default:
			g.env.EventID, g.env.id = g.idString(s), id
		}
	}

	if n := g.typeN; n >= 0 && nodes[n].kind == kindString {
		s := g.stringValue(n)
		tr := g.lastType // a partition's records are mostly of one type
		if tr == nil || tr.name != string(s) {
			if tr = g.types[string(s)]; tr != nil {
				g.lastType = tr
			}
		}
		if tr != nil {
			g.typ, g.env.EventType = tr, tr.name
		} else {
			g.env.EventType = string(s)
		}
	}

	switch n := g.timeN; {
	case n < 0:
		g.add("occurred_at", "required")
	case nodes[n].kind != kindString:
		g.add("occurred_at", "must be a string, got "+g.describeValue(n))
	default:
		t, ok := parseRFC3339(g.stringValue(n))
		switch {
		case !ok:
			g.add("occurred_at", g.literal(n)+" is not an RFC 3339 date-time such as 2026-11-07T08:30:00Z")
		case t.Before(unixEpoch):
			g.add("occurred_at", g.literal(n)+" is before 1970-01-01T00:00:00Z")
		default:
			g.env.OccurredAt, g.timeOK = t, true
		}
	}
	return true
}

func (g *Gate) checkEventType() {
	n := g.typeN
	switch {
	case n < 0:
		g.add("event_type", "required")
	case g.tape.nodes[n].kind != kindString:
		g.add("event_type", "must be a string, got "+g.describeValue(n))
	case g.typ != nil:
		// A configured type: NewGate checked its name.
	case len(g.env.EventType) > 255:
		g.add("event_type", "longer than 255 bytes")
	case !isEventType(g.env.EventType):
		g.add("event_type", g.literal(n)+" does not match object.action (lowercase letters and digits, dot separated)")
	case g.typ == nil && !g.allowUnknown:
		g.add("event_type", "unknown event type "+g.literal(n))
	}
}

func (g *Gate) checkArrival(arrival time.Time) {
	ahead := g.env.OccurredAt.Sub(arrival)
	// Sub saturates at about 292 years; say so rather than print the bound.
	span := func(d time.Duration) string {
		if d == math.MaxInt64 || d == math.MinInt64 {
			return "more than 292 years"
		}
		return d.String()
	}
	switch {
	case ahead > g.maxFutureSkew:
		g.add("occurred_at", fmt.Sprintf("%s is %s ahead of arrival %s (max_future_skew %v)",
			g.env.OccurredAt.Format(time.RFC3339Nano), span(ahead), arrival.UTC().Format(time.RFC3339Nano), g.maxFutureSkew))
	case g.maxPastAge > 0 && -ahead > g.maxPastAge:
		g.add("occurred_at", fmt.Sprintf("%s is %s before arrival %s (max_past_age %v)",
			g.env.OccurredAt.Format(time.RFC3339Nano), span(-ahead), arrival.UTC().Format(time.RFC3339Nano), g.maxPastAge))
	}
}

// checkData checks data's keys and the event type's rules.
func (g *Gate) checkData(obj int32) {
	g.collectKeys(obj)
	g.checkKeys("data.")
	tr := g.typ
	if tr == nil {
		return
	}
	slots := g.slots[:0]
	for range tr.fields {
		slots = append(slots, -1)
	}
	g.slots = slots
	for _, k := range g.keys {
		if i := tr.find(k.name); i >= 0 && slots[i] < 0 {
			slots[i] = k.node
		}
	}
	for i := range tr.fields {
		g.checkField(&tr.fields[i], slots[i])
	}
}

// checkField applies one rule to the value node v (-1 when absent).
func (g *Gate) checkField(r *fieldRule, v int32) {
	if v < 0 || g.tape.nodes[v].kind == kindNull {
		if r.required {
			g.add(r.field, "required")
		}
		return
	}
	n := &g.tape.nodes[v]
	wrongType := func() { g.add(r.field, "must be "+r.typ.article()+", got "+g.describeValue(v)) }
	switch r.typ {
	case typeString:
		if n.kind != kindString {
			wrongType()
			return
		}
		s := g.stringValue(v)
		switch {
		case r.minLen > 0 && len(s) < r.minLen:
			g.add(r.field, fmt.Sprintf("length %d below min_len %d", len(s), r.minLen))
		case r.maxLen > 0 && len(s) > r.maxLen:
			g.add(r.field, fmt.Sprintf("length %d above max_len %d", len(s), r.maxLen))
		case r.re != nil && !r.matchPattern(s):
			g.add(r.field, g.literal(v)+" does not match pattern "+r.pattern)
		case len(r.enum) > 0 && !slices.Contains(r.enum, string(s)):
			g.add(r.field, g.literal(v)+" is not one of "+strings.Join(r.enum, ", "))
		}
	case typeNumber, typeInteger:
		if n.kind != kindNumber {
			wrongType()
			return
		}
		lit := g.env.raw[n.start:n.end]
		if r.typ == typeInteger {
			if n.flags&flagFraction != 0 {
				g.add(r.field, g.literal(v)+" is not an integer")
				return
			}
			// Up to 18 digits always fits.
			if len(lit) > 18 {
				if _, err := strconv.ParseInt(bytesString(lit), 10, 64); err != nil {
					g.add(r.field, g.literal(v)+" does not fit a 64-bit integer")
					return
				}
			}
		}
		f := parseNumber(lit)
		switch {
		case r.hasMin && f < r.min:
			g.add(r.field, g.literal(v)+" below min "+formatFloat(r.min))
		case r.hasMax && f > r.max:
			g.add(r.field, g.literal(v)+" above max "+formatFloat(r.max))
		}
	case typeBoolean:
		if n.kind != kindTrue && n.kind != kindFalse {
			wrongType()
		}
	case typeObject:
		if n.kind != kindObject {
			wrongType()
		}
	case typeArray:
		if n.kind != kindArray {
			wrongType()
		}
	}
}
