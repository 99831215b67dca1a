package event

import (
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// This file is the gate's JSON decoder: a strict (RFC 8259) single-pass
// parser that writes every value onto a flat tape of nodes in document order,
// reusing its slices between records.
//
// It exists instead of fastjson's Parser because the gate needs what a lenient
// tree parser does not give: fastjson accepts NaN, Infinity, 01, 1., +1, raw
// control characters, bad escapes and invalid UTF-8, has a fixed depth limit
// of 300, and keeps no byte offsets, so `data` could not be returned
// losslessly. One pass here costs less than fastjson.Parse plus a separate
// strict validation pass (see BenchmarkGateCheck and the fastjson reference
// beside it).

// kind is the JSON type of a tape node.
type kind uint8

const (
	kindNull kind = iota
	kindFalse
	kindTrue
	kindNumber
	kindString
	kindObject
	kindArray
)

// String names the kind as the gate's reasons and rules do.
func (k kind) String() string {
	switch k {
	case kindNull:
		return "null"
	case kindFalse, kindTrue:
		return "boolean"
	case kindNumber:
		return "number"
	case kindString:
		return "string"
	case kindObject:
		return "object"
	case kindArray:
		return "array"
	}
	return "invalid"
}

// node flags.
const (
	flagEscaped    uint8 = 1 << iota // string holds backslash escapes
	flagFraction                     // number literal has a fraction or an exponent
	flagNonFinite                    // NaN/Infinity literal, or a number that overflows float64
	flagKeyEscaped                   // the member's key holds backslash escapes
	flagKeySpecial                   // the member's key holds a byte badKeyName must look at
)

// node is one JSON value on the tape. The children of a container follow
// it, each with its subtree; an object member's node also carries the span
// of its key. Every node's subtree is nodes[i:next].
type node struct {
	start, end       int32 // byte span in the input; strings include their quotes, containers their brackets
	keyStart, keyEnd int32 // object members: the key's span, quotes included; 0, 0 otherwise
	next             int32 // index of the first node after this value's subtree
	kind             kind
	flags            uint8
}

// key returns the member's key as it appears between its quotes.
func (n *node) key(raw []byte) []byte { return raw[n.keyStart+1 : n.keyEnd-1] }

// parseErrKind classifies a decoding failure.
type parseErrKind uint8

const (
	parseOK parseErrKind = iota
	parseEmpty
	parseNotObject
	parseSyntax
	parseUTF8
	parseDepth
)

// parseError describes why the input is not an acceptable JSON object. It is
// a value, not an error, so the successful path allocates nothing.
type parseError struct {
	kind parseErrKind
	off  int
	msg  string
}

// maxRetainedNodes bounds the tape kept between records (24 bytes a node).
const maxRetainedNodes = 1 << 14

// tape is the reusable state of the decoder. The zero value is ready to use.
type tape struct {
	nodes     []node
	stack     []int32 // open containers
	nonFinite int     // nodes flagged flagNonFinite
}

// strSafe marks bytes that may appear unescaped in a JSON string and need no
// further attention: printable ASCII other than '"' and '\\'.
var strSafe = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// startsWith names what a non-object document starts with.
func startsWith(b []byte) string {
	switch c := b[0]; {
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == '-' || isDigit(c):
		return "a number"
	case hasPrefix(b, "true"), hasPrefix(b, "false"):
		return "a boolean"
	case hasPrefix(b, "null"):
		return "null"
	case hasPrefix(b, "\xef\xbb\xbf"):
		return "a UTF-8 byte order mark"
	}
	return describe(b, 0)
}

func syntaxErr(off int, msg string) parseError { return parseError{parseSyntax, off, msg} }

// describe renders the byte at off for an error message.
func describe(b []byte, off int) string {
	if off >= len(b) {
		return "end of input"
	}
	return "character " + strconv.QuoteRune(rune(b[off]))
}

// parse decodes b, which must hold exactly one JSON object (surrounding
// whitespace allowed) nested at most maxDepth containers deep. On success
// t.nodes[0] is the object.
func (t *tape) parse(b []byte, maxDepth int) parseError {
	if cap(t.nodes) > maxRetainedNodes {
		t.nodes = nil // let one huge record's tape go
	}
	nodes, stack, perr := t.run(b, maxDepth, t.nodes[:0], t.stack[:0])
	t.nodes, t.stack = nodes, stack
	return perr
}

// run is parse's loop, on local slices (it is the hot path).
func (t *tape) run(b []byte, maxDepth int, nodes []node, stack []int32) ([]node, []int32, parseError) {
	t.nonFinite = 0
	if len(b) > math.MaxInt32 {
		return nodes, stack, syntaxErr(0, "input too large")
	}
	n := len(b)
	i := skipWS(b, 0)
	if i == n {
		return nodes, stack, parseError{parseEmpty, i, "no JSON value"}
	}
	if b[i] != '{' {
		return nodes, stack, parseError{parseNotObject, i, startsWith(b[i:])}
	}
	var (
		perr   parseError
		ks, ke int   // the pending member's key span; 0, 0 in arrays
		kf     uint8 // its key flags
	)
	for {
		// A value starts at b[i]; whitespace before it is skipped.
		if i >= n {
			return nodes, stack, syntaxErr(i, "unexpected end of input, expecting a value")
		}
		// The node is written in place: building it on the stack and
		// appending it costs a store-forwarding stall per node.
		idx := len(nodes)
		if idx == cap(nodes) {
			nodes = slices.Grow(nodes, 1)
		}
		nodes = nodes[:idx+1]
		nd := &nodes[idx]
		nd.start, nd.end, nd.keyStart, nd.keyEnd, nd.next = int32(i), 0, int32(ks), int32(ke), int32(idx+1)
		nd.kind, nd.flags = 0, kf
		switch c := b[i]; {
		case c == '"':
			j, flags, perr := scanString(b, i)
			if perr.kind != parseOK {
				return nodes, stack, perr
			}
			nd.end, nd.kind, nd.flags = int32(j), kindString, nd.flags|flags
			i = j
		case c == '-' || (c >= '0' && c <= '9'):
			if c == '-' && i+1 < n && isLetter(b[i+1]) {
				if i, perr = t.nonFiniteWord(b, i, nd); perr.kind != parseOK {
					return nodes, stack, perr
				}
				break
			}
			j, flags, perr := scanNumber(b, i)
			if perr.kind != parseOK {
				return nodes, stack, perr
			}
			nd.end, nd.kind, nd.flags = int32(j), kindNumber, nd.flags|flags
			if flags&flagNonFinite != 0 {
				t.nonFinite++
			}
			i = j
		case c == '{' || c == '[':
			if len(stack) >= maxDepth {
				return nodes, stack, parseError{parseDepth, i, "nesting deeper than " + strconv.Itoa(maxDepth)}
			}
			k, closer := kindObject, byte('}')
			if c == '[' {
				k, closer = kindArray, ']'
			}
			nd.kind = k
			stack = append(stack, int32(idx))
			ks, ke, kf = 0, 0, 0
			if i = skipWS(b, i+1); i < n && b[i] == closer {
				goto closeContainers // empty container
			}
			if k == kindObject {
				if ks, ke, kf, i, perr = scanKey(b, i); perr.kind != parseOK {
					return nodes, stack, perr
				}
			}
			continue
		case c == 't':
			if !hasPrefix(b[i:], "true") {
				return nodes, stack, syntaxErr(i, "invalid literal, expecting true")
			}
			i += 4
			nd.end, nd.kind = int32(i), kindTrue
		case c == 'f':
			if !hasPrefix(b[i:], "false") {
				return nodes, stack, syntaxErr(i, "invalid literal, expecting false")
			}
			i += 5
			nd.end, nd.kind = int32(i), kindFalse
		case c == 'n' && hasPrefix(b[i:], "null"):
			i += 4
			nd.end, nd.kind = int32(i), kindNull
		case c == '+' || isLetter(c):
			if i, perr = t.nonFiniteWord(b, i, nd); perr.kind != parseOK {
				return nodes, stack, perr
			}
		default:
			return nodes, stack, syntaxErr(i, "invalid "+describe(b, i)+" looking for the beginning of a value")
		}

	closeContainers:
		// After a value: close containers or move to the next member.
		for {
			if len(stack) == 0 {
				if i = skipWS(b, i); i != n {
					return nodes, stack, syntaxErr(i, "invalid "+describe(b, i)+" after the top-level object")
				}
				return nodes, stack, parseError{}
			}
			if i = skipWS(b, i); i >= n {
				return nodes, stack, syntaxErr(i, "unexpected end of input")
			}
			top := stack[len(stack)-1]
			obj := nodes[top].kind == kindObject
			c := b[i]
			if c == ',' {
				i = skipWS(b, i+1)
				if !obj {
					break
				}
				if ks, ke, kf, i, perr = scanKey(b, i); perr.kind != parseOK {
					return nodes, stack, perr
				}
				break
			}
			if (obj && c == '}') || (!obj && c == ']') {
				i++
				nodes[top].end = int32(i)
				nodes[top].next = int32(len(nodes))
				stack = stack[:len(stack)-1]
				continue
			}
			if obj {
				return nodes, stack, syntaxErr(i, "invalid "+describe(b, i)+" after an object member, expecting ',' or '}'")
			}
			return nodes, stack, syntaxErr(i, "invalid "+describe(b, i)+" after an array element, expecting ',' or ']'")
		}
	}
}

// keySafe marks the bytes a key may hold without a second look: printable
// ASCII other than '"', '\\', '.' and '/'.
var keySafe = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '"' && c != '\\' && c != '.' && c != '/'
	}
	return t
}()

