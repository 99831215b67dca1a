package event

import (
	"strings"
	"testing"
	"time"
)

// seed002 is the sensor example envelope (docs/requirements.md R-GATE-1).
const seed002 = `{"event_id":"a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d","event_type":"sensor.suhu.terbaca","occurred_at":"2026-11-07T08:30:00Z","data":{"id_perangkat":"sensor-07","lantai":3,"suhu_c":24.5}}`

// seedArrival is one minute after the example's occurred_at.
var seedArrival = time.Date(2026, 11, 7, 8, 31, 0, 0, time.UTC)

func ptr(f float64) *float64 { return &f }

// testOptions mirrors the gate section of deploy/reckon.yaml, so the
// package's tests do not depend on the config package.
func testOptions() GateOptions {
	zpart := TypeRules{Fields: map[string]FieldRule{
		"fiscal_drive":    {Required: true, Type: "string", Pattern: "[0-9]{16}"},
		"shift":           {Required: true, Type: "integer", Min: ptr(1), Max: ptr(100000)},
		"receipts":        {Required: true, Type: "integer", Min: ptr(0)},
		"total":           {Required: true, Type: "number", Min: ptr(0)},
		"shift_closed_at": {Required: true, Type: "string", Pattern: "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+(Z|[+-][0-9]{2}:[0-9]{2})"},
	}}
	return GateOptions{
		Types: map[string]TypeRules{
			"sensor.suhu.terbaca": {Fields: map[string]FieldRule{
				"id_perangkat": {Required: true, Type: "string", Pattern: "sensor-[0-9]{2}"},
				"suhu_c":       {Required: true, Type: "number", Min: ptr(-40), Max: ptr(60)},
				"lantai":       {Required: true, Type: "integer", Min: ptr(1), Max: ptr(10)},
			}},
			"payment.checkout.completed": {Fields: map[string]FieldRule{
				"user_id":  {Required: true, Type: "string", Pattern: "[A-Za-z0-9_-]{1,64}"},
				"amount":   {Required: true, Type: "number", Min: ptr(0), Max: ptr(1e12)},
				"currency": {Type: "string", Enum: []string{"IDR", "RUB", "USD", "EUR"}},
				"channel":  {Type: "string", Enum: []string{"web", "mobile", "pos"}},
			}},
			"zreport.ofd.received": zpart,
			"zreport.dwh.computed": zpart,
			"zreport.rms.computed": zpart,
		},
	}
}

func newTestGate(t testing.TB, mod ...func(*GateOptions)) *Gate {
	t.Helper()
	o := testOptions()
	for _, m := range mod {
		m(&o)
	}
	g, err := NewGate(o)
	if err != nil {
		t.Fatalf("NewGate: %v", err)
	}
	return g
}

// variant returns seed002 with each old string replaced by the following new
// one; every old string must occur exactly once.
func variant(t testing.TB, pairs ...string) string {
	t.Helper()
	s := seed002
	for i := 0; i+1 < len(pairs); i += 2 {
		if n := strings.Count(s, pairs[i]); n != 1 {
			t.Fatalf("variant: %q occurs %d times", pairs[i], n)
		}
		s = strings.Replace(s, pairs[i], pairs[i+1], 1)
	}
	return s
}

// consistent fails unless r is internally consistent.
func consistent(t testing.TB, e *Envelope, r Result) {
	t.Helper()
	if r.Valid != (len(r.Fields) == 0) {
		t.Fatalf("Valid %v with fields %q", r.Valid, r.Fields)
	}
	if len(r.Fields) != len(r.Reasons) {
		t.Fatalf("fields %q and reasons %q differ in length", r.Fields, r.Reasons)
	}
	if r.Valid != (e != nil) {
		t.Fatalf("Valid %v but envelope %v", r.Valid, e)
	}
	seen := map[string]bool{}
	for i, f := range r.Fields {
		if seen[f] {
			t.Fatalf("field %q twice in %q", f, r.Fields)
		}
		seen[f] = true
		if !strings.HasPrefix(r.Reasons[i], f+": ") {
			t.Fatalf("reason %q does not start with its field %q", r.Reasons[i], f)
		}
	}
	if r.Reason() != "" == r.Valid {
		t.Fatalf("Reason() %q with Valid %v", r.Reason(), r.Valid)
	}
}
