package zreport_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"reckon/internal/event"
	"reckon/zreport"
)

// FuzzPartOf feeds the Z-report bridge's decoder: a Kafka record value
// through the quality gate (event.Gate.Check) and then zreport.PartOf, as
// bridge.handle does. It must never panic; every PartOf error wraps
// zreport.ErrInvalidPart (the bridge dead-letters on it); a part it
// returns is valid, its key round-trips through ParseKey, it applies to a
// fresh entity and survives a JSON round trip.
//
//	go test ./zreport -run '^$' -fuzz '^FuzzPartOf$' -fuzztime 60s
func FuzzPartOf(f *testing.F) {
	for _, s := range []string{
		`{"event_id":"00000000-0000-4000-8000-000000000001","event_type":"zreport.ofd.received","occurred_at":"2026-01-01T23:00:00Z","data":{"fiscal_drive":"9960440300123456","shift":142,"receipts":5,"total":50.5,"shift_closed_at":"2026-01-01T23:00:00Z"}}`,
		`{"event_id":"00000000-0000-4000-8000-000000000002","event_type":"zreport.dwh.computed","occurred_at":"2026-01-01T23:00:00+03:00","data":{"fiscal_drive":"9960440300123456","shift":1,"receipts_count":9007199254740993,"total_amount":1e308,"shift_closed_at":"2026-01-01T23:00:00.5-01:00"}}`,
		`{"event_id":"00000000-0000-4000-8000-000000000003","event_type":"zreport.part.received","occurred_at":"2026-01-01T23:00:00Z","data":{"source":"rms","fiscal_drive":"9960440300123456","shift":1e3,"receipts":0,"total":-0.0,"shift_closed_at":"9999-12-31T23:59:59Z"}}`,
		`{"event_id":"00000000-0000-4000-8000-000000000004","event_type":"zreport.part.received","occurred_at":"2026-01-01T23:00:00Z","data":{"source":"xyz","fiscal_drive":"1","shift":"1","receipts":1.5,"total":"1","shift_closed_at":"yesterday"}}`,
		`{"event_id":"00000000-0000-4000-8000-000000000005","event_type":"payment.checkout.completed","occurred_at":"2026-01-01T23:00:00Z","data":{}}`,
		`{"event_id":"x","data":null}`,
	} {
		f.Add([]byte(s))
	}
	gate, err := event.NewGate(event.GateOptions{AllowUnknownTypes: true, MaxFutureSkew: 1 << 62})
	if err != nil {
		f.Fatal(err)
	}
	arrival := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, raw []byte) {
		env, res := gate.Check(raw, arrival)
		if !res.Valid {
			return
		}
		p, err := zreport.PartOf(env.EventID, env.EventType, env.OccurredAt, env)
		if err != nil {
			if !errors.Is(err, zreport.ErrInvalidPart) {
				t.Fatalf("error does not wrap ErrInvalidPart: %v", err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("PartOf returned an invalid part: %v", err)
		}
		if k, err := zreport.ParseKey(p.Key.String()); err != nil || k != p.Key {
			t.Fatalf("ParseKey(%q) = %v, %v", p.Key.String(), k, err)
		}
		st := zreport.New(p.Key, zreport.Policy{})
		if out, err := st.Apply(p, arrival); err != nil || !out.Applied {
			t.Fatalf("a decoded part does not apply: %+v %v", out, err)
		}
		j, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("marshal %+v: %v", p, err)
		}
		var back zreport.Part
		if err := json.Unmarshal(j, &back); err != nil || back.Key != p.Key || back.Figures != p.Figures || back.Source != p.Source ||
			!back.ShiftClosedAt.Equal(p.ShiftClosedAt) {
			t.Fatalf("JSON round trip of %s: %+v, %v", j, back, err)
		}
	})
}
