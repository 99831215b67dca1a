package event

import (
	"bytes"
	"testing"
	"time"
	"unsafe"
)

// TestEnvelopeUUIDAndView: EventUUID is EventID's bytes as ParseUUID
// decodes them (zero for a rejected record); StringView reads what String
// reads, aliasing the record's bytes when there is no escape (changing
// them changes the view: the caller must copy to keep) and unescaping
// into its own string otherwise.
func TestEnvelopeUUIDAndView(t *testing.T) {
	g, err := NewGate(GateOptions{AllowUnknownTypes: true})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 7, 12, 0, 1, 0, time.UTC)
	raw := []byte(`{"event_id":"c0ffee00-1234-4abc-8def-00000000002a","event_type":"payment.checkout.completed",` +
		`"occurred_at":"2026-11-07T12:00:00Z","data":{"user_id":"Budi","note":"a\"b","amount":5}}`)
	env, res := g.Check(raw, at)
	if !res.Valid {
		t.Fatal(res.Reasons)
	}
	want, ok := ParseUUID(env.EventID)
	if !ok || env.EventUUID() != want || want == [16]byte{} {
		t.Errorf("EventUUID %x, ParseUUID(%q) %x %v", env.EventUUID(), env.EventID, want, ok)
	}
	for _, path := range []string{"data.user_id", "data.note", "event_type", "data.amount", "data.none"} {
		s, ok := env.String(path)
		v, vok := env.StringView(path)
		if s != v || ok != vok {
			t.Errorf("%s: String %q %v, StringView %q %v", path, s, ok, v, vok)
		}
	}
	v, _ := env.StringView("data.user_id")
	if p := unsafe.StringData(v); uintptr(unsafe.Pointer(p)) < uintptr(unsafe.Pointer(&raw[0])) ||
		uintptr(unsafe.Pointer(p)) >= uintptr(unsafe.Pointer(&raw[0]))+uintptr(len(raw)) {
		t.Error("an unescaped string's view does not alias the record's bytes")
	}
	copy(raw[bytes.Index(raw, []byte("Budi")):], "Siti")
	if v != "Siti" {
		t.Errorf("view %q after the bytes changed: not a view", v)
	}
	if n, _ := env.StringView("data.note"); n != `a"b` {
		t.Errorf("escaped view %q", n)
	}

	bad := []byte(`{"event_id":"00000000-0000-0000-0000-000000000000","event_type":"payment.checkout.completed",` +
		`"occurred_at":"2026-11-07T12:00:00Z","data":{}}`)
	if env, res := g.Check(bad, at); res.Valid || env != nil {
		t.Errorf("nil UUID: valid %v, envelope %v", res.Valid, env)
	}
}
