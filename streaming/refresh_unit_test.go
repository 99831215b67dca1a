package streaming

import (
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/metrics"
	"reckon/streaming/operator"
)

// TestRefreshWaitsForItsRawRecord: a refresh whose raw record the
// partition has not processed yet (its state started afresh while the
// refresh topic still held the record) is not applied — processing the raw
// record counts it, and applying the refresh too would count it twice. A
// refresh of a processed record is applied once; only the partition a
// record named is marked for a state write.
func TestRefreshWaitsForItsRawRecord(t *testing.T) {
	op, err := operator.New(operator.Options{Stream: "pay", Rolling: 10 * time.Minute, OutOfOrderness: time.Second,
		AllowedLateness: 30 * time.Second, DedupTTL: time.Hour, DedupMaxEntries: 1000})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1")) // never used: applyRefresh reads what run kept
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	ref := func(off, rawOff int64, id string) refreshRec {
		eid, ok := operator.ParseEventID(id)
		if !ok {
			t.Fatalf("bad id %s", id)
		}
		return refreshRec{off: off, id: eid, r: event.StreamRefresh{Format: 1, Stream: "pay", Topic: "raw", Partition: 0,
			Offset: rawOff, EventID: id, Key: "Budi", EventTime: at, Value: 50}}
	}
	reg := metrics.NewRegistry()
	f := newRefresher(&config.Config{}, slog.New(slog.DiscardHandler), reg)
	f.cl, f.end = cl, 2
	f.recs = []refreshRec{
		ref(0, 4, "0a000000-0000-4000-8000-000000000001"),  // processed (next is 10): applied
		ref(1, 12, "0a000000-0000-4000-8000-000000000002"), // not processed yet: waits for its raw record
	}
	held := &partition{tp: tp{"raw", 0}, next: 10, ops: []*streamOp{{cfg: config.Stream{Name: "pay"}, op: op}}}
	other := &partition{tp: tp{"raw", 1}, next: 10}
	w := &Worker{refresh: f, parts: map[tp]*partition{{"raw", 0}: held, {"raw", 1}: other}}
	w.applyRefresh()

	l := operator.NewLookup()
	op.PublishTo(l)
	if r, _ := l.At("Budi", at); r.Agg.Count != 1 || r.Agg.Sum != 50 {
		t.Fatalf("after the refreshes: %d/%g, want the processed record's alone (1/50)", r.Agg.Count, r.Agg.Sum)
	}
	if !held.refreshed || !held.touched || held.refreshNext != 2 {
		t.Fatalf("held partition: refreshed %v touched %v refreshNext %d", held.refreshed, held.touched, held.refreshNext)
	}
	if other.touched || other.refreshNext != 2 {
		t.Fatalf("a partition no record named: touched %v refreshNext %d", other.touched, other.refreshNext)
	}
	if v := f.counter.With("pay", "unprocessed").Get(); v != 1 {
		t.Fatalf("unprocessed refreshes counted %v, want 1", v)
	}
}