// scanKey parses an object key at b[i], the colon after it, and the
// whitespace before the value. It returns the key's span and flags and the
// index of the value.
func scanKey(b []byte, i int) (ks, ke int, flags uint8, next int, perr parseError) {
	if i >= len(b) || b[i] != '"' {
		return 0, 0, 0, i, syntaxErr(i, "invalid "+describe(b, i)+" looking for the beginning of an object key")
	}
	j := i + 1
	for j < len(b) && keySafe[b[j]] {
		j++
	}
	if j < len(b) && b[j] == '"' && j > i+1 {
		j++ // the common key: plain and non-empty
	} else {
		var sf uint8
		if j, sf, perr = scanString(b, i); perr.kind != parseOK {
			return 0, 0, 0, j, perr
		}
		flags = flagKeySpecial
		if sf&flagEscaped != 0 {
			flags |= flagKeyEscaped
		}
	}
	k := skipWS(b, j)
	if k >= len(b) || b[k] != ':' {
		return 0, 0, 0, k, syntaxErr(k, "invalid "+describe(b, k)+" after an object key, expecting ':'")
	}
	return i, j, flags, skipWS(b, k+1), parseError{}
}

// nonFiniteWord accepts the spellings of NaN and Infinity that JavaScript,
// Python and others emit (NaN, Infinity, -Infinity, inf, nan, any case, with
// an optional sign). They are not JSON; the gate rejects them with a reason
// naming the field rather than as a syntax error somewhere in the payload.
func (t *tape) nonFiniteWord(b []byte, i int, nd *node) (int, parseError) {
	j := i
	if b[j] == '-' || b[j] == '+' {
		j++
	}
	w := j
	for j < len(b) && isLetter(b[j]) {
		j++
	}
	switch {
	case equalFoldASCII(b[w:j], "nan"), equalFoldASCII(b[w:j], "inf"), equalFoldASCII(b[w:j], "infinity"):
		t.nonFinite++
		nd.end, nd.kind, nd.flags = int32(j), kindNumber, nd.flags|flagNonFinite
		return j, parseError{}
	}
	return i, syntaxErr(i, "invalid "+describe(b, i)+" looking for the beginning of a value")
}

