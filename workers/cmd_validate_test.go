package workers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"reckon/internal/event"
)

// validateSeed is the sensor example envelope (docs/requirements.md
// R-GATE-1).
const validateSeed = `{"event_id":"a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d","event_type":"sensor.suhu.terbaca","occurred_at":"2026-11-07T08:30:00Z","data":{"id_perangkat":"sensor-07","lantai":3,"suhu_c":24.5}}`

// validateNow is one minute after the example's occurred_at.
const validateNow = "2026-11-07T08:31:00Z"

// validateMain runs `reckon validate` through Main and decodes its
// verdicts; it fails the test unless the exit code and stderr agree with
// them (0 when every line is valid, 1 and a count otherwise).
func validateMain(t *testing.T, stdin string, args ...string) []verdict {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), append([]string{"validate"}, args...), strings.NewReader(stdin), &out, &errb, nil)
	vs := decodeVerdicts(t, out.String())
	invalid := 0
	for _, v := range vs {
		if !v.Valid {
			invalid++
		}
	}
	switch want := fmt.Sprintf("reckon validate: %d of %d lines invalid (--allow-invalid exits 0)\n", invalid, len(vs)); {
	case invalid == 0 && (code != 0 || errb.Len() > 0):
		t.Fatalf("every line valid: exit %d, stderr: %s", code, errb.String())
	case invalid > 0 && (code != 1 || errb.String() != want):
		t.Fatalf("%d invalid lines: exit %d, stderr %q, want exit 1 and %q", invalid, code, errb.String(), want)
	}
	return vs
}

// decodeVerdicts decodes validate's output, checking every line's shape.
func decodeVerdicts(t *testing.T, out string) []verdict {
	t.Helper()
	var vs []verdict
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if l == "" {
			continue
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &raw); err != nil {
			t.Fatalf("output line %q: %v", l, err)
		}
		for _, k := range []string{"line", "valid", "fields", "reasons"} {
			if _, ok := raw[k]; !ok {
				t.Fatalf("output line %q lacks %q", l, k)
			}
		}
		if string(raw["fields"]) == "null" || string(raw["reasons"]) == "null" {
			t.Fatalf("output line %q: fields and reasons must be arrays", l)
		}
		var v verdict
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	return vs
}

func seedWith(t *testing.T, old, new string) string {
	t.Helper()
	if strings.Count(validateSeed, old) != 1 {
		t.Fatalf("%q does not occur once in the seed", old)
	}
	return strings.Replace(validateSeed, old, new, 1)
}

func TestValidateSeed002(t *testing.T) {
	vs := validateMain(t, validateSeed+"\n", "--now", validateNow)
	if len(vs) != 1 || !vs[0].Valid || vs[0].Line != 1 || len(vs[0].Fields) != 0 || len(vs[0].Reasons) != 0 {
		t.Fatalf("sensor example: %+v", vs)
	}
}

func TestValidateBrokenVariants(t *testing.T) {
	cases := []struct {
		name, in string
		field    string
	}{
		{"bad event_id", seedWith(t, `"a3f8e1d2-7b4c`, `"a3f8e1d2-7b4x`), "event_id"},
		{"uppercase type", seedWith(t, `"sensor.suhu.terbaca"`, `"Sensor.Suhu.Terbaca"`), "event_type"},
		{"bad time", seedWith(t, `"2026-11-07T08:30:00Z"`, `"07/11/2026 08:30"`), "occurred_at"},
		{"id_perangkat sensor-7", seedWith(t, `"sensor-07"`, `"sensor-7"`), "data.id_perangkat"},
		{"suhu_c 75", seedWith(t, `24.5`, `75`), "data.suhu_c"},
		{"suhu_c string", seedWith(t, `24.5`, `"24.5"`), "data.suhu_c"},
		{"lantai 3.5", seedWith(t, `"lantai":3`, `"lantai":3.5`), "data.lantai"},
		{"lantai 0", seedWith(t, `"lantai":3`, `"lantai":0`), "data.lantai"},
		{"missing lantai", seedWith(t, `"lantai":3,`, ``), "data.lantai"},
		{"non-JSON line", `this is not json`, "payload"},
		{"unknown type", seedWith(t, `"sensor.suhu.terbaca"`, `"sensor.kelembapan.terbaca"`), "event_type"},
		{"NaN literal", seedWith(t, `24.5`, `NaN`), "data.suhu_c"},
		{"future occurred_at", seedWith(t, `"2026-11-07T08:30:00Z"`, `"2027-11-07T08:30:00Z"`), "occurred_at"},
	}
	var in strings.Builder
	in.WriteString(validateSeed + "\n")
	for _, c := range cases {
		in.WriteString(c.in + "\n")
	}
	vs := validateMain(t, in.String(), "--now", validateNow)
	if len(vs) != len(cases)+1 {
		t.Fatalf("%d verdicts for %d lines", len(vs), len(cases)+1)
	}
	if !vs[0].Valid {
		t.Errorf("seed line: %+v", vs[0])
	}
	for i, c := range cases {
		v := vs[i+1]
		if v.Line != i+2 || v.Valid || !slices.Equal(v.Fields, []string{c.field}) || len(v.Reasons) != 1 || !strings.HasPrefix(v.Reasons[0], c.field+": ") {
			t.Errorf("%s: %+v, want line %d invalid with field %s", c.name, v, i+2, c.field)
		}
	}
}

