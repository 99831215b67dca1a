package event

import (
	"regexp/syntax"
	"slices"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// This file is the gate's pattern matcher: a DFA built at NewGate time for
// the patterns whose whole-string language it can decide exactly, so the
// hot path does not run regexp's general machinery (regexp costs ~200 ns
// for a 10-byte user_id, this ~1–2 ns a byte).
//
// It claims a pattern when every character class treats non-ASCII runes all
// alike (all in, or all out: `[a-z0-9_-]`, `\d`, `.`, `[^/]` qualify;
// `[é]` and `(?i)k`, which folds to the Kelvin sign, do not), the only
// empty-width assertions are `^` and `$` without (?m) (begin and end of
// text), and the automaton stays small. Its alphabet is then the 128 ASCII
// bytes plus one symbol for "a non-ASCII rune", decoded as regexp decodes
// its input (utf8.DecodeRune: an invalid byte is U+FFFD of width 1), so it
// accepts exactly the strings `^(?:pattern)$` matches. Anything else stays
// with regexp. TestPatternDFAMatchesRegexp and FuzzPatternDFA hold it to
// that.

// maxDFAStates bounds the automaton; a pattern needing more stays with
// regexp. maxDFAInsts bounds the compiled program it is built from.
const (
	maxDFAStates = 1024
	maxDFAInsts  = 4096
)

// symNonASCII is the alphabet symbol for any rune ≥ 0x80.
const symNonASCII = 128

// patternDFA decides whether a whole string matches a pattern.
type patternDFA struct {
	class   [256]uint8 // byte -> symbol class; every byte ≥ 0x80 -> the non-ASCII class
	ncls    int
	anyWide bool     // some non-ASCII rune can be consumed somewhere
	next    []uint32 // state + class -> state; a state is its row's offset, 0 the dead one
	accept  []bool   // state -> the input may end here
	start   uint32

	// Two bytes per step, for DFAs without non-ASCII transitions and with
	// few classes: each step is a load that depends on the one before, so
	// halving the steps halves the chain. A state here is its row's offset
	// at stride ncls².
	pair       []uint32    // state + pairClass[a] + class[b] -> state after a, b
	pair1      []uint32    // state + class[a] -> state after a (an odd last byte)
	pairAccept []bool      // state -> the input may end here
	pairStart  uint32      //
	pairClass  [256]uint32 // class * ncls
}

// maxPairEntries bounds each two-byte table (states × classes²).
const maxPairEntries = 8192

// match reports whether the whole of s is in the pattern's language.
func (d *patternDFA) match(s []byte) bool {
	if d.anyWide {
		return d.matchWide(s)
	}
	if d.pair != nil {
		st := d.pairStart
		i := 0
		for ; i+1 < len(s); i += 2 {
			st = d.pair[st+d.pairClass[s[i]]+uint32(d.class[s[i+1]])]
			if st == 0 {
				return false
			}
		}
		if i < len(s) {
			st = d.pair1[st+uint32(d.class[s[i]])]
		}
		return d.pairAccept[st]
	}
	// No non-ASCII rune is consumed anywhere: a byte ≥ 0x80 leads to the
	// dead state through the table like any other mismatch.
	st, next, class := d.start, d.next, &d.class
	for _, c := range s {
		st = next[st+uint32(class[c])]
		if st == 0 {
			return false
		}
	}
	return d.accept[st]
}

// matchWide is match for DFAs that consume non-ASCII runes: a rune of
// several bytes is one symbol.
func (d *patternDFA) matchWide(s []byte) bool {
	st, next, class := d.start, d.next, &d.class
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
		} else {
			_, w := utf8.DecodeRune(s[i:])
			i += w
		}
		st = next[st+uint32(class[c])]
		if st == 0 {
			return false
		}
	}
	return d.accept[st]
}

// compilePatternDFA builds the DFA for pattern, parsed as regexp.Compile
// parses it, or returns nil when the pattern is outside what it claims.
func compilePatternDFA(pattern string) *patternDFA {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil || len(prog.Inst) > maxDFAInsts {
		return nil
	}
	c := dfaCompiler{prog: prog, mark: make([]uint32, len(prog.Inst)), wide: make([]bool, len(prog.Inst))}
	for pc := range prog.Inst {
		in := &prog.Inst[pc]
		switch in.Op {
		case syntax.InstAlt, syntax.InstAltMatch, syntax.InstCapture, syntax.InstNop, syntax.InstFail, syntax.InstMatch:
		case syntax.InstEmptyWidth:
			if syntax.EmptyOp(in.Arg)&^(syntax.EmptyBeginText|syntax.EmptyEndText) != 0 {
				return nil
			}
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			all, none := wideCoverage(in)
			if !all && !none {
				return nil
			}
			c.wide[pc] = all
		default:
			return nil
		}
	}
	return c.build()
}