// scanString scans the string starting at the quote b[i] and returns the
// index after its closing quote.
func scanString(b []byte, i int) (int, uint8, parseError) {
	var flags uint8
	j := i + 1
	for {
		for j < len(b) && strSafe[b[j]] {
			j++
		}
		if j >= len(b) {
			return j, 0, syntaxErr(j, "unexpected end of input in a string")
		}
		switch c := b[j]; {
		case c == '"':
			return j + 1, flags, parseError{}
		case c == '\\':
			flags |= flagEscaped
			if j+1 >= len(b) {
				return j, 0, syntaxErr(j, "unexpected end of input in a string escape")
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(b) || !isHex(b[j+2]) || !isHex(b[j+3]) || !isHex(b[j+4]) || !isHex(b[j+5]) {
					return j, 0, syntaxErr(j, "invalid \\u escape in a string")
				}
				j += 6
			default:
				return j, 0, syntaxErr(j, "invalid escape "+strconv.Quote(string(b[j:j+2]))+" in a string")
			}
		case c < 0x20:
			return j, 0, syntaxErr(j, "control character "+strconv.QuoteRune(rune(c))+" in a string must be escaped")
		default:
			r, size := utf8.DecodeRune(b[j:])
			if r == utf8.RuneError && size <= 1 {
				return j, 0, parseError{parseUTF8, j, "invalid UTF-8"}
			}
			j += size
		}
	}
}

