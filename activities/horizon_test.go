package activities_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/activities"
	"reckon/internal/kafkaconn"
	"reckon/lake"
)

// TestCheckHorizon: not final until the archive passed end + lateness +
// out-of-orderness + idle timeout + margin, and the stream's watermark
// passed end + lateness on every partition at the group's committed offset
// — proven by a processed record late enough in event time, or by the
// idle rule once the stream consumed (and the lake archived) everything.
// A tail of too-late records keeps the idle clock from running: the case
// `make chaos` found, where a window was "corrected" while the stream
// still accepted events for it. Targeted mode waits for offsets only.
func TestCheckHorizon(t *testing.T) {
	if testing.Short() {
		t.Skip("kfake")
	}
	f := newTruthFixture(t)
	st, _ := f.cfg.StreamByName("payments")
	end := t0.Add(15 * time.Minute)
	h := activities.Horizon(st, f.cfg.Batch, end)
	if want := end.Add(5*time.Minute + 5*time.Second + time.Minute + time.Second); !h.Equal(want) {
		t.Fatalf("horizon %v, want %v", h, want)
	}
	now := h
	f.a.Now = func() time.Time { return now }
	// Partition 0: an event of the range, then one whose event time moves
	// the watermark past the purge point (end + 5m lateness + 5s).
	f.event(0, "u1", t0.Add(14*time.Minute), t0.Add(14*time.Minute), 1)
	f.event(0, "u1", end.Add(5*time.Minute+6*time.Second), end.Add(5*time.Minute+6*time.Second), 1)
	// Partition 1: its last on-time event at t0+10m, then nothing.
	f.event(1, "u2", t0.Add(10*time.Minute), t0.Add(10*time.Minute), 1)
	produced := map[int32]int{}
	produceRaw := func() {
		t.Helper()
		var recs []*kgo.Record
		for p := int32(0); p < 2; p++ {
			for _, r := range f.raw[p][produced[p]:] {
				recs = append(recs, &kgo.Record{Topic: rawTopic, Partition: p, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp})
			}
			produced[p] = len(f.raw[p])
		}
		cl, err := kgo.NewClient(append(kafkaconn.Opts(f.cfg.Kafka, "test-p"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produceRaw()
	check := func(in activities.HorizonInput) activities.HorizonResult {
		t.Helper()
		r, err := run[activities.HorizonResult](t, f.a, f.a.CheckHorizon, in)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	in := activities.HorizonInput{Stream: "payments", To: end}
	for p := int32(0); p < 2; p++ {
		if _, err := f.lk.WriteProgress(lake.Progress{Topic: rawTopic, Partition: p, NextOffset: 0, ArchivedThrough: h.Add(-time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	if r := check(in); r.Ready || !strings.Contains(r.Waiting, "archive") {
		t.Fatalf("archive behind: %+v", r)
	}
	f.archive(t, h.Add(time.Minute))
	if r := check(in); r.Ready || !strings.Contains(r.Waiting, "has not consumed") {
		t.Fatalf("stream never consumed: %+v", r)
	}
	adm := kadm.NewClient(f.cl)
	commit := func(p int32, at int64) {
		t.Helper()
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: rawTopic, Partition: p, At: at})
		if _, err := adm.CommitOffsets(context.Background(), f.cfg.Stream.Group, os); err != nil {
			t.Fatal(err)
		}
	}
	commit(0, 1) // processed t0+14m only: watermark t0+13m55s
	commit(1, 1) // processed everything there is
	// Partition 1 idles from t0+10m at watermark t0+9m55s: it reaches the
	// purge point t0+20m after 1m idle + 10m05s, plus the 1s margin.
	idleReady := t0.Add(10*time.Minute + time.Minute + 10*time.Minute + 5*time.Second + time.Second)
	now = idleReady.Add(-time.Second)
	r := check(in)
	if r.Ready || !strings.Contains(r.Waiting, "0 (stream at offset 1 of 2") || !strings.Contains(r.Waiting, "1 (idle since") {
		t.Fatalf("partition 0 behind, partition 1 idling: %+v", r)
	}
	commit(0, 2)
	if r := check(in); r.Ready || strings.Contains(r.Waiting, "0 (") || !strings.Contains(r.Waiting, "1 (idle since") {
		t.Fatalf("partition 0 proven by its record, partition 1 still idling: %+v", r)
	}
	now = idleReady
	if r := check(in); !r.Ready {
		t.Fatalf("should be final: %+v", r)
	}

	// A too-late record (t0+9m, its window long fired) arrives on the idle
	// partition: it restarts the idle clock without moving the watermark.
	// Until the stream has processed it and the lake holds it, and then an
	// idle timeout plus the watermark's gap later, the stream could still
	// accept an event of the range.
	lateAt := h.Add(30 * time.Second) // past the horizon: ingest time proves nothing
	f.event(1, "u2", t0.Add(9*time.Minute), lateAt, 1)
	produceRaw()
	if r := check(in); r.Ready || !strings.Contains(r.Waiting, "1 (stream at offset 1 of 2") {
		t.Fatalf("late record not yet processed: %+v", r)
	}
	commit(1, 2)
	if r := check(in); r.Ready || !strings.Contains(r.Waiting, "1 (archived to offset 1 of 2") {
		t.Fatalf("late record not yet archived: %+v", r)
	}
	w := f.rawWriter(t)
	// archiveLast archives partition 1's newest record.
	archiveLast := func() {
		t.Helper()
		off := int64(len(f.raw[1]) - 1)
		if _, err := w.WriteRange(1, off, off, f.raw[1][off:]); err != nil {
			t.Fatal(err)
		}
		if _, err := f.lk.WriteProgress(lake.Progress{Topic: rawTopic, Partition: 1, NextOffset: off + 1, ArchivedThrough: h.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	// idleFrom: partition 1's last record at `at` restarted the idle clock
	// from watermark t0+9m55s: final 1m idle + 10m05s + 1s margin later.
	idleFrom := func(at time.Time, what string) time.Time {
		t.Helper()
		ready := at.Add(time.Minute + 10*time.Minute + 5*time.Second + time.Second)
		now = ready.Add(-time.Second)
		if r := check(in); r.Ready || !strings.Contains(r.Waiting, "1 (idle since "+at.Format(time.RFC3339)) {
			t.Fatalf("%s restarted the idle clock: %+v", what, r)
		}
		now = ready
		if r := check(in); !r.Ready {
			t.Fatalf("should be final after the %s: %+v", what, r)
		}
		return ready
	}
	archiveLast()
	lateReady := idleFrom(lateAt, "late record")

	// A transactional producer: its record at offset 2 is followed by the
	// commit marker at 3, so the end is 4 while no consumer ever commits
	// past 3. The idle rule must take the last committed record, not wait
	// for offset 4 forever.
	txAt := lateReady.Add(10 * time.Second)
	f.event(1, "u2", t0.Add(8*time.Minute), txAt, 1)
	txr := f.raw[1][2]
	tx, err := kgo.NewClient(append(kafkaconn.Opts(f.cfg.Kafka, "test-txn-raw"), kgo.TransactionalID("test-raw-producer"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(context.Background(), &kgo.Record{Topic: rawTopic, Partition: 1, Key: txr.Key, Value: txr.Value, Timestamp: txr.Timestamp}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := tx.EndTransaction(context.Background(), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if r := check(in); r.Ready || !strings.Contains(r.Waiting, "1 (stream at offset 2 of 3") {
		t.Fatalf("transactional record not yet processed: %+v", r)
	}
	commit(1, 3) // the record's offset + 1: the marker is never committed past
	archiveLast()
	idleFrom(txAt, "transactional record")

	// Targeted: the lake must hold the late events' offsets.
	tin := activities.HorizonInput{Stream: "payments", To: end, After: []activities.PartitionOffset{{Partition: 0, Offset: 1}, {Partition: 1, Offset: 3}}}
	if r := check(tin); r.Ready || !strings.Contains(r.Waiting, "/1 archived to 3, need 4") {
		t.Fatalf("targeted: %+v", r)
	}
	if _, err := f.lk.WriteProgress(lake.Progress{Topic: rawTopic, Partition: 1, NextOffset: 4, ArchivedThrough: t0.Add(3 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if r := check(tin); !r.Ready {
		t.Fatalf("targeted should be ready: %+v", r)
	}

	// Bad input fails for good.
	_, err = run[activities.HorizonResult](t, f.a, f.a.CheckHorizon, activities.HorizonInput{Stream: "nope", To: end})
	if err == nil || !strings.Contains(err.Error(), "unknown stream") {
		t.Fatalf("unknown stream: %v", err)
	}
}
