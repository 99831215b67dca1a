package streaming

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
	"reckon/internal/kafkaconn"
)

// TestWaitCaughtUpPastTransactionMarkers: with the raw records produced in
// a transaction every partition ends with a commit marker ("commit"), or
// with an aborted transaction and its marker ("abort"), which the stream
// never receives as records: its group's committed offsets stop below the
// partitions' ends. WaitCaughtUp must still see the stream caught up once
// it has committed every record, and not before: it fails while the
// records wait, and again once a record is added after the markers.
func TestWaitCaughtUpPastTransactionMarkers(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	for _, abort := range []bool{false, true} {
		t.Run(map[bool]string{false: "commit", true: "abort"}[abort], func(t *testing.T) {
			cfg, recs := newTestEnv(t, 300)
			topic := recs[0].Topic
			want := produceInTransaction(t, cfg, recs)
			if abort {
				var again []*kgo.Record
				for _, r := range recs[:20] {
					again = append(again, &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp})
				}
				produceAborted(t, cfg, again)
			}
			notCaughtUp := func(when string) {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				if err := WaitCaughtUp(ctx, cfg); err == nil {
					t.Fatalf("%s: WaitCaughtUp saw the stream caught up", when)
				}
			}
			notCaughtUp("before the stream ran")

			w, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			wctx, wcancel := context.WithTimeout(context.Background(), 2*time.Minute)
			werr := WaitCaughtUp(wctx, cfg)
			wcancel()
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if werr != nil {
				t.Fatal(werr)
			}
			adm, closeAdm, err := kafkaconn.NewAdmin(cfg.Kafka, "test")
			if err != nil {
				t.Fatal(err)
			}
			defer closeAdm()
			committed, err := adm.FetchOffsetsForTopics(context.Background(), cfg.Stream.Group, topic)
			if err != nil {
				t.Fatal(err)
			}
			last := int32(-1)
			for p, next := range want {
				c, ok := committed.Lookup(topic, p)
				if !ok || c.At < next {
					t.Errorf("caught up with partition %d committed %d of %d", p, c.At, next)
				}
				last = max(last, p)
			}
			ends, err := adm.ListEndOffsets(context.Background(), topic)
			if err != nil {
				t.Fatal(err)
			}
			if e, _ := ends.Lookup(topic, last); e.Offset <= want[last] {
				t.Fatalf("partition %d ends at %d: want a marker after its last record %d", last, e.Offset, want[last]-1)
			}

			// One more record after the markers of a partition: not caught
			// up again (the stream is stopped).
			r := &kgo.Record{Topic: topic, Partition: last, Value: []byte(fmt.Sprintf(`{"after":%d}`, want[last]))}
			cl, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "test"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
				t.Fatal(err)
			}
			notCaughtUp("a record after the markers")
		})
	}
}

// produceAborted produces recs in a transaction that it aborts: their
// partitions end with the aborted records and an abort marker.
func produceAborted(t testing.TB, cfg *config.Config, recs []*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "test"), kgo.TransactionalID("test-input-aborted"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(context.Background(), kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
}

// TestWaitCaughtUpUnderLiveTraffic: records keep arriving after
// WaitCaughtUp's first look — here in a transaction left open, so the
// stream (read committed) cannot reach the partitions' new ends at all. The
// wait still returns once the stream has committed what was there at its
// first look; a wait for the latest end would chase it for ever.
func TestWaitCaughtUpUnderLiveTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	cfg, recs := newTestEnv(t, 400)
	produce(t, cfg, recs[:200])
	looked := make(chan struct{})
	waited := make(chan error, 1)
	wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
	defer wcancel()
	go func() { waited <- waitCaughtUp(wctx, cfg, 100*time.Millisecond, func() { close(looked) }) }()
	select {
	case <-looked:
	case err := <-waited:
		t.Fatalf("the wait returned before the stream ran: %v", err)
	}
	// After the first look: more records, in a transaction that stays
	// open until the wait has returned.
	// (Its timeout outlasts the wait's minute: the broker must not abort it first.)
	tx, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "test"), kgo.TransactionalID("test-open"),
		kgo.TransactionTimeout(3*time.Minute))...)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var later []*kgo.Record
	for _, r := range recs[200:] {
		later = append(later, &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp})
	}
	if err := tx.ProduceSync(context.Background(), later...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The stream starts only now, so the first look saw it behind.
	w, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	werr := <-waited
	if err := tx.EndTransaction(context.Background(), kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if werr != nil {
		t.Fatalf("records after the first look kept the wait from returning: %v", werr)
	}
}
