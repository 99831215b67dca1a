package workers

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
	"reckon/internal/testing/testlog"
)

// TestFeaturesArchivedOnce runs the stream worker with rolling features on
// payments, clean traffic throughout, and `reckon batch` (which starts the
// features archive with the other long-running workflows) as a process,
// on the real dev server and kfake. The batch process is SIGKILLed once
// the archive has recorded progress, while features keep coming, and a
// new one started later; in the end every committed record of the features topic is in
// the lake's features table exactly once, with the record's figures and
// its source event's place on the raw topic.
func TestFeaturesArchivedOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	st := newTruthStack(t, ctx, stackOptions{externalBatch: true, tweak: func(c *config.Config) {
		for i := range c.Streams {
			if c.Streams[i].Name == "payments" {
				c.Streams[i].Rolling = 10 * time.Second
			}
		}
	}})
	st.runStream(t, ctx)
	// The batch worker is `reckon batch` in a process of its own (this
	// test binary as reckon), so it can be SIGKILLed.
	b, err := yaml.Marshal(st.cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "reckon.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	batch := func() (*exec.Cmd, *testlog.Buffer) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envChild+"=1", envChildArgs+"=batch\x1f--config\x1f"+path+"\x1f--set\x1fmetrics.addr=")
		out := &testlog.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd, out
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
	first, out := batch()
	waitFor(t, 2*time.Minute, "the features archive to record progress", func() (bool, string) {
		next, _, why := archived()
		return next > 0, why + "\n" + out.String()
	})
	// The batch worker dies mid-run, whatever it was doing; the stream
	// keeps serving.
	_ = first.Process.Signal(syscall.SIGKILL)
	_ = first.Wait()
	atStop, _, _ := archived()
	waitFor(t, time.Minute, "features to pile up while no archive runs", func() (bool, string) {
		_, end, why := archived()
		return end > atStop+300, why
	})
	_, out = batch() // a new batch worker: the same workflows resume
	sent := stopTraffic()
	st.waitStreamCommitted(t, ctx)
	// A step the kill interrupted is retried after its heartbeat
	// timeout (a minute).
	waitFor(t, 3*time.Minute, "the features archive to reach the end of the topic", func() (bool, string) {
		next, end, why := archived()
		return next == end, why + "\n" + out.String()
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
