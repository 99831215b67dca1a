package event

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"
)

// The hand-written encoders must agree with encoding/json on every field,
// so consumers may decode panes and features with any JSON library.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2026, 11, 7, 8, 30, 0, 123456789, time.UTC)
	panes := []Pane{
		{Stream: "suhu", Key: "sensor-07", WindowStart: at, WindowEnd: at.Add(time.Hour), Count: 3, Sum: 73.5, Min: 24.1, Max: 24.9,
			Version: 2, Timing: TimingLate, ComputedBy: ComputedByStream, Watermark: at, EmittedAt: at.Add(time.Second),
			ProcessedAt: at},
		{Stream: "p", Key: "we\"ird\\key\n\x01\u2028ü\xff", Count: 1, Sum: 1e21, Min: 1e-7, Max: -0.000001, Version: 9,
			Timing: TimingCorrection, ComputedBy: ComputedByBatch, Reason: "late events beyond lateness"},
		{Sum: 590000, Min: 45000, Max: 350000},
	}
	for i, p := range panes {
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		want = bytes.ReplaceAll(want, []byte(`\u003c`), []byte("<"))
		got := p.AppendJSON(nil)
		if !bytes.Equal(got, want) {
			t.Errorf("pane %d:\n got %s\nwant %s", i, got, want)
		}
	}
	f := Feature{Stream: "payments", Key: "Budi", EventID: "a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d", EventTime: at, Size: time.Minute, Count: 3, Sum: 405000, Watermark: at,
		EmittedAt: at.Add(time.Second), ArrivedAt: at, SourceTopic: "payments-raw", SourcePartition: 3, SourceOffset: 1 << 40}
	want, _ := json.Marshal(f)
	if got := f.AppendJSON(nil); !bytes.Equal(got, want) {
		t.Errorf("feature:\n got %s\nwant %s", got, want)
	}
	// Times are always published in UTC, whatever zone they were built in.
	wib := Pane{WindowStart: at.In(time.FixedZone("WIB", 7*3600))}
	if got := wib.AppendJSON(nil); !bytes.Contains(got, []byte(`"window_start":"2026-11-07T08:30:00.123456789Z"`)) {
		t.Errorf("non-UTC time rendered as %s", got)
	}
	if got := string(appendFloat(nil, math.NaN())); got != "null" {
		t.Errorf("NaN renders %s", got)
	}
}

// A pane published before processed_at existed decodes with a zero
// ProcessedAt; Processed falls back to its emitted_at, which was then the
// processing clock.
func TestPaneProcessedFallsBack(t *testing.T) {
	at := time.Date(2026, 11, 7, 8, 30, 0, 0, time.UTC)
	var old Pane
	if err := json.Unmarshal([]byte(`{"stream":"s","key":"k","emitted_at":"2026-11-07T08:30:00Z"}`), &old); err != nil {
		t.Fatal(err)
	}
	if !old.ProcessedAt.IsZero() || !old.Processed().Equal(at) {
		t.Errorf("old pane: processed_at %v, Processed %v; want zero and %v", old.ProcessedAt, old.Processed(), at)
	}
	p := Pane{EmittedAt: at.Add(time.Second), ProcessedAt: at}
	var back Pane
	if err := json.Unmarshal(p.AppendJSON(nil), &back); err != nil {
		t.Fatal(err)
	}
	if !back.Processed().Equal(at) || !back.EmittedAt.Equal(at.Add(time.Second)) {
		t.Errorf("new pane: Processed %v, emitted_at %v; want %v and %v", back.Processed(), back.EmittedAt, at, at.Add(time.Second))
	}
}
