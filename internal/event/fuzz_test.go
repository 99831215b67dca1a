package event

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzGate feeds arbitrary bytes to Parse and Check. It must never panic,
// every Result must be consistent, a strict-JSON object must never be called
// invalid JSON, and whatever Parse accepts must decode the same way with
// encoding/json. The seed corpus in testdata/fuzz/FuzzGate is the
// repository's bad-input corpus (testdata/badinput).
//
//	go test ./internal/event -run '^$' -fuzz FuzzGate -fuzztime 3m
func FuzzGate(f *testing.F) {
	f.Add([]byte(seed002))
	f.Add([]byte(accessorsJSON))
	f.Add([]byte(`{"event_id":"a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d","event_type":"payment.checkout.completed","occurred_at":"2026-11-07T15:30:00.123+07:00","data":{"user_id":"bu\u0064i","amount":1.5e3,"currency":"IDR","x":[{"y":null}]}}`))
	f.Add([]byte(`{"event_id":"a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d","event_type":"zreport.ofd.received","occurred_at":"2026-11-07T08:30:00Z","data":{"fiscal_drive":"9287440300090728","shift":12,"receipts":140,"total":1250000.5,"shift_closed_at":"2026-11-07T22:00:00+03:00"}}`))
	def, err := NewGate(testOptions())
	if err != nil {
		f.Fatal(err)
	}
	small, err := NewGate(GateOptions{MaxPayloadBytes: 512, MaxDepth: 4, AllowUnknownTypes: true, MaxPastAge: time.Hour, Types: testOptions().Types})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		keep := bytes.Clone(raw)
		for _, g := range []*Gate{def, small} {
			fuzzOne(t, g, raw)
		}
		if !bytes.Equal(raw, keep) {
			t.Fatal("the gate modified its input")
		}
	})
}

func fuzzOne(t *testing.T, g *Gate, raw []byte) {
	e, r := g.Check(raw, seedArrival)
	consistent(t, e, r)
	checkValid := r.Valid

	e, r = g.Parse(raw)
	consistent(t, e, r)
	if checkValid && !r.Valid {
		t.Fatalf("Check accepted what Parse rejects: %q", r.Reasons)
	}

	// A well-formed JSON object is never "invalid JSON".
	first := bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) <= g.maxPayload && json.Valid(raw) && utf8.Valid(raw) && len(first) > 0 && first[0] == '{' {
		for _, reason := range r.Reasons {
			if strings.HasPrefix(reason, "payload: invalid") || strings.HasPrefix(reason, "payload: not") || strings.HasPrefix(reason, "payload: empty") {
				t.Fatalf("valid JSON rejected: %q", reason)
			}
		}
	}
	if !r.Valid {
		return
	}

	// Parse accepted: encoding/json must agree on the content.
	if !json.Valid(raw) || !utf8.Valid(raw) {
		t.Fatalf("accepted invalid JSON or UTF-8: %q", raw)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("encoding/json: %v", err)
	}
	var id, at string
	if json.Unmarshal(m["event_id"], &id) != nil || id != e.EventID {
		t.Fatalf("event_id %q, encoding/json %q", e.EventID, id)
	}
	if json.Unmarshal(m["occurred_at"], &at) != nil {
		t.Fatalf("occurred_at %s is not a string", m["occurred_at"])
	}
	if ref, err := time.Parse(time.RFC3339Nano, at); err != nil || !ref.Equal(e.OccurredAt) || e.OccurredAt.Location() != time.UTC {
		t.Fatalf("occurred_at %q: we %v, time.Parse %v %v", at, e.OccurredAt, ref, err)
	}
	var typ string
	if json.Unmarshal(m["event_type"], &typ) == nil && typ != e.EventType {
		t.Fatalf("event_type %q, encoding/json %q", e.EventType, typ)
	}
	if d, ok := m["data"]; ok != (e.DataJSON() != nil) || !bytes.Equal(bytes.TrimSpace(d), e.DataJSON()) {
		t.Fatalf("DataJSON %q, encoding/json %q", e.DataJSON(), d)
	}
	c := e.Clone()
	if c.EventID != e.EventID || !c.OccurredAt.Equal(e.OccurredAt) || !bytes.Equal(c.Raw(), raw) || !bytes.Equal(c.DataJSON(), e.DataJSON()) {
		t.Fatal("Clone differs")
	}

	// With unique, well-formed data keys (Check's rules), each data field
	// reads back as encoding/json decodes it.
	e, r = g.Check(raw, time.Time{})
	if !r.Valid || e.DataJSON() == nil {
		return
	}
	var data map[string]any
	dec := json.NewDecoder(bytes.NewReader(e.DataJSON()))
	dec.UseNumber()
	if err := dec.Decode(&data); err != nil {
		t.Fatalf("DataJSON %q: %v", e.DataJSON(), err)
	}
	for k, v := range data {
		path := "data." + k
		if !e.Exists(path) {
			t.Fatalf("Exists(%q) false", path)
		}
		s, sok := e.String(path)
		n, nok := e.Number(path)
		switch v := v.(type) {
		case string:
			if !sok || s != v || nok {
				t.Fatalf("String(%q) = %q %v, want %q", path, s, sok, v)
			}
		case json.Number:
			want, err := strconv.ParseFloat(string(v), 64)
			if err != nil || !nok || n != want || sok {
				t.Fatalf("Number(%q) = %v %v, want %v (%v)", path, n, nok, want, err)
			}
		default:
			if sok || nok {
				t.Fatalf("%q is %T but String %v Number %v", path, v, sok, nok)
			}
		}
		if cs, _ := c.String(path); cs != s {
			t.Fatalf("Clone String(%q) = %q, want %q", path, cs, s)
		}
	}
}
