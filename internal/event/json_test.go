package event

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestDecoderMatchesEncodingJSON checks the decoder's strictness against
// encoding/json (plus UTF-8 validity, which encoding/json does not demand)
// on values in every position.
func TestDecoderMatchesEncodingJSON(t *testing.T) {
	values := []string{
		`0`, `-0`, `1`, `-1`, `10`, `1.5`, `-1.5e10`, `1E+2`, `1e-2`, `0.0`, `123456789012345678901234567890`,
		`01`, `-01`, `1.`, `.5`, `+1`, `1e`, `1e+`, `--1`, `1-2`, `0x10`, `1.5.5`, `-`, `1ee2`,
		`true`, `false`, `null`, `tru`, `True`, `nul`, `nulll`, `falsey`,
		`""`, `"a"`, `"\""`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\u0000"`, `"\uD83D\uDE00"`, `"\ud800"`, `"é"`, `"😀"`,
		`"\a"`, `"\x41"`, `"\u12"`, `"\u12G4"`, "\"\t\"", "\"\x01\"", "\"\x7f\"", `"abc`, `"\`,
		`[]`, `[1]`, `[1,2]`, `[ 1 , 2 ]`, `[1,]`, `[,1]`, `[1 2]`, `[`, `]`, `[[[]]]`,
		`{}`, `{"a":1}`, `{"a":1,"b":[{}]}`, `{"a":1,}`, `{"a"}`, `{"a":}`, `{a:1}`, `{"a" 1}`, `{1:1}`, `{"a":1 "b":2}`,
		` 1 `, "\t\n\r1", "\v1", "\f1", "1\u00a0",
	}
	var tp tape
	for _, v := range values {
		for _, doc := range []string{`{"x":` + v + `}`, `{"x":[` + v + `]}`, `{"y":{"x":` + v + `},"z":0}`} {
			want := json.Valid([]byte(doc)) && utf8.ValidString(doc)
			perr := tp.parse([]byte(doc), 100)
			if got := perr.kind == parseOK; got != want {
				t.Errorf("parse(%s) ok=%v (%+v), encoding/json ok=%v", doc, got, perr, want)
			}
		}
	}
	for _, doc := range []string{"{\"x\":\"\xff\"}", "{\"x\":\"\xc3\"}", "{\"x\":\"\xed\xa0\x80\"}", "{\"x\xfe\":1}"} {
		if perr := tp.parse([]byte(doc), 100); perr.kind != parseUTF8 {
			t.Errorf("parse(%q) = %+v, want invalid UTF-8", doc, perr)
		}
	}
}

func TestDecoderNonFinite(t *testing.T) {
	var tp tape
	for _, v := range []string{`NaN`, `nan`, `-NaN`, `+nan`, `Infinity`, `-Infinity`, `+Infinity`, `inf`, `-inf`, `INF`, `1e400`, `-1e400`, `1` + strings.Repeat("0", 400)} {
		doc := `{"x":[` + v + `,1]}`
		if perr := tp.parse([]byte(doc), 10); perr.kind != parseOK || tp.nonFinite != 1 {
			t.Errorf("parse(%s) = %+v nonFinite %d", doc, perr, tp.nonFinite)
		}
	}
	for _, v := range []string{`Nan1`, `infinite`, `Infinit`, `nanx`, `-`, `+`, `+1`, `N`, `-Inf-`} {
		doc := `{"x":` + v + `}`
		if perr := tp.parse([]byte(doc), 10); perr.kind != parseSyntax {
			t.Errorf("parse(%s) = %+v, want a syntax error", doc, perr)
		}
	}
	// Large but finite numbers are fine.
	if perr := tp.parse([]byte(`{"x":1e308,"y":`+strings.Repeat("9", 300)+`,"z":1e-400}`), 10); perr.kind != parseOK || tp.nonFinite != 0 {
		t.Errorf("finite numbers: %+v nonFinite %d", perr, tp.nonFinite)
	}
}

func TestDecoderDepth(t *testing.T) {
	var tp tape
	for depth := 1; depth <= 5; depth++ {
		doc := strings.Repeat(`{"a":`, depth) + `1` + strings.Repeat(`}`, depth)
		perr := tp.parse([]byte(doc), 3)
		if (perr.kind == parseOK) != (depth <= 3) {
			t.Errorf("depth %d with max 3: %+v", depth, perr)
		}
	}
	// A deep document fails fast without recursion.
	doc := `{"a":` + strings.Repeat(`[`, 1_000_000)
	if perr := tp.parse([]byte(doc), 32); perr.kind != parseDepth {
		t.Errorf("deep document: %+v", perr)
	}
}

func TestKeyEquals(t *testing.T) {
	var tp tape
	raw := []byte(`{"plain":1,"esc\u0061pe":2,"\ud83d\ude00":3,"q\"":4,"\u00e9":5}`)
	if perr := tp.parse(raw, 4); perr.kind != parseOK {
		t.Fatal(perr)
	}
	for key, want := range map[string]int32{"plain": 1, "escape": 2, "😀": 3, `q"`: 4, "é": 5, "esc": -1, "escapes": -1, "": -1, "\u00e9x": -1} {
		if got := lookup(raw, tp.nodes, 0, key); got != want {
			t.Errorf("lookup(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestParseRFC3339(t *testing.T) {
	good := map[string]time.Time{
		"2026-11-07T08:30:00Z":                time.Date(2026, 11, 7, 8, 30, 0, 0, time.UTC),
		"2026-11-07T08:30:00.5Z":              time.Date(2026, 11, 7, 8, 30, 0, 5e8, time.UTC),
		"2026-11-07T08:30:00.123456789Z":      time.Date(2026, 11, 7, 8, 30, 0, 123456789, time.UTC),
		"2026-11-07T15:30:00+07:00":           time.Date(2026, 11, 7, 8, 30, 0, 0, time.UTC),
		"2026-11-07T05:00:00-03:30":           time.Date(2026, 11, 7, 8, 30, 0, 0, time.UTC),
		"2026-01-01T00:30:00+01:00":           time.Date(2025, 12, 31, 23, 30, 0, 0, time.UTC),
		"2024-02-29T00:00:00Z":                time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC),
		"2000-02-29T00:00:00Z":                time.Date(2000, 2, 29, 0, 0, 0, 0, time.UTC),
		"9999-12-31T23:59:59.999999999Z":      time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		"2026-11-07T08:30:00.000000001-00:00": time.Date(2026, 11, 7, 8, 30, 0, 1, time.UTC),
	}
	for s, want := range good {
		got, ok := parseRFC3339([]byte(s))
		if !ok || !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("parseRFC3339(%q) = %v %v, want %v", s, got, ok, want)
		}
		if ref, err := time.Parse(time.RFC3339Nano, s); err != nil || !ref.Equal(got) {
			t.Errorf("time.Parse(%q) = %v %v, we say %v", s, ref, err, got)
		}
	}
	for _, s := range []string{
		"", "2026-11-07", "2026-11-07T08:30:00", "2026-11-07T08:30Z", "2026-11-07 08:30:00Z", "2026-11-07t08:30:00Z",
		"2026-11-07T08:30:00z", "2026-13-07T08:30:00Z", "2026-00-07T08:30:00Z", "2026-11-00T08:30:00Z", "2026-11-31T08:30:00Z",
		"2023-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2026-11-07T24:00:00Z", "2026-11-07T08:60:00Z", "2026-11-07T08:30:60Z",
		"2026-11-07T08:30:00.Z", "2026-11-07T08:30:00.1234567890Z", "2026-11-07T08:30:00,5Z", "2026-11-07T08:30:00+24:00",
		"2026-11-07T08:30:00+07:60", "2026-11-07T08:30:00+0700", "2026-11-07T08:30:00+07", "2026-11-07T08:30:00 Z",
		"2026-11-07T08:30:00ZZ", "+2026-11-07T08:30:00Z", "20261-11-07T08:30:00Z", "2026-1-07T08:30:00Z", "2026-11-07T8:30:00Z",
		"２０２６-11-07T08:30:00Z", "2026-11-07T08:30:00.+07:00", "2026-11-07T08:30:0aZ", "2026-11-07T08:30:00+07:0a",
	} {
		if got, ok := parseRFC3339([]byte(s)); ok {
			t.Errorf("parseRFC3339(%q) = %v, want rejection", s, got)
		}
	}
	if n := testing.AllocsPerRun(100, func() { parseRFC3339([]byte("2026-11-07T15:30:00.5+07:00")) }); n != 0 {
		t.Errorf("parseRFC3339 allocates %v times", n)
	}
}

func TestParseNumberMatchesStrconv(t *testing.T) {
	lits := []string{
		"0", "-0", "1", "-1", "24.5", "-40.5", "0.1", "0.3", "1.7976931348623157", "123456789012345", "1234567890123456",
		"999999999999999", "9999999999999999", "0.000000000000001", "0.0000000000000001", "-0.0", "1e3", "1.5E-7",
		"2.2250738585072014e-308", "4.9e-324", "1e308", "12345.678901234", "12345.6789012345", "9007199254740993",
	}
	rng := uint64(1)
	for range 20000 {
		rng = rng*6364136223846793005 + 1442695040888963407
		intPart := strconv.FormatUint(rng>>40, 10)
		fracPart := strconv.FormatUint((rng>>8)&0xffffff, 10)
		lit := intPart + "." + fracPart
		if rng&1 == 1 {
			lit = "-" + lit
		}
		lits = append(lits, lit, intPart)
	}
	for _, lit := range lits {
		want, err := strconv.ParseFloat(lit, 64)
		if err != nil {
			t.Fatal(err)
		}
		if got := parseNumber([]byte(lit)); got != want || math.Signbit(got) != math.Signbit(want) {
			t.Errorf("parseNumber(%s) = %v, want %v", lit, got, want)
		}
	}
}

// TestDaysSinceEpochMatchesTime checks the date arithmetic behind
// parseRFC3339 against the time package for every day of years 0–9999.
func TestDaysSinceEpochMatchesTime(t *testing.T) {
	d := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
	end := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	for ; d.Before(end); d = d.AddDate(0, 0, 1) {
		if got := daysSinceEpoch(d.Year(), int(d.Month()), d.Day()); got*86400 != d.Unix() {
			t.Fatalf("%v: %d days, want %d seconds", d, got, d.Unix())
		}
	}
}

// TestParseRFC3339MatchesTimeParse compares parseRFC3339 with time.Parse on
// random valid date-times and on every one-byte change of them: whatever
// parseRFC3339 accepts, time.Parse must accept as the same instant, and
// the unchanged strings must be accepted.
func TestParseRFC3339MatchesTimeParse(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte("0123456789-+:.TZtz ,9")
	for range 2000 {
		tm := time.Unix(rng.Int64N(400*365*86400)-100*365*86400, rng.Int64N(1e9)).UTC()
		layout := []string{"2006-01-02T15:04:05Z07:00", "2006-01-02T15:04:05.999999999Z07:00", "2006-01-02T15:04:05.000Z07:00"}[rng.IntN(3)]
		zone := time.FixedZone("", (rng.IntN(48)-24)*1800)
		s := tm.In(zone).Format(layout)
		if tm.Year() < 1 || tm.In(zone).Year() > 9999 {
			continue
		}
		check := func(s string) {
			got, ok := parseRFC3339([]byte(s))
			ref, err := time.Parse(time.RFC3339Nano, s)
			if ok && (err != nil || !ref.Equal(got) || got.Location() != time.UTC) {
				t.Fatalf("parseRFC3339(%q) = %v, time.Parse %v %v", s, got, ref, err)
			}
		}
		if _, ok := parseRFC3339([]byte(s)); !ok {
			t.Fatalf("parseRFC3339(%q) rejected", s)
		}
		check(s) // the same instant as time.Parse
		for i := range len(s) {
			for _, c := range alphabet {
				b := []byte(s)
				b[i] = c
				check(string(b))
			}
		}
	}
}
