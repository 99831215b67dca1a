package kafkaconn

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
)

// ReadTopic returns every committed record and none of an aborted
// transaction, and ends at the last stable offset (a commit marker here)
// without waiting for an idle poll.
func TestReadTopicEndsAtTheLastStableOffset(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := config.Kafka{Brokers: c.ListenAddrs(), ClientID: "test"}
	tx, err := NewClient(cfg, "test", kgo.TransactionalID("read-test"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	ctx := context.Background()
	txn := func(commit kgo.TransactionEndTry, vals ...string) {
		t.Helper()
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if err := tx.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: int32(i % 2), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	txn(kgo.TryCommit, "a0", "a1", "a2")
	txn(kgo.TryAbort, "x0", "x1")
	txn(kgo.TryCommit, "b0", "b1")

	got := map[string]bool{}
	// A read that does not end at the last stable offset (the log ends
	// with a marker) runs into the deadline.
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := ReadTopic(rctx, cfg, "test", "t", func(r *kgo.Record) error {
		got[string(r.Value)] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a0", "a1", "a2", "b0", "b1"} {
		if !got[v] {
			t.Errorf("committed record %s not read", v)
		}
	}
	for _, v := range []string{"x0", "x1"} {
		if got[v] {
			t.Errorf("aborted record %s read", v)
		}
	}
	if len(got) != 5 {
		t.Errorf("read %d records: %v", len(got), got)
	}
}
