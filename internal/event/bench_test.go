package event

import (
	"testing"

	"github.com/valyala/fastjson"
)

// BenchmarkGateCheck is the stream hot path: decode and gate the sensor
// example envelope (docs/requirements.md R-GATE-1, R-PERF-1; budget
// ≤ ~600 ns/event). Besides ns/op it reports cpu-ns/op,
// the process CPU time per op, which a busy shared machine inflates less.
func BenchmarkGateCheck(b *testing.B) {
	g := newTestGate(b)
	raw := []byte(seed002)
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	defer reportCPU(b)()
	for b.Loop() {
		if _, r := g.Check(raw, seedArrival); !r.Valid {
			b.Fatal(r.Reasons)
		}
	}
}

// reportCPU starts measuring process CPU time; the returned func reports it
// per op. Call it right before the b.Loop loop.
func reportCPU(b *testing.B) func() {
	start := processCPU()
	return func() {
		if n := b.N; n > 0 {
			b.ReportMetric(float64(processCPU()-start)/float64(n), "cpu-ns/op")
		}
	}
}

// BenchmarkGateCheckAccess adds what the stream operator does next: read
// the key and the value.
func BenchmarkGateCheckAccess(b *testing.B) {
	g := newTestGate(b)
	raw := []byte(seed002)
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		e, r := g.Check(raw, seedArrival)
		if !r.Valid {
			b.Fatal(r.Reasons)
		}
		if _, ok := e.String("data.id_perangkat"); !ok {
			b.Fatal("no key")
		}
		if _, ok := e.Number("data.suhu_c"); !ok {
			b.Fatal("no value")
		}
	}
}

// BenchmarkGateParse is the structural minimum alone.
func BenchmarkGateParse(b *testing.B) {
	g := newTestGate(b)
	raw := []byte(seed002)
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		if _, r := g.Parse(raw); !r.Valid {
			b.Fatal(r.Reasons)
		}
	}
}

// BenchmarkGateCheckInvalid measures a rejection (reasons are built then).
func BenchmarkGateCheckInvalid(b *testing.B) {
	g := newTestGate(b)
	raw := []byte(`{"event_id":"a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d","event_type":"sensor.suhu.terbaca","occurred_at":"2026-11-07T08:30:00Z","data":{"id_perangkat":"sensor-07","lantai":3,"suhu_c":75}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, r := g.Check(raw, seedArrival); r.Valid {
			b.Fatal("valid")
		}
	}
}

// BenchmarkReferenceFastjsonParse is the reference measured in the same
// run: fastjson's lenient parse of the same envelope, without any checks.
func BenchmarkReferenceFastjsonParse(b *testing.B) {
	var p fastjson.Parser
	raw := []byte(seed002)
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		v, err := p.ParseBytes(raw)
		if err != nil || v.GetStringBytes("event_id") == nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReferenceFastjsonValidate is fastjson's strict validation pass
// alone, which a fastjson-based gate would need on top of its parse.
func BenchmarkReferenceFastjsonValidate(b *testing.B) {
	raw := []byte(seed002)
	b.ReportAllocs()
	for b.Loop() {
		if err := fastjson.ValidateBytes(raw); err != nil {
			b.Fatal(err)
		}
	}
}
