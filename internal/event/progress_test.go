package event

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func TestProgressRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 1, 13, 41, 7, 0, time.UTC)
	p := StreamProgress{Format: ProgressFormat, Stream: "payments", Topic: "payments-kejadian", Partition: 2, NextOffset: 1234,
		Watermark: at, MaxEventTime: at.Add(5 * time.Second), ProcessingTime: at.Add(9 * time.Second),
		PurgedThrough: at.Add(-time.Minute), Settings: "ab12", PublishedAt: at.Add(10 * time.Second)}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeProgress(b)
	if err != nil || got != p {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, p)
	}
	if got.Key() != "payments|payments-kejadian|2" {
		t.Errorf("key %q", got.Key())
	}
	// No watermark yet: the times are left out, not written as year 1.
	none := StreamProgress{Format: 1, Stream: "s", Topic: "t", Settings: "x", PublishedAt: at}
	b, _ = json.Marshal(none)
	if got, err := DecodeProgress(b); err != nil || !got.Watermark.IsZero() {
		t.Errorf("no watermark: %+v %v (%s)", got, err, b)
	}
	for _, bad := range []string{`{`, `{"format":0,"stream":"s","topic":"t"}`, `{"format":2,"stream":"s","topic":"t"}`,
		`{"format":1,"stream":"","topic":"t"}`, `{"format":1,"stream":"s","topic":"t","partition":-1}`,
		`{"format":1,"stream":"s","topic":"t","purged_through":"2026-12-01T00:00:00Z"}`} {
		if _, err := DecodeProgress([]byte(bad)); !errors.Is(err, ErrProgress) {
			t.Errorf("DecodeProgress(%s) = %v, want ErrProgress", bad, err)
		}
	}
}

// FuzzDecodeProgress: any input decodes or fails with ErrProgress, and
// what decodes encodes back to an equal record.
func FuzzDecodeProgress(f *testing.F) {
	f.Add([]byte(`{"format":1,"stream":"s","topic":"t","partition":1,"next_offset":5,"watermark":"2026-12-01T00:00:00Z","purged_through":"2026-11-30T23:59:00Z","settings":"x","published_at":"2026-12-01T00:00:01Z"}`))
	f.Add([]byte(`{"format":3}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodeProgress(b)
		if err != nil {
			if !errors.Is(err, ErrProgress) {
				t.Fatalf("error %v is not ErrProgress", err)
			}
			return
		}
		again, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := DecodeProgress(again)
		if err != nil || !q.Watermark.Equal(p.Watermark) || !q.PurgedThrough.Equal(p.PurgedThrough) || q.NextOffset != p.NextOffset || q.Key() != p.Key() {
			t.Fatalf("re-decode %+v %v, want %+v", q, err, p)
		}
	})
}
