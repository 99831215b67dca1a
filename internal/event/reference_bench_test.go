package event

import (
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkReferenceEncodingJSON is the reference the gate replaces (ADR
// 0007), measured in the same run: the standard library decoding the same
// sensor example envelope (docs/requirements.md R-GATE-1) into structs,
// data and the RFC 3339 time included,
// without any of the gate's checks.
func BenchmarkReferenceEncodingJSON(b *testing.B) {
	type reading struct {
		IDPerangkat string  `json:"id_perangkat"`
		Lantai      int     `json:"lantai"`
		SuhuC       float64 `json:"suhu_c"`
	}
	type envelope struct {
		EventID    string    `json:"event_id"`
		EventType  string    `json:"event_type"`
		OccurredAt time.Time `json:"occurred_at"`
		Data       reading   `json:"data"`
	}
	raw := []byte(seed002)
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		var e envelope
		if err := json.Unmarshal(raw, &e); err != nil || e.Data.IDPerangkat == "" || e.OccurredAt.IsZero() {
			b.Fatal(err)
		}
	}
}
