package workers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/sdk/worker"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
)

// TestFeaturesArchivedOnce runs the stream worker with rolling features on
// payments, clean traffic throughout, and the batch worker's features
// archive (started by startTruth, as `reckon batch` does) on the real dev
// server and kfake. The batch worker is stopped once the archive has
// recorded progress, while features keep coming, and a new one started
// later; in the end every committed record of the features topic is in
// the lake's features table exactly once, with the record's figures and
// its source event's place on the raw topic.
func TestFeaturesArchivedOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st := newTruthStack(t, ctx, stackOptions{externalBatch: true, tweak: func(c *config.Config) {
		for i := range c.Streams {
			if c.Streams[i].Name == "payments" {
				c.Streams[i].Rolling = 10 * time.Second
			}
		}
	}})
	st.runStream(t, ctx)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	batch := func() worker.Worker {
		w := worker.New(st.tc, st.cfg.Temporal.TaskQueue, worker.Options{})
		registerBatchAndTruth(t, w, st.cfg, st.lk)
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		if err := startTruth(ctx, st.cfg, st.tc, quiet); err != nil {
			t.Fatal(err)
		}
		return w
	}
	adm, closeAdm, err := kafkaconn.NewAdmin(st.cfg.Kafka, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer closeAdm()
	topic := st.cfg.Topics.Features
	// archived is the features archive's progress summed over partitions,
	// and the sum of the partitions' last stable offsets.
	archived := func() (next, end int64, why string) {
		offs, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			return 0, 0, err.Error()
		}
		offs.Each(func(o kadm.ListedOffset) {
			end += o.Offset
			if p, err := st.lk.ReadProgress(ctx, topic, o.Partition); err == nil {
				next += p.NextOffset
			}
		})
		return next, end, fmt.Sprintf("archived %d of %d offsets", next, end)
	}

	stopTraffic := st.backgroundTraffic(t, ctx, 100)
	w := batch()
	waitFor(t, time.Minute, "the features archive to record progress", func() (bool, string) {
		next, _, why := archived()
		return next > 0, why
	})
	w.Stop() // the batch worker goes away mid-run; the stream keeps serving
	atStop, _, _ := archived()
	waitFor(t, time.Minute, "features to pile up while no archive runs", func() (bool, string) {
		_, end, why := archived()
		return end > atStop+300, why
	})
	t.Cleanup(batch().Stop) // a new batch worker: the same workflows resume
	sent := stopTraffic()
	st.waitStreamCommitted(t, ctx)
	waitFor(t, 2*time.Minute, "the features archive to reach the end of the topic", func() (bool, string) {
		next, end, why := archived()
		return next == end, why
	})

	// Every committed feature record, by its place on the topic.
	type place struct {
		p int32
		o int64
	}
	want := map[place]event.Feature{}
	// Control records come too, so a partition is read through its last
	// stable offset even when a transaction marker ends it.
	cl, err := kgo.NewClient(append(kafkaconn.Opts(st.cfg.Kafka, "features-reader"),
		kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	lso, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	next := map[int32]int64{}
	behind := func() string {
		out := ""
		lso.Each(func(o kadm.ListedOffset) {
			if next[o.Partition] < o.Offset && out == "" {
				out = fmt.Sprintf("partition %d read to %d of %d", o.Partition, next[o.Partition], o.Offset)
			}
		})
		return out
	}
	for b := behind(); b != ""; b = behind() {
		if ctx.Err() != nil {
			t.Fatalf("reading the features topic: %s", b)
		}
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
			if r.Attrs.IsControl() {
				return
			}
			var f event.Feature
			if err := json.Unmarshal(r.Value, &f); err != nil {
				t.Fatalf("feature record %d/%d: %v", r.Partition, r.Offset, err)
			}
			want[place{r.Partition, r.Offset}] = f
		})
	}
	got := map[place]int{}
	rows := 0
	streams, err := st.lk.FeatureStreams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range streams {
		rs, err := st.lk.ReadFeatures(ctx, s, time.Now().Add(-24*time.Hour), time.Now().Add(24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			rows++
			k := place{r.KafkaPartition, r.KafkaOffset}
			got[k]++
			f, ok := want[k]
			if !ok {
				t.Errorf("row %+v is no committed feature record", r)
				continue
			}
			if back := r.Feature(); back.EventID != f.EventID || back.Count != f.Count || back.Sum != f.Sum ||
				!back.EmittedAt.Equal(f.EmittedAt.Truncate(time.Microsecond)) || back.SourceOffset != f.SourceOffset ||
				back.SourceTopic != f.SourceTopic || back.SourcePartition != f.SourcePartition || f.SourceTopic == "" {
				t.Errorf("row %+v differs from its record %+v", r, f)
			}
		}
	}
	dups, missing := 0, 0
	for k := range want {
		switch got[k] {
		case 0:
			missing++
		case 1:
		default:
			dups++
		}
	}
	t.Logf("%d events sent, %d feature records, %d rows archived, %d duplicates, %d missing; the archive stopped at %d",
		sent, len(want), rows, dups, missing, atStop)
	if len(want) == 0 || dups != 0 || missing != 0 || rows != len(want) {
		t.Fatalf("%d feature records, %d rows: %d archived twice or more, %d never", len(want), rows, dups, missing)
	}
}
