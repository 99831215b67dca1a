package streaming

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
	"reckon/internal/testing/verifytest"
)

// produceAbortedTo writes evs to one raw partition in a transaction that it
// aborts: the partition gains the aborted records and an abort marker,
// and no record a read-committed consumer sees.
func produceAbortedTo(t *testing.T, cfg *config.Config, partition int32, evs ...payment) {
	t.Helper()
	cl, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "test"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID(fmt.Sprintf("test-aborting-%d", partition)))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for _, e := range evs {
		recs = append(recs, &kgo.Record{Topic: e.topic, Partition: partition, Key: []byte(e.user),
			Value: paymentJSON(e.id, e.user, e.amount, e.at)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
}

// TestProgressForEveryAssignedPartition: the stream publishes progress for
// every partition it is assigned — one with records, one that holds only
// an aborted transaction when the worker starts, and one that is empty
// then and receives only an aborted transaction later. Both marker-only
// partitions get a watermark from the idle rule, so their windows become
// final (CheckHorizon and the compaction's stream basis do not wait for
// them), a restarted worker resumes their watermarks, and a record of a
// window their progress declared purged goes to the late topic, as on any
// partition.
func TestProgressForEveryAssignedPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	cfg := raceConfig(t)
	st, _ := cfg.StreamByName("payments")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	now := time.Now().UTC()
	pay := func(id uint64, user string, at time.Time) payment { return payment{st.Topic, id, user, 1, at} }
	produceTo(t, cfg, 0, pay(1, "u1", now), pay(2, "u2", now))
	produceAbortedTo(t, cfg, 1, pay(3, "u3", now), pay(4, "u4", now))
	latest := map[int32]func() event.StreamProgress{}
	for p := int32(0); p < 3; p++ {
		latest[p] = latestProgress(t, ctx, cfg, st, p)
	}
	w1 := startRaceWorker(t, cfg)
	waitFor(t, time.Minute, "progress of every assigned partition, the empty one too", func() (bool, string) {
		var missing []int32
		for p := int32(0); p < 3; p++ {
			if latest[p]().Settings == "" {
				missing = append(missing, p)
			}
		}
		return len(missing) == 0, fmt.Sprintf("no progress of %s partitions %v", st.Topic, missing)
	})
	if p := latest[2](); !p.Watermark.IsZero() || p.NextOffset != 0 {
		t.Errorf("the empty partition has a watermark or an offset: %+v", p)
	}
	// The partition that held only markers at the start: its clock starts
	// from the abort marker, and its purged-through point passes the
	// window of the events produced before the worker started.
	end := now.Truncate(st.Window).Add(st.Window)
	waitFor(t, time.Minute, "the marker-only partition to purge through the window", func() (bool, string) {
		p := latest[1]()
		return !p.PurgedThrough.Before(end), fmt.Sprintf("progress of partition 1 %+v, want purged through %s", p, end)
	})
	if p := latest[1](); p.NextOffset != 0 || !p.MaxEventTime.IsZero() {
		t.Errorf("the marker-only partition's progress claims a record: %+v", p)
	}
	// The empty partition receives only an aborted transaction now: the
	// worker notices the markers and starts its clock from them.
	later := time.Now().UTC()
	produceAbortedTo(t, cfg, 2, pay(5, "u5", later))
	end2 := later.Truncate(st.Window).Add(st.Window)
	waitFor(t, time.Minute, "the partition that became marker-only to purge through its window", func() (bool, string) {
		p := latest[2]()
		return !p.PurgedThrough.Before(end2), fmt.Sprintf("progress of partition 2 %+v, want purged through %s", p, end2)
	})
	// A marker-only partition has a committed offset too: a new owner's
	// stable offset fetch waits for the last owner's transaction.
	adm, closeAdm, err := kafkaconn.NewAdmin(cfg.Kafka, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer closeAdm()
	offs, err := adm.FetchOffsets(kadm.RequireStable(ctx), cfg.Stream.Group)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []int32{1, 2} {
		if o, ok := offs.Lookup(st.Topic, p); !ok || o.At != 0 {
			t.Errorf("committed offset of marker-only partition %d: %+v (found %v), want 0", p, o, ok)
		}
	}
	// A restart: the new worker restores the marker-only partitions at
	// their committed offset and replays their ticks, idle start included,
	// to the same watermark (the check below: no progress field goes back).
	w1.stop(t)
	before := latest[1]()
	startRaceWorker(t, cfg)
	waitFor(t, time.Minute, "the restarted worker to republish the marker-only partition's progress", func() (bool, string) {
		p := latest[1]()
		return p.PublishedAt.After(before.PublishedAt) && !p.Watermark.IsZero(),
			fmt.Sprintf("progress of partition 1 %+v, %+v before the restart", p, before)
	})
	// An event of the purged window now: late, as on any partition.
	lateAt := produceTo(t, cfg, 1, pay(6, "u6", now))[0]
	waitFor(t, time.Minute, "the worker to process the late event", func() (bool, string) {
		p := latest[1]()
		return p.NextOffset > lateAt, fmt.Sprintf("progress of partition 1 %+v", p)
	})
	for _, v := range verifytest.Progress(t, ctx, cfg).Violations(cfg) {
		t.Error(v)
	}
	want := fmt.Sprintf("%s/1/%d", st.Topic, lateAt)
	found := false
	read(t, cfg, cfg.Topics.Late, func(r *kgo.Record) {
		_, src := sourceOf(r)
		found = found || src == want
	})
	if !found {
		t.Errorf("the event %s of a window partition 1's progress had purged is not in the late topic", want)
	}
}