func TestValidateLineNumbersAndEndings(t *testing.T) {
	in := "\n" + validateSeed + "\r\n\n\n" + `{"event_id":1}` + "\r\n" + validateSeed // no final newline
	vs := validateMain(t, in, "--now", validateNow)
	var lines []int
	for _, v := range vs {
		lines = append(lines, v.Line)
	}
	if !slices.Equal(lines, []int{2, 5, 6}) || !vs[0].Valid || vs[1].Valid || !vs[2].Valid {
		t.Fatalf("verdicts %+v", vs)
	}
	if vs := validateMain(t, ""); len(vs) != 0 {
		t.Fatalf("empty input: %+v", vs)
	}
}

func TestValidateOversizedLines(t *testing.T) {
	pad := func(n int) string {
		s := seedWith(t, `24.5}`, `24.5,"pad":"`)
		return s + strings.Repeat("x", n-len(s)-3) + `"}}`
	}
	const max = 1 << 20
	in := strings.Join([]string{
		pad(max),                   // exactly at the limit: valid
		pad(max + 1),               // over: the gate says so
		pad(max + validateSlack*3), // far over: counted, not kept
		validateSeed,               // and reading goes on
	}, "\n") + "\n"
	if len(pad(max)) != max {
		t.Fatalf("pad: %d", len(pad(max)))
	}
	vs := validateMain(t, in, "--now", validateNow)
	if len(vs) != 4 {
		t.Fatalf("%d verdicts", len(vs))
	}
	if !vs[0].Valid || !vs[3].Valid || vs[3].Line != 4 {
		t.Errorf("verdicts %+v %+v", vs[0], vs[3])
	}
	for i, size := range map[int]int{1: max + 1, 2: max + validateSlack*3} {
		want := fmt.Sprintf("payload: %d bytes exceeds max_payload_bytes 1048576", size)
		if vs[i].Valid || !slices.Equal(vs[i].Fields, []string{"payload"}) || !slices.Equal(vs[i].Reasons, []string{want}) {
			t.Errorf("line %d: %+v, want %q", i+1, vs[i], want)
		}
	}
}

func TestValidateNowDefaultsToClock(t *testing.T) {
	// Without --now the current time is the arrival: an event a year ahead
	// of now is rejected, one a minute old is fine.
	now := time.Now().UTC()
	ok := seedWith(t, `"2026-11-07T08:30:00Z"`, `"`+now.Add(-time.Minute).Format(time.RFC3339)+`"`)
	ahead := seedWith(t, `"2026-11-07T08:30:00Z"`, `"`+now.AddDate(1, 0, 0).Format(time.RFC3339)+`"`)
	vs := validateMain(t, ok+"\n"+ahead+"\n")
	if len(vs) != 2 || !vs[0].Valid || vs[1].Valid || vs[1].Fields[0] != "occurred_at" {
		t.Fatalf("verdicts %+v", vs)
	}
}

