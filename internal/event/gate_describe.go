package event

import (
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// How the gate describes what it found: key names, literal values and
// non-finite numbers in the reasons a dead letter carries.

// collectKeys gathers the members of the object node obj into g.keys,
// unescaping keys that need it into g.keyBuf. A slice of keyBuf stays valid
// when a later append moves keyBuf: it keeps the old array.
func (g *Gate) collectKeys(obj int32) {
	g.keys, g.keyBuf = g.keys[:0], g.keyBuf[:0]
	nodes, raw := g.tape.nodes, g.env.raw
	end := nodes[obj].next
	for k := obj + 1; k < end; k = nodes[k].next {
		nd := &nodes[k]
		name := nd.key(raw)
		if nd.flags&flagKeyEscaped != 0 {
			off := len(g.keyBuf)
			g.keyBuf = appendUnescaped(g.keyBuf, name)
			name = g.keyBuf[off:len(g.keyBuf):len(g.keyBuf)]
		}
		g.keys = append(g.keys, keyRef{name: name, node: k, special: nd.flags&flagKeySpecial != 0})
	}
}

// checkKeys rejects malformed and duplicate keys among g.keys; prefix is ""
// for the envelope and "data." for data.
func (g *Gate) checkKeys(prefix string) {
	for _, k := range g.keys {
		if !k.special {
			continue
		}
		if why := badKeyName(k.name); why != "" {
			g.add(prefix+displayName(k.name), "field name "+why)
		}
	}
	dup := func(k keyRef) { g.add(prefix+displayName(k.name), "duplicate key") }
	if len(g.keys) <= 32 {
		for i := 1; i < len(g.keys); i++ {
			name := g.keys[i].name
			for j := 0; j < i; j++ {
				if string(name) == string(g.keys[j].name) {
					dup(g.keys[i])
					break
				}
			}
		}
		return
	}
	if g.dupSeen == nil {
		g.dupSeen = make(map[string]struct{}, len(g.keys))
	}
	clear(g.dupSeen)
	for _, k := range g.keys {
		name := k.name
		if _, seen := g.dupSeen[string(name)]; seen {
			dup(k)
			continue
		}
		g.dupSeen[string(name)] = struct{}{}
	}
}

// badKeyName says what is wrong with a field name, or "". Names are used as
// dotted paths (Envelope.String), column names and log fields, so path
// separators and control characters are refused.
func badKeyName(name []byte) string {
	if len(name) == 0 {
		return "is empty"
	}
	for i := 0; i < len(name); {
		c := name[i]
		if c < utf8.RuneSelf {
			switch {
			case c < 0x20 || c == 0x7f:
				return "contains a control character"
			case c == '.' || c == '/' || c == '\\':
				return "contains a path separator ('.', '/' or '\\')"
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(name[i:])
		if unicode.IsControl(r) {
			return "contains a control character"
		}
		i += size
	}
	return ""
}

// displayName renders a field name for Fields and reasons: as is when it is
// plain printable ASCII, else Go-quoted without the quotes, so no control
// character reaches a header or a log line.
func displayName(name []byte) string {
	if len(name) == 0 {
		return `""`
	}
	for _, c := range name {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			q := strconv.Quote(string(name))
			return q[1 : len(q)-1]
		}
	}
	return string(name)
}

// stringValue returns the decoded bytes of the string node n, aliasing the
// input or g.valBuf (valid until the next call).
func (g *Gate) stringValue(n int32) []byte {
	nd := &g.tape.nodes[n]
	s := content(g.env.raw, nd)
	if nd.flags&flagEscaped == 0 {
		return s
	}
	g.valBuf = appendUnescaped(g.valBuf[:0], s)
	return g.valBuf
}

// maxLiteral bounds how much of a value a reason quotes.
const maxLiteral = 64

// literal renders node n as it appears in the input (JSON syntax, so strings
// keep their quotes and escapes), cut to maxLiteral bytes.
func (g *Gate) literal(n int32) string {
	nd := &g.tape.nodes[n]
	b := g.env.raw[nd.start:nd.end]
	if len(b) <= maxLiteral {
		return string(b)
	}
	cut := maxLiteral
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]) + "…"
}

// describeValue renders a value's type and, for scalars, its literal.
func (g *Gate) describeValue(n int32) string {
	switch k := g.tape.nodes[n].kind; k {
	case kindObject, kindArray, kindNull:
		return k.String()
	default:
		return k.String() + " " + g.literal(n)
	}
}

// reportNonFinite attributes NaN/Infinity literals and overflowing numbers
// to the envelope field, or the data field, that holds them.
func (g *Gate) reportNonFinite() {
	nodes, raw := g.tape.nodes, g.env.raw
	first := func(from, to int32) int32 {
		for i := from; i < to; i++ {
			if nodes[i].flags&flagNonFinite != 0 {
				return i
			}
		}
		return -1
	}
	report := func(field string, n int32) { g.add(field, g.literal(n)+" is not a finite number") }
	for _, k := range g.keys {
		v := k.node
		bad := first(v, nodes[v].next)
		if bad < 0 {
			continue
		}
		name := k.name
		if string(name) != "data" || nodes[v].kind != kindObject {
			report(displayName(name), bad)
			continue
		}
		for dk := v + 1; dk < nodes[v].next; dk = nodes[dk].next {
			if b := first(dk, nodes[dk].next); b >= 0 {
				dn := appendUnescaped(nil, nodes[dk].key(raw))
				report("data."+displayName(dn), b)
			}
		}
	}
}

// reason renders a decoding failure for the "payload" field.
func (e parseError) reason(maxDepth int) string {
	switch e.kind {
	case parseEmpty:
		return "empty record, expecting a JSON object"
	case parseNotObject:
		return "not a JSON object (starts with " + e.msg + ")"
	case parseUTF8:
		return fmt.Sprintf("invalid UTF-8 at byte %d", e.off)
	case parseDepth:
		return fmt.Sprintf("JSON nested deeper than max_depth %d at byte %d", maxDepth, e.off)
	}
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.off, e.msg)
}
