package event

import (
	"math"
	"regexp"
	"strconv"
)

// Gate rules: the compiled form of the configured field rules and the
// checks of one field against its rule.

// typeRules are the compiled rules of one event type.
type typeRules struct {
	name   string
	fields []fieldRule    // sorted by name
	index  map[string]int // name -> fields index, for types with many fields
}

// valueType is a FieldRule.Type.
type valueType uint8

const (
	typeAny valueType = iota
	typeString
	typeNumber
	typeInteger
	typeBoolean
	typeObject
	typeArray
)

var valueTypes = map[string]valueType{
	"": typeAny, "string": typeString, "number": typeNumber, "integer": typeInteger,
	"boolean": typeBoolean, "object": typeObject, "array": typeArray,
}

// article names a type with its article, for "must be ..." reasons.
func (t valueType) article() string {
	switch t {
	case typeString:
		return "a string"
	case typeNumber:
		return "a number"
	case typeInteger:
		return "an integer"
	case typeBoolean:
		return "a boolean"
	case typeObject:
		return "an object"
	case typeArray:
		return "an array"
	}
	return "any value"
}

// fieldRule is a compiled FieldRule.
type fieldRule struct {
	name           string // key in data
	field          string // "data.<name>"
	required       bool
	typ            valueType
	re             *regexp.Regexp // anchored
	dfa            *patternDFA    // re's language when the DFA can decide it; nil: use re
	pattern        string         // as configured, for reasons
	min, max       float64
	hasMin, hasMax bool
	minLen, maxLen int
	enum           []string
}

func compileField(at, name string, fr FieldRule, bad func(string, ...any)) (fieldRule, bool) {
	ok := true
	fail := func(format string, a ...any) {
		bad(at+format, a...)
		ok = false
	}
	if why := badKeyName([]byte(name)); why != "" {
		fail(": field name %s", why)
	}
	r := fieldRule{
		name: name, field: "data." + name, required: fr.Required, pattern: fr.Pattern,
		minLen: fr.MinLen, maxLen: fr.MaxLen, enum: fr.Enum,
	}
	typ, known := valueTypes[fr.Type]
	if !known {
		fail(".type: %q is not one of string, number, integer, boolean, object, array", fr.Type)
	}
	strRules := fr.Pattern != "" || fr.MinLen != 0 || fr.MaxLen != 0 || len(fr.Enum) > 0
	numRules := fr.Min != nil || fr.Max != nil
	switch {
	case !known:
	case typ == typeAny && strRules && numRules:
		fail(": has string (pattern, min_len, max_len, enum) and number (min, max) constraints; set type")
	case typ == typeAny && strRules:
		typ = typeString // a constraint implies its type: {pattern: ...} means a string
	case typ == typeAny && numRules:
		typ = typeNumber
	case strRules && typ != typeString:
		fail(": pattern, min_len, max_len and enum apply to strings, not type %s", fr.Type)
	case numRules && typ != typeNumber && typ != typeInteger:
		fail(": min and max apply to numbers and integers, not type %s", fr.Type)
	}
	r.typ = typ
	if fr.Min != nil {
		r.min, r.hasMin = *fr.Min, true
		if math.IsNaN(r.min) {
			fail(".min: NaN")
		}
	}
	if fr.Max != nil {
		r.max, r.hasMax = *fr.Max, true
		if math.IsNaN(r.max) {
			fail(".max: NaN")
		}
	}
	if r.hasMin && r.hasMax && r.min > r.max {
		fail(": min %v > max %v", r.min, r.max)
	}
	if fr.MinLen < 0 {
		fail(".min_len: %d is negative", fr.MinLen)
	}
	if fr.MaxLen < 0 {
		fail(".max_len: %d is negative", fr.MaxLen)
	}
	if fr.MaxLen > 0 && fr.MinLen > fr.MaxLen {
		fail(": min_len %d > max_len %d", fr.MinLen, fr.MaxLen)
	}
	if fr.Pattern != "" {
		// Compile the pattern alone first: wrapping an unbalanced pattern
		// such as "a)|(b" would silently change its meaning.
		if _, err := regexp.Compile(fr.Pattern); err != nil {
			fail(".pattern: %v", err)
		} else {
			r.re = regexp.MustCompile(`^(?:` + fr.Pattern + `)$`)
			r.dfa = compilePatternDFA(fr.Pattern)
		}
	}
	return r, ok
}

func (tr *typeRules) find(name []byte) int {
	if tr.index != nil {
		if i, ok := tr.index[string(name)]; ok {
			return i
		}
		return -1
	}
	for i := range tr.fields {
		if tr.fields[i].name == string(name) {
			return i
		}
	}
	return -1
}

// matchPattern reports whether the whole of s matches the field's pattern.
func (r *fieldRule) matchPattern(s []byte) bool {
	if r.dfa != nil {
		return r.dfa.match(s)
	}
	return r.re.Match(s)
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// isEventType reports whether s matches ^[a-z0-9]+(\.[a-z0-9]+)+$.
func isEventType(s string) bool {
	dots, run := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.':
			if run == 0 {
				return false
			}
			dots, run = dots+1, 0
		case isDigit(c) || (c >= 'a' && c <= 'z'):
			run++
		default:
			return false
		}
	}
	return dots > 0 && run > 0
}
