package streaming

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/event"
)

// TestOutputTimes: a feature's and a pane's emitted_at is when the worker
// produced it, on the worker's clock (also its record's Kafka timestamp);
// a feature's arrived_at is the source record's Kafka timestamp and a
// pane's processed_at the stream's arrival-driven processing clock, which
// the batch and the verification compare arrivals and progress with
// (event.Pane). The worker's clock runs a day ahead here, so a field
// stamped from the wrong clock is a day off, not a few milliseconds. (A
// restart re-processes records that arrived before it: there the clocks
// part for real.)
func TestOutputTimes(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	const ahead = 24 * time.Hour
	cfg, recs := newTestEnv(t, 1500) // 12.5 minutes of event time: 5-minute windows fire
	produce(t, cfg, recs)
	w, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	w.now = func() time.Time { return time.Now().Add(ahead) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	before := time.Now().Add(ahead)
	go func() { done <- w.Run(ctx) }()
	waitDone(t, cfg, time.Minute)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	after := time.Now().Add(ahead)

	// Arrival of each raw event: its first record's Kafka timestamp (a
	// redelivery is a duplicate, dropped by dedup).
	arrival := map[string]time.Time{}
	source := map[string]string{} // event id → topic/partition/offset of its first record
	var first, last time.Time
	for _, topic := range []string{"payments-kejadian", "m8-suhu-kejadian"} {
		read(t, cfg, topic, func(r *kgo.Record) {
			var env struct {
				EventID string `json:"event_id"`
			}
			if json.Unmarshal(r.Value, &env) == nil && env.EventID != "" {
				if _, seen := arrival[env.EventID]; !seen {
					arrival[env.EventID] = r.Timestamp
					source[env.EventID] = fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset)
				}
			}
			if first.IsZero() || r.Timestamp.Before(first) {
				first = r.Timestamp
			}
			last = maxTime(last, r.Timestamp)
		})
	}
	within := func(at time.Time) bool { return !at.Before(before.Truncate(time.Millisecond)) && !at.After(after) }
	ms := func(at time.Time) time.Time { return at.Truncate(time.Millisecond) }

	features := 0
	read(t, cfg, cfg.Topics.Features, func(r *kgo.Record) {
		var f event.Feature
		if err := json.Unmarshal(r.Value, &f); err != nil {
			t.Fatal(err)
		}
		features++
		if a, ok := arrival[f.EventID]; !ok || !f.ArrivedAt.Equal(a) {
			t.Errorf("feature of %s: arrived_at %s, its source record's timestamp %s (found %v)", f.EventID, f.ArrivedAt, a, ok)
		}
		if got := fmt.Sprintf("%s/%d/%d", f.SourceTopic, f.SourcePartition, f.SourceOffset); got != source[f.EventID] {
			t.Errorf("feature of %s: source %s, its first record is at %s", f.EventID, got, source[f.EventID])
		}
		if !within(f.EmittedAt) || !ms(f.EmittedAt).Equal(r.Timestamp) {
			t.Errorf("feature of %s: emitted_at %s, record timestamp %s; the worker's clock ran %s … %s",
				f.EventID, f.EmittedAt, r.Timestamp, before, after)
		}
	})
	panes := 0
	read(t, cfg, cfg.Topics.Summaries, func(r *kgo.Record) {
		var p event.Pane
		if err := json.Unmarshal(r.Value, &p); err != nil {
			t.Fatal(err)
		}
		panes++
		// The processing clock follows the arrivals (and ticks from the
		// last one on): never the worker's clock a day ahead.
		if p.ProcessedAt.Before(first) || p.ProcessedAt.After(last.Add(after.Sub(before))) {
			t.Errorf("pane %s v%d: processed_at %s outside the arrivals %s … %s (+ the run)",
				p.RecordKey(), p.Version, p.ProcessedAt, first, last)
		}
		if !within(p.EmittedAt) || !ms(p.EmittedAt).Equal(r.Timestamp) {
			t.Errorf("pane %s v%d: emitted_at %s, record timestamp %s; the worker's clock ran %s … %s",
				p.RecordKey(), p.Version, p.EmittedAt, r.Timestamp, before, after)
		}
	})
	if features == 0 || panes == 0 {
		t.Fatalf("%d features, %d panes: nothing to check", features, panes)
	}
	t.Logf("%d features, %d panes; arrivals %s … %s, produced %s … %s", features, panes, first, last, before, after)
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
