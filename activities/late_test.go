package activities_test

import (
	"context"
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
}
