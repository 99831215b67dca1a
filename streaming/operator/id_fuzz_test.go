package operator

import (
	"encoding/json"
	"testing"

	"reckon/internal/event"
)

// FuzzParseEventID: ParseEventID accepts exactly what the quality gate
// accepts as an event_id (plus the nil UUID, which the gate refuses), and
// what it accepts renders back as the same text. The stream worker drops
// ParseEventID's ok after the gate, so an id the gate let through and the
// parser refused would dedup as the zero id: every such event but the
// first would vanish as a "duplicate".
//
//	go test ./streaming/operator -run '^$' -fuzz '^FuzzParseEventID$' -fuzztime 60s
func FuzzParseEventID(f *testing.F) {
	for _, s := range []string{"a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d", "A3F8E1D2-7B4C-4E2A-9C1D-5E6F7A8B9C0D", "00000000-0000-0000-0000-000000000000",
		"a3f8e1d27b4c4e2a9c1d5e6f7a8b9c0d", "{a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d}", "a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0", "z3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d",
		"a3f8e1d2-7b4c-4e2a-9c1d_5e6f7a8b9c0d", "a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0\u0430"} {
		f.Add(s)
	}
	gate, err := event.NewGate(event.GateOptions{AllowUnknownTypes: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := ParseEventID(s)
		if ok && id.String() != s {
			t.Fatalf("ParseEventID(%q) renders as %q", s, id.String())
		}
		q, err := json.Marshal(s)
		if err != nil {
			return
		}
		raw := []byte(`{"event_id":` + string(q) + `,"event_type":"a.b","occurred_at":"2026-11-07T08:30:00Z","data":{}}`)
		env, res := gate.Parse(raw)
		if res.Valid && (!ok || env.EventID != s) {
			t.Fatalf("the gate accepts event_id %q (as %q), ParseEventID ok=%v", s, env.EventID, ok)
		}
		if ok && !res.Valid && id != (EventID{}) {
			t.Fatalf("ParseEventID accepts %q, the gate refuses it: %q", s, res.Reasons)
		}
	})
}
