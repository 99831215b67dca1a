package activities_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/activities"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
)

// TestPublishRefresh (R-LOOK-5): a step of the late topic becomes refresh
// records for the too-late events of streams whose rolling size is longer
// than their allowed lateness, published only once the lake holds the
// events; a late record of another stream is skipped.
func TestPublishRefresh(t *testing.T) {
	if testing.Short() {
		t.Skip("kfake")
	}
	f := newTruthFixture(t)
	for i := range f.cfg.Streams {
		if f.cfg.Streams[i].Name == "payments" {
			f.cfg.Streams[i].Rolling, f.cfg.Streams[i].AllowedLateness = 10*time.Minute, 30*time.Second
		}
	}
	ctx := context.Background()
	adm := kadm.NewClient(f.cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, f.cfg.Topics.StreamRefresh); err != nil {
		t.Fatal(err)
	}
	id := f.event(1, "u7", t0.Add(7*time.Minute), t0.Add(time.Hour), 42)
	raw := f.raw[1][0]
	late := func(stream string) *kgo.Record {
		return &kgo.Record{Topic: lateTopic, Partition: 0, Key: raw.Key, Value: raw.Value, Timestamp: t0.Add(time.Hour),
			Headers: []kgo.RecordHeader{
				{Key: "reckon.stream", Value: []byte(stream)},
				{Key: event.HeaderSourceTopic, Value: []byte(rawTopic)},
				{Key: event.HeaderSourcePartition, Value: []byte("1")},
				{Key: event.HeaderSourceOffset, Value: []byte(strconv.Itoa(0))},
			}}
	}
	cl, err := kgo.NewClient(append(kafkaconn.Opts(f.cfg.Kafka, "test-late"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, late("payments"), late("suhu")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	type out struct {
		res activities.PublishRefreshResult
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := run[activities.PublishRefreshResult](t, f.a, f.a.PublishRefresh, activities.PublishRefreshInput{
			Topic: lateTopic, Partition: 0, From: 0, To: 2, Poll: 10 * time.Millisecond})
		done <- out{res, err}
	}()
	refreshes := func() []event.StreamRefresh {
		var rs []event.StreamRefresh
		if err := kafkaconn.ReadTopic(ctx, f.cfg.Kafka, "test", f.cfg.Topics.StreamRefresh, func(r *kgo.Record) error {
			rr, err := event.DecodeRefresh(r.Value)
			if err != nil {
				t.Error(err)
			}
			rs = append(rs, rr)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return rs
	}
	// The lake does not hold the event yet: nothing may be published.
	if rs := refreshes(); len(rs) != 0 {
		t.Fatalf("published before the lake held the event: %+v", rs)
	}
	f.archive(t, t0.Add(time.Hour))
	o := <-done
	if o.err != nil || o.res.Published != 1 || o.res.Skipped != 1 {
		t.Fatalf("result %+v %v", o.res, o.err)
	}
	rs := refreshes()
	want := event.StreamRefresh{Format: 1, Stream: "payments", Topic: rawTopic, Partition: 1, Offset: 0, EventID: id, Key: "u7",
		EventTime: t0.Add(7 * time.Minute), Value: 42, LateAt: t0.Add(time.Hour)}
	if len(rs) != 1 || !refreshEqual(rs[0], want) {
		b, _ := json.Marshal(rs)
		t.Fatalf("refresh records %s, want one %+v", b, want)
	}
}

func refreshEqual(a, b event.StreamRefresh) bool {
	return a.Stream == b.Stream && a.Topic == b.Topic && a.Partition == b.Partition && a.Offset == b.Offset &&
		a.EventID == b.EventID && a.Key == b.Key && a.EventTime.Equal(b.EventTime) && a.Value == b.Value && a.LateAt.Equal(b.LateAt)
}
