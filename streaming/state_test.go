package streaming

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"reckon/internal/kafkaconn"
	"reckon/internal/testing/testenv"
)

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

	// From now on the broker answers every fetch after a second; other
	// requests go on as usual.
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		c.SleepControl(func() { time.Sleep(time.Second) })
		return nil, nil, false
	})
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