func TestValidateConfig(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "reckon.yaml")
	cfg := "gate:\n  allow_unknown_types: true\n  types:\n    sensor.suhu.terbaca:\n      fields:\n        suhu_c: {required: true, type: number, max: 100}\n"
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	in := seedWith(t, `24.5`, `75`) + "\n" + seedWith(t, `"sensor.suhu.terbaca"`, `"door.opened"`) + "\n"
	vs := validateMain(t, in, "--config", cfgPath, "--now", validateNow)
	if len(vs) != 2 || !vs[0].Valid || !vs[1].Valid {
		t.Fatalf("with %s: %+v", cfgPath, vs)
	}
}

func TestValidateUsageAndErrors(t *testing.T) {
	run := func(stdin string, args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := Main(context.Background(), append([]string{"validate"}, args...), strings.NewReader(stdin), &out, &errb, nil)
		return code, errb.String()
	}
	if code, _ := run("", "--now", "yesterday"); code != 2 {
		t.Errorf("bad --now: exit %d", code)
	}
	if code, _ := run("", "file.jsonl"); code != 2 {
		t.Errorf("positional argument: exit %d", code)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("gate:\n  types:\n    a.b:\n      fields:\n        x: {type: string, pattern: \"[\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, stderr := run("", "--config", bad); code != 1 || !strings.Contains(stderr, "gate.types.a.b.fields.x.pattern") {
		t.Errorf("bad pattern: exit %d, %s", code, stderr)
	}
	// A failing reader is an error, not a verdict.
	var out bytes.Buffer
	g, err := event.NewGate(event.GateOptions{AllowUnknownTypes: true})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	_, _, err = validateLines(context.Background(), g, iotest.ErrReader(boom), &out, 1<<20, time.Now)
	if !errors.Is(err, boom) {
		t.Errorf("read error: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := validateLines(ctx, g, strings.NewReader(validateSeed), &out, 1<<20, time.Now); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
}

// TestValidateExitCode: `reckon validate` gates a script: exit 0 when every
// line is valid, 1 when any is (every verdict still printed, a count on
// stderr), and --allow-invalid keeps exit 0 with the same verdicts.
func TestValidateExitCode(t *testing.T) {
	bad := seedWith(t, `24.5`, `75`)
	run := func(stdin string, args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		args = append([]string{"validate", "--now", validateNow}, args...)
		code := Main(context.Background(), args, strings.NewReader(stdin), &out, &errb, nil)
		return code, out.String(), errb.String()
	}
	for _, c := range []struct {
		name, in string
		args     []string
		code     int
		stderr   string
	}{
		{"all valid", validateSeed + "\n" + validateSeed + "\n", nil, 0, ""},
		{"empty input", "", nil, 0, ""},
		{"one invalid of three", validateSeed + "\n" + bad + "\n" + validateSeed + "\n", nil, 1,
			"reckon validate: 1 of 3 lines invalid (--allow-invalid exits 0)\n"},
		{"only invalid", "not json\n" + bad + "\n", nil, 1,
			"reckon validate: 2 of 2 lines invalid (--allow-invalid exits 0)\n"},
		{"allowed", validateSeed + "\n" + bad + "\n", []string{"--allow-invalid"}, 0, ""},
		{"allowed, all valid", validateSeed + "\n", []string{"--allow-invalid"}, 0, ""},
	} {
		code, out, stderr := run(c.in, c.args...)
		if code != c.code || stderr != c.stderr {
			t.Errorf("%s: exit %d, stderr %q; want exit %d, stderr %q", c.name, code, stderr, c.code, c.stderr)
		}
		if n := len(decodeVerdicts(t, out)); n != strings.Count(c.in, "\n") {
			t.Errorf("%s: %d verdicts for %d lines", c.name, n, strings.Count(c.in, "\n"))
		}
	}
	// The flag changes the exit code only, not what is printed.
	in := validateSeed + "\n" + bad + "\n"
	_, strict, _ := run(in)
	_, allowed, _ := run(in, "--allow-invalid")
	if strict != allowed {
		t.Errorf("--allow-invalid changed the verdicts:\n%s\nvs\n%s", strict, allowed)
	}
}