// scanNumber scans a JSON number starting at b[i] and returns the index after it.
func scanNumber(b []byte, i int) (int, uint8, parseError) {
	var flags uint8
	n := len(b)
	j := i
	if b[j] == '-' {
		j++
	}
	switch {
	case j < n && b[j] == '0':
		j++
	case j < n && b[j] >= '1' && b[j] <= '9':
		for j < n && isDigit(b[j]) {
			j++
		}
	default:
		return j, 0, syntaxErr(j, "invalid "+describe(b, j)+" in a number, expecting a digit")
	}
	intEnd := j
	exp := false
	if j < n && b[j] == '.' {
		j++
		if j >= n || !isDigit(b[j]) {
			return j, 0, syntaxErr(j, "invalid "+describe(b, j)+" after a decimal point, expecting a digit")
		}
		for j < n && isDigit(b[j]) {
			j++
		}
		flags |= flagFraction
	}
	if j < n && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < n && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if j >= n || !isDigit(b[j]) {
			return j, 0, syntaxErr(j, "invalid "+describe(b, j)+" in an exponent, expecting a digit")
		}
		for j < n && isDigit(b[j]) {
			j++
		}
		flags |= flagFraction
		exp = true
	}
	if j < n && (isDigit(b[j]) || isLetter(b[j]) || b[j] == '.' || b[j] == '+' || b[j] == '-') {
		return j, 0, syntaxErr(j, "invalid "+describe(b, j)+" in a number")
	}
	// Only an exponent or more than 308 integer digits can overflow float64.
	if exp || intEnd-i > 300 {
		if f, _ := strconv.ParseFloat(bytesString(b[i:j]), 64); math.IsInf(f, 0) {
			flags |= flagNonFinite
		}
	}
	return j, flags, parseError{}
}

// pow10 holds the powers of ten float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// parseNumber converts a JSON number literal validated by scanNumber (and
// finite). Literals of at most 15 significant digits without an exponent,
// the usual case, take Clinger's fast path: the digits are an exact float64
// and one division by an exact power of ten rounds correctly. The rest go
// to strconv.ParseFloat.
func parseNumber(lit []byte) float64 {
	var m uint64
	digits, frac := 0, -1
	i := 0
	if lit[0] == '-' {
		i++
	}
	for ; i < len(lit); i++ {
		c := lit[i]
		switch {
		case c == '.':
			frac = 0
			continue
		case c < '0' || c > '9', digits == 15:
			f, _ := strconv.ParseFloat(bytesString(lit), 64)
			return f
		}
		m = m*10 + uint64(c-'0')
		digits++
		if frac >= 0 {
			frac++
		}
	}
	f := float64(m)
	if frac > 0 {
		f /= pow10[frac]
	}
	if lit[0] == '-' {
		f = -f
	}
	return f
}