// wideCoverage reports whether the rune instruction in matches every
// non-ASCII rune utf8.DecodeRune can return (all) or none of them.
func wideCoverage(in *syntax.Inst) (all, none bool) {
	switch in.Op {
	case syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
		return true, false
	case syntax.InstRune1:
		return false, in.Rune[0] < utf8.RuneSelf
	}
	if len(in.Rune) == 1 {
		r0 := in.Rune[0]
		if r0 >= utf8.RuneSelf {
			return false, false
		}
		if syntax.Flags(in.Arg)&syntax.FoldCase != 0 {
			for r := unicode.SimpleFold(r0); r != r0; r = unicode.SimpleFold(r) {
				if r >= utf8.RuneSelf {
					return false, false
				}
			}
		}
		return false, true
	}
	// Pairs of inclusive ranges, sorted and disjoint (a cleaned class).
	const surLo, surHi = 0xD800, 0xDFFF
	span := func(lo, hi rune) int64 { // runes in [lo, hi] DecodeRune can yield, above ASCII
		lo = max(lo, utf8.RuneSelf)
		hi = min(hi, unicode.MaxRune)
		if lo > hi {
			return 0
		}
		n := int64(hi - lo + 1)
		if a, b := max(lo, surLo), min(hi, surHi); a <= b {
			n -= int64(b - a + 1)
		}
		return n
	}
	var n int64
	for i := 0; i+1 < len(in.Rune); i += 2 {
		n += span(in.Rune[i], in.Rune[i+1])
	}
	return n == span(0, unicode.MaxRune), n == 0
}

// dfaCompiler runs the subset construction. A DFA state is a kernel: the
// sorted program counters reached right after consuming a symbol (or the
// program's start), closed over empty transitions only when stepped or
// tested for acceptance, because `^` and `$` hold only at the start and
// the end of the input.
type dfaCompiler struct {
	prog  *syntax.Prog
	wide  []bool   // rune instruction matches every non-ASCII rune
	mark  []uint32 // closure visit stamps
	stamp uint32
	stack []uint32
}

// closure follows empty transitions from kernel; begin and end say whether
// the position is the start and the end of the input. It returns the rune
// instructions reached and whether Match was.
func (c *dfaCompiler) closure(kernel []uint32, begin, end bool, runes []uint32) ([]uint32, bool) {
	c.stamp++
	matched := false
	c.stack = append(c.stack[:0], kernel...)
	for len(c.stack) > 0 {
		pc := c.stack[len(c.stack)-1]
		c.stack = c.stack[:len(c.stack)-1]
		if c.mark[pc] == c.stamp {
			continue
		}
		c.mark[pc] = c.stamp
		in := &c.prog.Inst[pc]
		switch in.Op {
		case syntax.InstAlt, syntax.InstAltMatch:
			c.stack = append(c.stack, in.Arg, in.Out)
		case syntax.InstCapture, syntax.InstNop:
			c.stack = append(c.stack, in.Out)
		case syntax.InstEmptyWidth:
			op := syntax.EmptyOp(in.Arg)
			if (op&syntax.EmptyBeginText == 0 || begin) && (op&syntax.EmptyEndText == 0 || end) {
				c.stack = append(c.stack, in.Out)
			}
		case syntax.InstMatch:
			matched = true
		case syntax.InstFail:
		default: // a rune instruction
			runes = append(runes, pc)
		}
	}
	return runes, matched
}

// matches reports whether rune instruction pc consumes symbol sym.
func (c *dfaCompiler) matches(pc uint32, sym int) bool {
	if sym == symNonASCII {
		return c.wide[pc]
	}
	in := &c.prog.Inst[pc]
	switch in.Op {
	case syntax.InstRuneAny:
		return true
	case syntax.InstRuneAnyNotNL:
		return sym != '\n'
	case syntax.InstRune1:
		return rune(sym) == in.Rune[0]
	}
	return in.MatchRune(rune(sym))
}

