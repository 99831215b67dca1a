package generate

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaSink produces a noisy run, oversized poison included, to an
// in-process kfake cluster and reads it back: every record lands once, with
// its bytes, its key and its simulated arrival as the timestamp, in arrival
// order within each partition; the manifest learns every listed record's
// offset.
func TestKafkaSink(t *testing.T) {
	o := noisy(Sensors, 3000)
	o.PoisonKinds = nil // all kinds, oversized included
	g := mustNew(t, o)
	topic := g.Options().Target.Topic

	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, ProducerOpts()...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rc := NewRecorder(g)
	byValue := map[string][]Record{}
	sink := NewKafkaSink(cl, func(r Record, p int32, off int64) { rc.Acked(r.Seq, p, off) })
	err = g.Run(ctx, sink, RunOptions{OnRecord: func(r Record) {
		rc.Add(r)
		byValue[string(r.Value)] = append(byValue[string(r.Value)], r)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := sink.Acknowledged(); got != 3000 {
		t.Fatalf("acknowledged %d, want 3000", got)
	}
	m := rc.Manifest(true, nil)
	oversized := 0
	for _, e := range m.Listed {
		if e.Partition == nil || e.Offset == nil {
			t.Fatalf("listed record %d has no offset", e.Seq)
		}
		if e.Kind == Oversized {
			oversized++
		}
	}
	if oversized == 0 {
		t.Fatal("no oversized record in the run")
	}

	cons, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(8<<20))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cons.Close)
	got := 0
	last := map[int32]time.Time{}
	for got < 3000 {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read back %d of 3000: %v", got, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatal(err) })
		fs.EachRecord(func(kr *kgo.Record) {
			got++
			rs := byValue[string(kr.Value)]
			if len(rs) == 0 {
				t.Fatalf("unexpected record at %d/%d", kr.Partition, kr.Offset)
			}
			r := rs[0]
			byValue[string(kr.Value)] = rs[1:]
			if !bytes.Equal(kr.Key, r.Key) || !kr.Timestamp.Equal(r.Arrival) {
				t.Fatalf("record %d: key %q ts %v, want %q %v", r.Seq, kr.Key, kr.Timestamp, r.Key, r.Arrival)
			}
			if kr.Timestamp.Before(last[kr.Partition]) {
				t.Fatalf("partition %d goes back in time at offset %d", kr.Partition, kr.Offset)
			}
			last[kr.Partition] = kr.Timestamp
		})
	}
}
