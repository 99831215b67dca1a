package event

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

const accessorsJSON = `{
  "event_id": "a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d",
  "event_type": "payment.checkout.completed",
  "occurred_at": "2026-11-07T15:30:00+07:00",
  "data": {"user_id": "bu\u0064i", "amount": 150000, "currency": "IDR",
           "ok": true, "nothing": null, "neg": -1.5e-3, "str_num": "42",
           "nested": {"a": {"b": "deep"}, "caf\u00e9": 1},
           "list": [10, "x", {"k": "v"}],
           "quote": "say \"hi\"\n", "emoji": "\ud83d\ude00", "lone": "\ud800"}
}`

func TestEnvelopeAccessors(t *testing.T) {
	g := newTestGate(t)
	e, r := g.Parse([]byte(accessorsJSON))
	if !r.Valid {
		t.Fatal(r.Reasons)
	}
	if !e.OccurredAt.Equal(time.Date(2026, 11, 7, 8, 30, 0, 0, time.UTC)) || e.OccurredAt.Location() != time.UTC {
		t.Errorf("OccurredAt = %v", e.OccurredAt)
	}
	strs := map[string]string{
		"event_id":           "a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d",
		"event_type":         "payment.checkout.completed",
		"data.user_id":       "budi",
		"data.currency":      "IDR",
		"data.str_num":       "42",
		"data.nested.a.b":    "deep",
		"data.list.1":        "x",
		"data.list.2.k":      "v",
		"data.quote":         "say \"hi\"\n",
		"data.emoji":         "😀",
		"data.lone":          "\uFFFD",
		"occurred_at":        "2026-11-07T15:30:00+07:00",
		"data.nested.a.b.c":  "",
		"data.amount":        "",
		"data.missing":       "",
		"data.list.3":        "",
		"data.list.01":       "",
		"data.list.-1":       "",
		"data.ok":            "",
		"data.nothing":       "",
		"data":               "",
		"":                   "",
		"data.":              "",
		"data.nested.café":   "",
		"data.nested.caf\\u": "",
	}
	for path, want := range strs {
		got, ok := e.String(path)
		if ok != (want != "") || got != want {
			t.Errorf("String(%q) = %q, %v; want %q", path, got, ok, want)
		}
	}
	nums := map[string]float64{
		"data.amount":         150000,
		"data.neg":            -1.5e-3,
		"data.list.0":         10,
		"data.nested.café":    1,
		"data.str_num":        0, // a string is not a number
		"data.ok":             0,
		"data.nothing":        0,
		"data.user_id":        0,
		"data.nested":         0,
		"data.amount.x":       0,
		"data.list.1":         0,
		"event_id":            0,
		"data.list.100000000": 0,
	}
	for path, want := range nums {
		got, ok := e.Number(path)
		if ok != (want != 0) || got != want {
			t.Errorf("Number(%q) = %v, %v; want %v", path, got, ok, want)
		}
	}
	for path, want := range map[string]bool{
		"data.nothing": true, "data.nested.a": true, "data.list.2": true, "event_id": true, "data": true,
		"data.none": false, "data.list.3": false, "x": false, "": false, "data.ok.x": false,
	} {
		if got := e.Exists(path); got != want {
			t.Errorf("Exists(%q) = %v", path, got)
		}
	}
	var v map[string]any
	if err := json.Unmarshal(e.DataJSON(), &v); err != nil || v["user_id"] != "budi" {
		t.Errorf("DataJSON = %s: %v", e.DataJSON(), err)
	}
	if !strings.HasPrefix(string(e.DataJSON()), `{"user_id": "bu\u0064i"`) {
		t.Errorf("DataJSON not as received: %s", e.DataJSON())
	}
}

func TestEnvelopeZeroValue(t *testing.T) {
	var e Envelope
	if _, ok := e.String("data.x"); ok {
		t.Error("String on zero Envelope")
	}
	if _, ok := e.Number("data.x"); ok {
		t.Error("Number on zero Envelope")
	}
	if e.Exists("data") || e.DataJSON() != nil || e.Raw() != nil {
		t.Error("zero Envelope has content")
	}
	if c := e.Clone(); c.Exists("data") {
		t.Error("clone of zero Envelope has content")
	}
}

func TestEnvelopeClone(t *testing.T) {
	g := newTestGate(t)
	raw := []byte(seed002)
	e, r := g.Check(raw, seedArrival)
	if !r.Valid {
		t.Fatal(r.Reasons)
	}
	c := e.Clone()
	// The gate moves on, and the caller reuses its buffer.
	other := variant(t, `"sensor-07"`, `"sensor-09"`, `24.5`, `12.0`)
	if _, r := g.Check([]byte(other), seedArrival); !r.Valid {
		t.Fatal(r.Reasons)
	}
	copy(raw, strings.Repeat("x", len(raw)))
	if s, _ := c.String("data.id_perangkat"); s != "sensor-07" {
		t.Errorf("clone changed: %q", s)
	}
	if f, _ := c.Number("data.suhu_c"); f != 24.5 {
		t.Errorf("clone changed: %v", f)
	}
	if string(c.Raw()) != seed002 || string(c.DataJSON()) != `{"id_perangkat":"sensor-07","lantai":3,"suhu_c":24.5}` {
		t.Errorf("clone raw changed: %s", c.Raw())
	}
	if c.EventID != "a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d" || c.EventType != "sensor.suhu.terbaca" {
		t.Errorf("clone envelope = %+v", c)
	}
	// DataJSON's capacity ends with data, so appending cannot clobber Raw.
	d := c.DataJSON()
	_ = append(d, '!')
	if string(c.Raw()) != seed002 {
		t.Error("append to DataJSON changed Raw")
	}
}

func TestEnvelopeStringsAreKeepable(t *testing.T) {
	g := newTestGate(t)
	raw := []byte(seed002)
	e, _ := g.Check(raw, seedArrival)
	id, key := e.EventID, ""
	key, _ = e.String("data.id_perangkat")
	copy(raw, strings.Repeat("x", len(raw)))
	if id != "a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d" || key != "sensor-07" {
		t.Errorf("strings alias the input: %q %q", id, key)
	}
}