func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isLetter(c byte) bool { return (c|0x20) >= 'a' && (c|0x20) <= 'z' }
func isHex(c byte) bool    { return isDigit(c) || ((c|0x20) >= 'a' && (c|0x20) <= 'f') }

func hasPrefix(b []byte, p string) bool { return len(b) >= len(p) && string(b[:len(p)]) == p }

func equalFoldASCII(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := range b {
		if b[i]|0x20 != lower[i] {
			return false
		}
	}
	return true
}

// bytesString views b as a string without copying. The string must not
// outlive b's current contents.
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// content returns the bytes between a string node's quotes (still escaped).
func content(raw []byte, n *node) []byte { return raw[n.start+1 : n.end-1] }

// appendUnescaped appends the decoded form of s, the escaped content of a
// JSON string validated by scanString. Unpaired surrogates become U+FFFD, as
// in encoding/json.
func appendUnescaped(dst, s []byte) []byte {
	for len(s) > 0 {
		r, size, esc := nextRune(s)
		if esc {
			dst = utf8.AppendRune(dst, r)
		} else {
			dst = append(dst, s[0])
		}
		s = s[size:]
	}
	return dst
}

// nextRune decodes the next unit of escaped string content: either one raw
// byte (esc false; r is that byte) or one escape sequence (esc true).
func nextRune(s []byte) (r rune, size int, esc bool) {
	if s[0] != '\\' {
		return rune(s[0]), 1, false
	}
	switch s[1] {
	case 'b':
		return '\b', 2, true
	case 'f':
		return '\f', 2, true
	case 'n':
		return '\n', 2, true
	case 'r':
		return '\r', 2, true
	case 't':
		return '\t', 2, true
	case 'u':
		r1 := hex4(s[2:6])
		if utf16.IsSurrogate(r1) {
			if len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
				if r := utf16.DecodeRune(r1, hex4(s[8:12])); r != utf8.RuneError {
					return r, 12, true
				}
			}
			return utf8.RuneError, 6, true
		}
		return r1, 6, true
	default: // '"', '\\', '/'
		return rune(s[1]), 2, true
	}
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c <= '9':
			r = r<<4 | rune(c-'0')
		default:
			r = r<<4 | rune(c|0x20-'a'+10)
		}
	}
	return r
}

// keyEquals reports whether the key of member n, decoded, equals key. It
// decodes escapes on the fly, so it needs no buffer.
func keyEquals(raw []byte, n *node, key string) bool {
	if n.flags&flagKeyEscaped == 0 {
		// Lengths first: most keys differ in length from the one sought.
		return int(n.keyEnd-n.keyStart) == len(key)+2 && string(raw[n.keyStart+1:n.keyEnd-1]) == key
	}
	s := n.key(raw)
	var buf [utf8.UTFMax]byte
	for len(s) > 0 {
		r, size, esc := nextRune(s)
		var unit []byte
		if esc {
			unit = utf8.AppendRune(buf[:0], r)
		} else {
			unit = s[:1]
		}
		s = s[size:]
		if len(key) < len(unit) || key[:len(unit)] != string(unit) {
			return false
		}
		key = key[len(unit):]
	}
	return key == ""
}

// lookup returns the index of the value stored under key in the object node
// obj, or -1. With duplicate keys the first wins (the gate rejects
// duplicates at the envelope and data level).
func lookup(raw []byte, nodes []node, obj int32, key string) int32 {
	end := nodes[obj].next
	for k := obj + 1; k < end; k = nodes[k].next {
		if keyEquals(raw, &nodes[k], key) {
			return k
		}
	}
	return -1
}
