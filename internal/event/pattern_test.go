package event

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// patternCases are the configured patterns (deploy/reckon.yaml) and the
// shapes that stress the DFA's claim: alternation that needs no
// backtracking only in a DFA, anchors, classes around the ASCII boundary,
// case folding, and repeats.
var patternCases = []struct {
	pattern string
	claimed bool // the DFA must take it (configured patterns must stay fast)
}{
	{"sensor-[0-9]{2}", true},
	{"[A-Za-z0-9_-]{1,64}", true},
	{"[0-9]{16}", true},
	{"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+(Z|[+-][0-9]{2}:[0-9]{2})", true},
	{"[a-z0-9_-]{3,64}", true},
	{"", true},
	{"a*", true},
	{"a|b", true},
	{"|a", true},
	{"(a|ab)(c|bcd)(d*)", true},
	{"[a-c]{1,5}[b-d]", true},
	{"a+?b*?", true},
	{"(?U)a+b", true},
	{"(a{2}){0,3}", true},
	{"x{0}", true},
	{`\d{2,4}`, true},
	{`\w+`, true},
	{`[[:alpha:]]+`, true},
	{"(?i)abc", true},
	{"(?i)[a-f]+", true},
	{"^abc$", true},
	{"^", true},
	{"$", true},
	{"a^b", true},
	{"a$b", true},
	{"(^a|b)+", true},
	{"(a$|b)+", true},
	{`\Aab\z`, true},
	{"[^a-z]+", true},
	{".", true},
	{".*", true},
	{"(?s).*", true},
	{"a.c", true},
	{`\S+`, true},
	{`\D`, true},
	{`[^\x00-\x7f]`, true},
	{`[\x{80}-\x{10FFFF}]+`, true},
	{`[\x{80}-\x{D7FF}\x{E000}-\x{10FFFF}]`, true},
	{`[^/]+/[^/]+`, true},
	{"\x00+", true},
	{"(?i)k", false},  // folds to U+212A KELVIN SIGN
	{"(?i)s+", false}, // folds to U+017F LONG S
	{"é+", false},
	{"[é-ü]", false},
	{`\x{FFFD}`, false},
	{`[\x{80}-\x{FFFC}]`, false},
	{`\pL+`, false},
	{`\b`, false},
	{`a\Bb`, false},
	{"(?m)^a$", false},
	{"(?m)a$", false},
}

// patternAlphabet holds the pieces test inputs are made of: the patterns'
// own characters, the ASCII boundary, newlines, invalid UTF-8 and the
// non-ASCII case folds of ASCII letters.
var patternAlphabet = []string{
	"a", "b", "c", "d", "k", "s", "x", "A", "K", "Z", "T", "0", "7", "9", "-", "_", ":", ".", "+", "/", " ",
	"\n", "\r", "\x00", "\x7f", "\x80", "\xff", "\xc3", "é", "ü", "\u212a", "\u017f", "\ufffd", "\U0010ffff", "sensor-", "ab", "bcd",
}

// TestPatternDFAMatchesRegexp checks the DFA against regexp on every short
// string over patternAlphabet and on random longer ones, for every pattern
// it claims, and that it claims what it should.
func TestPatternDFAMatchesRegexp(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range patternCases {
		ref := regexp.MustCompile(`^(?:` + tc.pattern + `)$`)
		d := compilePatternDFA(tc.pattern)
		if (d != nil) != tc.claimed {
			t.Errorf("pattern %q: claimed %v, want %v", tc.pattern, d != nil, tc.claimed)
		}
		if d == nil {
			continue
		}
		single := *d // the same DFA stepping one byte at a time
		single.pair = nil
		check := func(s string) {
			want := ref.MatchString(s)
			if got := d.match([]byte(s)); got != want {
				t.Errorf("pattern %q, input %q: DFA %v, regexp %v", tc.pattern, s, got, want)
			}
			if got := single.match([]byte(s)); got != want {
				t.Errorf("pattern %q, input %q: one-byte DFA %v, regexp %v", tc.pattern, s, got, want)
			}
		}
		var gen func(prefix string, depth int)
		gen = func(prefix string, depth int) {
			check(prefix)
			if depth == 0 {
				return
			}
			for _, p := range patternAlphabet {
				gen(prefix+p, depth-1)
			}
		}
		gen("", 3)
		for range 3000 {
			var b strings.Builder
			for range rng.IntN(80) {
				b.WriteString(patternAlphabet[rng.IntN(len(patternAlphabet))])
			}
			check(b.String())
		}
		// Inputs that match, and near misses of them.
		for _, s := range []string{
			"sensor-07", "user-00042", "9287440300090728", "2026-11-07T22:00:00+03:00",
			"2026-11-07T22:00:00.5Z", strings.Repeat("a", 64), strings.Repeat("a", 65), "abcd", "aabb",
		} {
			check(s)
			for i := 0; i <= len(s); i++ {
				check(s[:i])
				for _, p := range []string{"x", "\n", "é", "\xff", "-"} {
					check(s[:i] + p + s[i:])
				}
			}
		}
	}
}

// TestGatePatternUsesDFA makes sure the configured patterns take the fast
// path.
func TestGatePatternUsesDFA(t *testing.T) {
	g := newTestGate(t)
	for _, tr := range g.types {
		for _, r := range tr.fields {
			if r.re != nil && (r.dfa == nil || r.dfa.pair == nil) {
				t.Errorf("%s.%s: pattern %q falls back to regexp or one byte a step", tr.name, r.name, r.pattern)
			}
		}
	}
}

// FuzzPatternDFA checks that, for any pattern the DFA claims, it agrees
// with regexp on any input.
//
//	go test ./internal/event -run '^$' -fuzz FuzzPatternDFA -fuzztime 3m
func FuzzPatternDFA(f *testing.F) {
	for _, tc := range patternCases {
		f.Add(tc.pattern, "sensor-07")
		f.Add(tc.pattern, "abc\n")
		f.Add(tc.pattern, "a\xffé")
	}
	f.Fuzz(func(t *testing.T, pattern, input string) {
		if len(pattern) > 200 {
			return
		}
		if _, err := regexp.Compile(pattern); err != nil {
			return
		}
		ref, err := regexp.Compile(`^(?:` + pattern + `)$`)
		if err != nil {
			return
		}
		d := compilePatternDFA(pattern)
		if d == nil {
			return
		}
		single := *d
		single.pair = nil
		want := ref.MatchString(input)
		if got := d.match([]byte(input)); got != want {
			t.Fatalf("pattern %q, input %q: DFA %v, regexp %v", pattern, input, got, want)
		}
		if got := single.match([]byte(input)); got != want {
			t.Fatalf("pattern %q, input %q: one-byte DFA %v, regexp %v", pattern, input, got, want)
		}
	})
}

func BenchmarkPatternUserID(b *testing.B) {
	const pattern = "[A-Za-z0-9_-]{1,64}"
	s := []byte("user-00042")
	b.Run("dfa", func(b *testing.B) {
		d := compilePatternDFA(pattern)
		for b.Loop() {
			if !d.match(s) {
				b.Fatal("no match")
			}
		}
	})
	b.Run("regexp", func(b *testing.B) {
		re := regexp.MustCompile(`^(?:` + pattern + `)$`)
		for b.Loop() {
			if !re.Match(s) {
				b.Fatal("no match")
			}
		}
	})
}