func (c *dfaCompiler) build() *patternDFA {
	d := &patternDFA{}
	// Symbols that every rune instruction treats alike share a class.
	var runePCs []uint32
	for pc := range c.prog.Inst {
		switch c.prog.Inst[pc].Op {
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			runePCs = append(runePCs, uint32(pc))
		}
	}
	classOf := map[string]uint8{}
	var reps []int // a representative symbol per class
	sig := make([]byte, len(runePCs))
	for sym := 0; sym <= symNonASCII; sym++ {
		for i, pc := range runePCs {
			sig[i] = '0'
			if c.matches(pc, sym) {
				sig[i] = '1'
			}
		}
		k, ok := classOf[string(sig)]
		if !ok {
			if len(reps) == 256 {
				return nil
			}
			k = uint8(len(reps))
			classOf[string(sig)] = k
			reps = append(reps, sym)
		}
		d.class[sym] = k
	}
	for b := symNonASCII + 1; b < len(d.class); b++ {
		d.class[b] = d.class[symNonASCII]
	}
	d.ncls = len(reps)

	// States: 0 dead, then discovery order. The start state is the only
	// one closed with begin true, so it is keyed apart from its kernel.
	type state struct {
		kernel []uint32
		begin  bool
	}
	ids := map[string]uint32{}
	states := []state{{}}
	key := func(kernel []uint32, begin bool) string {
		b := make([]byte, 0, 1+4*len(kernel))
		if begin {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		for _, pc := range kernel {
			b = strconv.AppendUint(b, uint64(pc), 10)
			b = append(b, ',')
		}
		return string(b)
	}
	intern := func(kernel []uint32, begin bool) (uint32, bool) {
		if len(kernel) == 0 {
			return 0, true
		}
		k := key(kernel, begin)
		if id, ok := ids[k]; ok {
			return id, true
		}
		if len(states) >= maxDFAStates {
			return 0, false
		}
		id := uint32(len(states) * d.ncls) // the row's offset
		ids[k] = id
		states = append(states, state{kernel, begin})
		return id, true
	}
	start, _ := intern([]uint32{uint32(c.prog.Start)}, true)
	d.start = start
	d.next = make([]uint32, d.ncls) // the dead state's row
	d.accept = make([]bool, d.ncls)
	seen := make([]bool, len(c.prog.Inst))
	for s := 1; s < len(states); s++ {
		st := states[s]
		_, acc := c.closure(st.kernel, st.begin, true, nil)
		for range d.ncls {
			d.accept = append(d.accept, acc)
		}
		runes, _ := c.closure(st.kernel, st.begin, false, nil)
		for _, rep := range reps {
			var kernel []uint32
			for _, pc := range runes {
				if out := c.prog.Inst[pc].Out; c.matches(pc, rep) && !seen[out] {
					seen[out] = true
					kernel = append(kernel, out)
				}
			}
			for _, pc := range kernel {
				seen[pc] = false
			}
			slices.Sort(kernel)
			id, ok := intern(kernel, false)
			if !ok {
				return nil
			}
			d.next = append(d.next, id)
		}
	}
	for s := 1; s < len(states); s++ {
		if d.next[s*d.ncls+int(d.class[symNonASCII])] != 0 {
			d.anyWide = true
		}
	}
	if p := d.ncls * d.ncls; !d.anyWide && len(states)*p <= maxPairEntries {
		d.buildPairs(len(states))
	}
	return d
}

// buildPairs fills the two-byte tables from next.
func (d *patternDFA) buildPairs(nstates int) {
	n, p := d.ncls, d.ncls*d.ncls
	d.pair = make([]uint32, nstates*p)
	d.pair1 = make([]uint32, nstates*p)
	d.pairAccept = make([]bool, nstates*p)
	to := func(row uint32) uint32 { return row / uint32(n) * uint32(p) } // stride ncls -> ncls²
	for q := range nstates {
		row := q * n
		for a := range n {
			mid := d.next[row+a]
			d.pair1[q*p+a] = to(mid)
			for b := range n {
				d.pair[q*p+a*n+b] = to(d.next[int(mid)+b]) // the dead row leads to itself
			}
		}
		d.pairAccept[q*p] = d.accept[row]
	}
	d.pairStart = to(d.start)
	for c := range d.pairClass {
		d.pairClass[c] = uint32(d.class[c]) * uint32(n)
	}
}
