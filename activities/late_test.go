package activities_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/activities"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
)

// TestReadLateSignalsTheAffectedWindows: late records become (stream, key,
// window) items with the raw offset the lake must reach; a fresh watcher
// starts at the end; records without a known stream are skipped.
func TestReadLateSignalsTheAffectedWindows(t *testing.T) {
	if testing.Short() {
		t.Skip("kfake")
	}
	f := newTruthFixture(t)
	var mu sync.Mutex
	got := map[string][]activities.LateItem{}
	f.a.SignalLate = func(_ context.Context, stream string, items []activities.LateItem) error {
		mu.Lock()
		defer mu.Unlock()
		got[stream] = append(got[stream], items...)
		return nil
	}
	first, err := run[activities.ReadLateResult](t, f.a, f.a.ReadLate, activities.ReadLateInput{Topic: lateTopic, Partition: 0, From: -1, Wait: 100 * time.Millisecond})
	if err != nil || first.Next != 0 || first.Records != 0 {
		t.Fatalf("fresh watcher %+v %v", first, err)
	}
	f.event(1, "u7", t0.Add(7*time.Minute), t0.Add(time.Hour), 42)
	raw := f.raw[1][0]
	lateRec := func(stream string, offset int) *kgo.Record {
		return &kgo.Record{Topic: lateTopic, Partition: 0, Key: raw.Key, Value: raw.Value, Headers: []kgo.RecordHeader{
			{Key: event.HeaderReason, Value: []byte("late")},
			{Key: "reckon.stream", Value: []byte(stream)},
			{Key: event.HeaderSourceTopic, Value: []byte(rawTopic)},
			{Key: event.HeaderSourcePartition, Value: []byte("1")},
			{Key: event.HeaderSourceOffset, Value: []byte(strconv.Itoa(offset))},
		}}
	}
	cl, err := kgo.NewClient(append(kafkaconn.Opts(f.cfg.Kafka, "test-late"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), lateRec("payments", 17), lateRec("nope", 18)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	res, err := run[activities.ReadLateResult](t, f.a, f.a.ReadLate, activities.ReadLateInput{Topic: lateTopic, Partition: 0, From: first.Next, Wait: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Records != 2 || res.Items != 1 || res.Skipped != 1 || res.Next != 2 || !res.CaughtUp {
		t.Fatalf("result %+v", res)
	}
	items := got["payments"]
	if len(items) != 1 {
		t.Fatalf("signalled %v", got)
	}
	it := items[0]
	if it.Key != "u7" || !it.WindowStart.Equal(t0.Add(5*time.Minute)) || !it.WindowEnd.Equal(t0.Add(10*time.Minute)) || it.SourcePartition != 1 || it.SourceOffset != 17 {
		t.Fatalf("item %+v", it)
	}

	// A hopping stream (5-minute windows every minute): the event at 08:07
	// names every window covering it, 08:03–08:08 … 08:07–08:12.
	for i := range f.cfg.Streams {
		if f.cfg.Streams[i].Name == "payments" {
			f.cfg.Streams[i].Hop = time.Minute
		}
	}
	if err := cl.ProduceSync(context.Background(), lateRec("payments", 19)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	res, err = run[activities.ReadLateResult](t, f.a, f.a.ReadLate, activities.ReadLateInput{Topic: lateTopic, Partition: 0, From: res.Next, Wait: 2 * time.Second})
	if err != nil || res.Records != 1 || res.Items != 5 {
		t.Fatalf("hopping: result %+v %v", res, err)
	}
	items = got["payments"][1:]
	if len(items) != 5 {
		t.Fatalf("hopping: signalled %v", items)
	}
	for i, it := range items {
		start := t0.Add(time.Duration(3+i) * time.Minute)
		if it.Key != "u7" || !it.WindowStart.Equal(start) || !it.WindowEnd.Equal(start.Add(5*time.Minute)) || it.SourceOffset != 19 {
			t.Errorf("hopping item %d: %+v, want the window at %v", i, it, start)
		}
	}
}

// TestReadLateCatchesUpPastTransactionMarkers: the stream writes the late
// topic in transactions, so a late partition ends with a marker (or with
// an aborted transaction and its marker) that is no record. ReadLate
// reads the committed late records only, its cursor reaches the last
// stable offset, and it reports caught up there.
func TestReadLateCatchesUpPastTransactionMarkers(t *testing.T) {
	if testing.Short() {
		t.Skip("kfake")
	}
	f := newTruthFixture(t)
	var mu sync.Mutex
	var got []int64
	f.a.SignalLate = func(_ context.Context, _ string, items []activities.LateItem) error {
		mu.Lock()
		defer mu.Unlock()
		for _, it := range items {
			got = append(got, it.SourceOffset)
		}
		return nil
	}
	f.event(1, "u7", t0.Add(7*time.Minute), t0.Add(time.Hour), 42)
	raw := f.raw[1][0]
	cl, err := kgo.NewClient(append(kafkaconn.Opts(f.cfg.Kafka, "test-late"),
		kgo.TransactionalID("test-late-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var want []int64
	src := 0
	for _, commit := range []bool{true, true, false} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for range 2 {
			recs = append(recs, &kgo.Record{Topic: lateTopic, Partition: 0, Key: raw.Key, Value: raw.Value, Headers: []kgo.RecordHeader{
				{Key: event.HeaderReason, Value: []byte("late")},
				{Key: "reckon.stream", Value: []byte("payments")},
				{Key: event.HeaderSourceTopic, Value: []byte(rawTopic)},
				{Key: event.HeaderSourcePartition, Value: []byte("1")},
				{Key: event.HeaderSourceOffset, Value: []byte(strconv.Itoa(src))},
			}})
			if commit {
				want = append(want, int64(src))
			}
			src++
		}
		if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(t.Context(), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	adm := f.a.Kafka.Admin
	offs, err := adm.ListCommittedOffsets(t.Context(), lateTopic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := offs.Lookup(lateTopic, 0)
	res, err := run[activities.ReadLateResult](t, f.a, f.a.ReadLate, activities.ReadLateInput{Topic: lateTopic, Partition: 0, From: 0, Wait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Records != int64(len(want)) || res.Next != end.Offset || !res.CaughtUp {
		t.Errorf("result %+v, want %d records, caught up at the last stable offset %d", res, len(want), end.Offset)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, want) {
		t.Errorf("signalled source offsets %v, want the committed records' %v", got, want)
	}
}
