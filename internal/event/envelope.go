package event

import (
	"slices"
	"strings"
	"time"
	"unsafe"
)

// Envelope is a decoded event envelope (docs/requirements.md R-GATE-1):
//
//	{"event_id": "<uuid>", "event_type": "object.action",
//	 "occurred_at": "<RFC 3339>", "data": {...}}
//
// An Envelope returned by Gate.Parse or Gate.Check is valid until the next
// Parse or Check on the same Gate, and it aliases the raw bytes passed in,
// which the caller must not modify meanwhile; Clone returns a copy that is
// safe to keep. The exported string fields are ordinary strings, safe to
// keep in any case. Reading an Envelope is safe from several goroutines.
type Envelope struct {
	// EventID is the lowercase canonical UUID set by the source: the dedup
	// key. The Gate cuts it from a chunk shared with other records' ids
	// (see Gate), so keeping it keeps up to 2 KiB alive.
	EventID string
	// EventType is the envelope's event_type. Parse sets it whenever it is
	// a JSON string; Check also validates it.
	EventType string
	// OccurredAt is the event time, converted to UTC.
	OccurredAt time.Time

	// id is EventID decoded: the gate parses it to check it, and the
	// stream dedups by these bytes (EventUUID) without parsing it again.
	id    [16]byte
	raw   []byte
	nodes []node // the decoded tape; nodes[0] is the envelope object
	data  int32  // index of data's value node; -1 when absent
}

// Clone returns a deep copy of e that stays valid after the Gate moves on.
func (e *Envelope) Clone() *Envelope {
	c := *e
	c.raw = slices.Clone(e.raw)
	c.nodes = slices.Clone(e.nodes)
	return &c
}

// Raw returns the envelope's bytes exactly as received.
func (e *Envelope) Raw() []byte { return e.raw }

// DataJSON returns the exact bytes of the `data` value as received (no
// re-encoding, so numbers and escapes are lossless), or nil when there is no
// data. The slice aliases Raw.
func (e *Envelope) DataJSON() []byte {
	if e.data < 0 || int(e.data) >= len(e.nodes) {
		return nil
	}
	n := &e.nodes[e.data]
	return e.raw[n.start:n.end:n.end]
}

// String returns the JSON string at path, a dotted path from the envelope
// root such as "data.user_id" (array elements by decimal index,
// "data.tags.0"). ok is false when the path does not exist or the value is
// not a JSON string. The result is a fresh string, safe to keep.
func (e *Envelope) String(path string) (string, bool) {
	i := e.find(path)
	if i < 0 || e.nodes[i].kind != kindString {
		return "", false
	}
	n := &e.nodes[i]
	s := content(e.raw, n)
	if n.flags&flagEscaped == 0 {
		return string(s), true
	}
	return string(appendUnescaped(make([]byte, 0, len(s)), s)), true
}

// EventUUID returns EventID's 16 bytes as the Gate decoded them while
// checking it (event.ParseUUID(EventID) without the second parse); the
// zero array when the envelope has no valid event id (Parse alone, or a
// rejected record).
func (e *Envelope) EventUUID() [16]byte { return e.id }

// StringView is String without the copy: when the string holds no escape,
// the result aliases the envelope's raw bytes, so it is valid only while
// those bytes are unchanged (the record being processed) and must be
// copied to be kept (strings.Clone). An escaped string is unescaped into a
// new string, as String does. The stream reads its key with it: the
// operator copies the keys it keeps (streaming/operator.Record.Key).
func (e *Envelope) StringView(path string) (string, bool) {
	i := e.find(path)
	if i < 0 || e.nodes[i].kind != kindString {
		return "", false
	}
	n := &e.nodes[i]
	s := content(e.raw, n)
	if n.flags&flagEscaped != 0 {
		return string(appendUnescaped(make([]byte, 0, len(s)), s)), true
	}
	if len(s) == 0 {
		return "", true
	}
	return unsafe.String(&s[0], len(s)), true
}

// Number returns the JSON number at the dotted path. ok is false when the
// path does not exist or the value is not a number; strings such as "24.5"
// and booleans are not numbers. A valid envelope holds only finite numbers.
func (e *Envelope) Number(path string) (float64, bool) {
	i := e.find(path)
	if i < 0 {
		return 0, false
	}
	n := &e.nodes[i]
	if n.kind != kindNumber || n.flags&flagNonFinite != 0 {
		return 0, false
	}
	return parseNumber(e.raw[n.start:n.end]), true
}

// Exists reports whether the dotted path exists (a null value exists).
func (e *Envelope) Exists(path string) bool { return e.find(path) >= 0 }

// find resolves a dotted path to a node index, or -1.
func (e *Envelope) find(path string) int32 {
	if len(e.nodes) == 0 || path == "" {
		return -1
	}
	cur := int32(0)
	for {
		seg, rest, more := path, "", false
		if i := strings.IndexByte(path, '.'); i >= 0 {
			seg, rest, more = path[:i], path[i+1:], true
		}
		switch e.nodes[cur].kind {
		case kindObject:
			if cur == 0 && seg == "data" {
				cur = e.data // the gate found the first "data" member already
				break
			}
			cur = lookup(e.raw, e.nodes, cur, seg)
		case kindArray:
			cur = element(e.nodes, cur, seg)
		default:
			return -1
		}
		if cur < 0 || !more {
			return cur
		}
		path = rest
	}
}

// element returns the index of the array element named by the decimal
// index seg, or -1.
func element(nodes []node, arr int32, seg string) int32 {
	if seg == "" || len(seg) > 9 || (len(seg) > 1 && seg[0] == '0') {
		return -1
	}
	want := 0
	for i := 0; i < len(seg); i++ {
		if !isDigit(seg[i]) {
			return -1
		}
		want = want*10 + int(seg[i]-'0')
	}
	end := nodes[arr].next
	for k := arr + 1; k < end; k = nodes[k].next {
		if want == 0 {
			return k
		}
		want--
	}
	return -1
}
