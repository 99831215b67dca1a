package streaming

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/event"
	"reckon/internal/kafkaconn"
	"reckon/verify/generate"
	"reckon/verify/ledger"
)

// TestStreamLedger runs generator traffic (late, beyond-lateness,
// duplicates, poison) through the stream worker and checks conservation:
// every produced record is accepted, late, dead-lettered or a counted
// duplicate, exactly once; and every window whose final pane differs from
// the truth differs by exactly the events the stream sent to the late
// output — the gap the batch side's correction closes.
func TestStreamLedger(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	cfg, _ := newTestEnv(t, 1) // broker and topics; the traffic is generated below, with a manifest
	o := generate.Defaults(generate.Payments)
	o.Seed, o.Count, o.Start, o.Rate = 7, 4000, time.Date(2026, 11, 7, 8, 0, 0, 0, time.UTC), 2
	o.LateFraction, o.BeyondLatenessFraction, o.DuplicateFraction, o.PoisonFraction = 0.1, 0.5, 0.05, 0.02
	g, err := generate.New(o)
	if err != nil {
		t.Fatal(err)
	}
	rec := generate.NewRecorder(g)
	cl, err := kgo.NewClient(kafkaconn.Opts(cfg.Kafka, "test")...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var recs []*kgo.Record
	seqs := map[*kgo.Record]int64{}
	for {
		r, ok := g.Next()
		if !ok {
			break
		}
		rec.Add(r)
		kr := &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Timestamp: r.Arrival}
		recs = append(recs, kr)
		seqs[kr] = r.Seq
	}
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	// ProduceSync returns results in completion order: map them back by record.
	for _, r := range res {
		rec.Acked(seqs[r.Record], r.Record.Partition, r.Record.Offset)
	}
	cl.Close()
	m := rec.Manifest(true, nil)

	runInProcess(t, cfg)
	out := collect(t, cfg)
	s, _ := cfg.StreamByName("payments")
	acc, dup, late, wm, err := CommittedStats(ctx, cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	l := ledger.Compute(m, "payments", ledger.Outputs{Panes: out.final, Late: out.late, DLQ: out.dlq, Accepted: acc, Duplicates: dup, LateCount: late, Watermark: wm})
	var report strings.Builder
	l.Print(&report)
	t.Log("\n" + report.String())
	if !l.Conserved() {
		t.Fatal("records not conserved")
	}
	if l.Late == 0 || l.Duplicates == 0 || l.DeadLettered == 0 || len(l.WindowsDiffer) == 0 {
		t.Fatalf("traffic too clean to test the ledger: %+v", l)
	}
	// Every difference is exactly the late-output events of that window.
	lateIn := map[string]int64{}
	read(t, cfg, cfg.Topics.Late, func(r *kgo.Record) {
		for _, h := range r.Headers {
			if h.Key == "reckon.event_time" {
				et, _ := time.Parse(time.RFC3339Nano, string(h.Value))
				start := et.Truncate(s.Window)
				lateIn[event.WindowKey("payments", string(r.Key), start)]++
			}
		}
	})
	for _, d := range l.WindowsDiffer {
		var got int64
		if d.Final != nil {
			got = d.Final.Count
		}
		k := event.WindowKey("payments", d.Key, d.WindowStart)
		if d.Truth.Count-got != lateIn[k] {
			t.Errorf("window %s: truth %d, final %d, late events %d", k, d.Truth.Count, got, lateIn[k])
		}
	}
}
