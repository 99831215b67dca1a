package activities

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
	"reckon/internal/kafkaconn"
)

// kafkaFixture is a three-broker kfake cluster (leaders spread over the
// brokers) whose topic "t" holds, per partition, committed records
// "p<p>-<i>", an aborted transaction's records and transaction markers,
// and the shared read side under test.
type kafkaFixture struct {
	c    *kfake.Cluster
	cfg  config.Kafka
	k    *Kafka
	want map[int32][]string // committed values per partition, in offset order
	offs map[int32][]int64  // their offsets
	lso  map[int32]int64
}

const fixtureTopic, fixturePartitions = "t", 4

func newKafkaFixture(t *testing.T) *kafkaFixture {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(fixturePartitions, fixtureTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	f := &kafkaFixture{c: c, cfg: config.Kafka{Brokers: c.ListenAddrs(), ClientID: "test"}, want: map[int32][]string{}, offs: map[int32][]int64{}, lso: map[int32]int64{}}
	ctx := context.Background()
	tx, err := kgo.NewClient(append(kafkaconn.Opts(f.cfg, "tx"), kgo.TransactionalID("fixture"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))...)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	plain, err := kgo.NewClient(append(kafkaconn.Opts(f.cfg, "plain"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))...)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	seq := map[int32]int{}
	recs := func(p int32, n int, keep bool) []*kgo.Record {
		var out []*kgo.Record
		for range n {
			v := fmt.Sprintf("p%d-%d", p, seq[p])
			if !keep {
				v = "aborted"
			}
			seq[p]++
			out = append(out, &kgo.Record{Topic: fixtureTopic, Partition: p, Value: []byte(v)})
		}
		return out
	}
	txn := func(commit bool, n int) {
		t.Helper()
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < fixturePartitions; p++ {
			if err := tx.ProduceSync(ctx, recs(p, n, commit)...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.EndTransaction(ctx, map[bool]kgo.TransactionEndTry{true: kgo.TryCommit, false: kgo.TryAbort}[commit]); err != nil {
			t.Fatal(err)
		}
	}
	txn(true, 30)
	txn(false, 10)
	for p := int32(0); p < fixturePartitions; p++ {
		if err := plain.ProduceSync(ctx, recs(p, 25, true)...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	txn(true, 5)
	// What a read-committed consumer sees, to compare with.
	cons, err := kgo.NewClient(append(kafkaconn.Opts(f.cfg, "check"), kgo.ConsumeTopics(fixtureTopic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for n := 0; n < fixturePartitions*60; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			f.want[r.Partition] = append(f.want[r.Partition], string(r.Value))
			f.offs[r.Partition] = append(f.offs[r.Partition], r.Offset)
		})
	}
	if f.k, err = NewKafka(f.cfg, "test"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.k.Close)
	lso, err := f.k.Admin.ListCommittedOffsets(ctx, fixtureTopic)
	if err != nil {
		t.Fatal(err)
	}
	lso.Each(func(o kadm.ListedOffset) { f.lso[o.Partition] = o.Offset })
	return f
}

// read is readCommitted's values in [from, to).
func (f *kafkaFixture) read(ctx context.Context, p int32, from, to int64) ([]string, error) {
	var got []string
	err := f.k.readCommitted(ctx, fixtureTopic, p, from, to, func(r *kgo.Record) {
		if r.Partition != p || r.Offset < from || r.Offset >= to {
			got = append(got, fmt.Sprintf("stray %d/%d", r.Partition, r.Offset))
			return
		}
		got = append(got, string(r.Value))
	})
	return got, err
}

// wantIn is the committed values of partition p in [from, to).
func (f *kafkaFixture) wantIn(p int32, from, to int64) []string {
	var out []string
	for i, o := range f.offs[p] {
		if o >= from && o < to {
			out = append(out, f.want[p][i])
		}
	}
	return out
}

// TestKafkaReadsAreSafeConcurrently: ranged reads of many partitions and
// ranges at once, on one shared client, each get exactly the committed
// records of their own range — what a read-committed consumer sees: no
// aborted record, no marker, nothing of another read.
func TestKafkaReadsAreSafeConcurrently(t *testing.T) {
	if testing.Short() {
		t.Skip("kfake")
	}
	f := newKafkaFixture(t)
	if f.lso[0] != 30+1+10+1+25+5+1 {
		t.Fatalf("fixture: last stable offset %d", f.lso[0])
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for round := range 4 {
		for p := int32(0); p < fixturePartitions; p++ {
			for _, r := range [][2]int64{{0, f.lso[p]}, {17, 50}, {31, 42}, {int64(round), f.lso[p] - int64(round)}} {
				wg.Go(func() {
					got, err := f.read(ctx, p, r[0], r[1])
					if want := f.wantIn(p, r[0], r[1]); err != nil || !slices.Equal(got, want) {
						errs <- fmt.Errorf("%d [%d, %d): %v\n got %q\nwant %q", p, r[0], r[1], err, got, want)
					}
				})
			}
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(f.want[0]) != 60 {
		t.Fatalf("fixture: %d committed records", len(f.want[0]))
	}
}

// TestKafkaFetch: markers come only when asked for; a read at the end
// finds nothing; a partition whose leader moved is read from its new
// leader; an offset deleted by retention moves to the log start.
func TestKafkaFetch(t *testing.T) {
	if testing.Short() {
		t.Skip("kfake")
	}
	f := newKafkaFixture(t)
	ctx := context.Background()

	recs, next, err := f.k.fetch(ctx, fixtureTopic, 1, 25, fetchOpts{keepControl: true})
	if err != nil || len(recs) == 0 || next <= recs[len(recs)-1].Offset {
		t.Fatalf("fetch: %d records, next %d, %v", len(recs), next, err)
	}
	markers := 0
	for _, r := range recs {
		if r.Attrs.IsControl() {
			markers++
		} else if string(r.Value) == "aborted" {
			t.Fatalf("aborted record at %d", r.Offset)
		}
	}
	if markers == 0 {
		t.Fatalf("no marker among %d records from 25", len(recs))
	}
	if recs, next, err := f.k.fetch(ctx, fixtureTopic, 1, f.lso[1], fetchOpts{}); err != nil || len(recs) != 0 || next != f.lso[1] {
		t.Fatalf("fetch at the end: %d records, next %d, %v", len(recs), next, err)
	}

	// Warm the route cache, then move the leader: the stale route answers
	// NOT_LEADER and the read looks the leader up again.
	if _, err := f.read(ctx, 2, 0, 1); err != nil {
		t.Fatal(err)
	}
	old := f.c.LeaderFor(fixtureTopic, 2)
	if err := f.c.MoveTopicPartition(fixtureTopic, 2, (old+1)%3); err != nil {
		t.Fatal(err)
	}
	if got, err := f.read(ctx, 2, 0, f.lso[2]); err != nil || !slices.Equal(got, f.want[2]) {
		t.Fatalf("after the leader moved: %v\n got %q", err, got)
	}

	// Retention deleted the first 20 offsets of partition 3.
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: fixtureTopic, Partition: 3, At: 20})
	if _, err := f.k.Admin.DeleteRecords(ctx, del); err != nil {
		t.Fatal(err)
	}
	if got, err := f.read(ctx, 3, 0, f.lso[3]); err != nil || !slices.Equal(got, f.wantIn(3, 20, f.lso[3])) {
		t.Fatalf("from below the log start: %v\n got %q", err, got)
	}
}
