package workers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/activities"
	"reckon/internal/kafkaconn"
)

// TestMarkerOnlyPartitionDoesNotStopTheTruth: one partition of the raw
// topic holds only an aborted transaction (its records and the abort
// marker: nothing a read-committed consumer sees). The stream publishes
// progress for it too and gives it a watermark from the idle rule
// (docs/adr/0033-progress-every-partition-and-broker-outages.md), so a
// recompute of a range with events on the other partitions finishes with
// the truth (the aborted records not counted), and a compaction pass takes
// its closed-through point from the stream's progress instead of waiting
// for the marker-only partition for ever.
func TestMarkerOnlyPartitionDoesNotStopTheTruth(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st, view := raceStack(t, ctx, nil)
	cfg := st.cfg
	s, _ := cfg.StreamByName("payments")
	ws := time.Now().UTC().Truncate(s.Window).Add(-3 * s.Window)
	end := ws.Add(s.Window)

	// Partition 1: an aborted transaction only, with events of the range.
	cl, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "test"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID("test-aborting"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	aborted := []raceEvent{
		{name: "a1", user: "k9", amount: 1000, at: ws.Add(time.Second)},
		{name: "a2", user: "k9", amount: 1000, at: ws.Add(2 * time.Second)},
	}
	for _, e := range aborted {
		if err := cl.ProduceSync(ctx, e.record(s.Topic, 1)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	prod := newRaceProducer(t, cfg, s.Topic)
	offs0, _ := prod.must(t, ctx, 0, raceEvent{name: "e1", user: "k1", amount: 10, at: ws.Add(time.Second)},
		raceEvent{name: "e2", user: "k1", amount: 20, at: ws.Add(2 * time.Second)})
	offs2, _ := prod.must(t, ctx, 2, raceEvent{name: "e3", user: "k2", amount: 5, at: ws.Add(3 * time.Second)})
	st.runStream(t, ctx)

	// The range holds events once the lake has them (else the recompute
	// has nothing to check); then it waits for the stream's horizon.
	st.waitLakeHolds(t, ctx, s.Topic, 0, offs0[1]+1)
	st.waitLakeHolds(t, ctx, s.Topic, 2, offs2[0]+1)
	id := st.startRecompute(t, ctx, s.Name, ws, end)
	res := st.waitRecompute(t, ctx, id, 2*time.Minute)
	t.Logf("recompute of %s..%s: %+v", ws.Format(time.TimeOnly), end.Format(time.TimeOnly), res.Report)
	if !res.Report.To.Equal(end) || res.Report.Windows != 2 {
		t.Errorf("recompute report %+v: want the range to %s and its two windows", res.Report, end.Format(time.TimeOnly))
	}
	p1 := latestProgress(t, ctx, view, s.Name, s.Topic, 1)
	if p1.PurgedThrough.Before(end) || p1.NextOffset != 0 {
		t.Errorf("the marker-only partition's progress %+v: want purged through %s at offset 0",
			p1, end.Format(time.TimeOnly))
	}
	st.obs.catchUp(t, ctx)
	checkHighest(t, st.obs.snapshot(), s.Name, ws, end, map[string][2]float64{"k1": {2, 30}, "k2": {1, 5}})

	// A compaction pass: every partition the archive reached has stream
	// progress with a purged-through point, the marker-only one too.
	st.waitLakeHolds(t, ctx, s.Topic, 1, 1) // the archive moved past the aborted batch and its marker
	c := &activities.Compaction{Cfg: cfg, Lake: st.lk, Progress: view}
	var cr activities.CompactRawResult
	waitFor(t, time.Minute, "a compaction pass closed by the stream's progress of every partition", func() (bool, string) {
		cr, err = c.CompactRaw(ctx, activities.CompactRawInput{Topic: s.Topic})
		if err != nil {
			t.Fatal(err)
		}
		closed := cr.Basis == "stream progress" && !cr.ClosedThrough.IsZero()
		return closed && !strings.Contains(cr.Waiting, "published no progress"), fmt.Sprintf("%+v", cr)
	})
	t.Logf("compaction pass: closed through %s (%s), slowest: %s",
		cr.ClosedThrough.Format(time.RFC3339), cr.Basis, cr.Waiting)
}
