package streaming

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"reckon/internal/kafkaconn"
	"reckon/internal/testing/testenv"
)

// slowFetches makes the broker answer every fetch from now on only after d;
// other requests go on as usual.
func slowFetches(c *kfake.Cluster, d time.Duration) {
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		c.SleepControl(func() { time.Sleep(d) })
		return nil, nil, false
	})
}

// TestProbesOnASlowBroker: the reads below a last stable offset that tell
// records from transaction markers (recordWaiting, the stream's catch-up
// probe, and lastRecords, WaitCaughtUp's) answer on a broker that answers
// every fetch after 1.5 s; they gave up after a second, and were retried
// with a new client, for as long as the machine stayed that slow.
func TestProbesOnASlowBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	c, brokers := testenv.Kafka(t, 1, "")
	cfg, _ := newTestEnvOn(t, brokers, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := cfg.Streams[0]
	// Partition 0: a record, then an aborted record and its marker.
	offs := produceTo(t, cfg, 0, payment{s.Topic, 1, "u1", 10, time.Now()})
	cl, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "test"), kgo.TransactionalID("probe-test"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: s.Topic, Partition: 0, Value: []byte("aborted")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	adm, closeAdm, err := kafkaconn.NewAdmin(cfg.Kafka, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer closeAdm()
	ends, err := adm.ListCommittedOffsets(ctx, s.Topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(s.Topic, 0)
	if end.Offset <= offs[0]+1 {
		t.Fatalf("partition 0 ends at %d: no marker after the record at %d", end.Offset, offs[0])
	}

	slowFetches(c, 1500*time.Millisecond)
	w := &Worker{cfg: cfg}
	k := tp{s.Topic, 0}
	if waiting, _, err := w.recordWaiting(ctx, k, offs[0], end.Offset); err != nil || !waiting {
		t.Errorf("recordWaiting from the record: waiting %v, %v; want a record waiting", waiting, err)
	}
	if waiting, _, err := w.recordWaiting(ctx, k, offs[0]+1, end.Offset); err != nil || waiting {
		t.Errorf("recordWaiting after the record: waiting %v, %v; want markers only", waiting, err)
	}
	last, err := lastRecords(ctx, cfg.Kafka, map[tp]span{k: {0, end.Offset}})
	if err != nil || last[k] != offs[0] {
		t.Errorf("lastRecords: %v, %v; want %d", last, err, offs[0])
	}
}

// TestLoadStateOnASlowBroker: a broker that answers every fetch only after
// a second (a loaded machine) must not make the restore read end early.
// The read once stopped at the first poll quiet for 500 ms and restored
// nothing at all ("0, want 550"): a worker then started its partitions
// from older state, and `make chaos` counted nothing accepted.
func TestLoadStateOnASlowBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	c, brokers := testenv.Kafka(t, 1, "")
	cfg, _ := newTestEnvOn(t, brokers, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// 550 checkpoints in 11 transactions, as stream workers write them;
	// the last transaction aborted writes a different value it must not
	// restore.
	cl, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "test"), kgo.TransactionalID("state-test"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	want := map[string]bool{}
	write := func(from, to int, value string, commit bool) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := from; i < to; i++ {
			k := stateKey("payments", "raw", int32(i))
			want[k] = true
			cl.Produce(ctx, &kgo.Record{Topic: cfg.Topics.StreamState, Key: []byte(k), Value: []byte(value + strconv.Itoa(i)),
				Headers: []kgo.RecordHeader{{Key: headerNextOffset, Value: []byte(strconv.Itoa(i))}}}, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 550; i += 50 {
		write(i, i+50, "state-", true)
	}
	write(0, 50, "aborted-", false)

	slowFetches(c, time.Second)
	snaps, err := loadState(ctx, cfg, want)
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != len(want) {
		t.Fatalf("restored %d checkpoints, want %d", len(snaps), len(want))
	}
	for k := range want {
		s := snaps[k]
		i := k[len(stateKey("payments", "raw", 0))-1:]
		if got := string(s.state); got != "state-"+i || fmt.Sprint(s.next) != i {
			t.Errorf("%s: restored %q at %d, want %q at %s", k, got, s.next, "state-"+i, i)
		}
	}
}
