package workers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/sdk/worker"

	"reckon/internal/config"
	"reckon/internal/kafkaconn"
	"reckon/internal/testing/testenv"
	"reckon/lake"
	"reckon/workflows"
)

// TestArchiveEndToEnd runs the archive workflows on a real Temporal dev
// server against a kfake broker: every produced offset ends up in the lake
// exactly once (valid → raw, poison → rejected), including across a batch
// worker that is stopped mid-archive and replaced.
func TestArchiveEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	tc, hostport := testenv.Temporal(t)
	kc, brokers := testenv.Kafka(t, 2, "", "m8-suhu-kejadian", "zreport-parts", "payments-kejadian")

	cfg, err := config.Load("", nil, []string{
		"kafka.brokers=" + brokers[0], "temporal.address=" + hostport,
		"lake.root=" + t.TempDir(), "temporal.task_queue=archive-e2e",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// 600 valid readings over 3 hours, 7 poison records, across 2 partitions.
	cl, err := kgo.NewClient(kafkaconn.Opts(cfg.Kafka, "test")...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	base := time.Date(2026, 11, 7, 8, 0, 0, 0, time.UTC)
	produce := func(from, to int) {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, sensorReading("m8-suhu-kejadian", fmt.Sprintf("e%d", i), base.Add(time.Duration(i)*18*time.Second), i, 20+i%10))
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 300)
	var poison []*kgo.Record
	for i, v := range []string{`{`, `not json`, `{"event_id":"x"}`, `{"event_id":"a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d","event_type":"sensor.suhu.terbaca","occurred_at":"2026-11-07T08:30:00Z","data":{"id_perangkat":"sensor-07","lantai":3,"suhu_c":99}}`, "\xff\xfe", `[]`, `{"event_id":"a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0e","event_type":"Bad","occurred_at":"x","data":{}}`} {
		poison = append(poison, &kgo.Record{Topic: "m8-suhu-kejadian", Key: []byte("../etc/passwd"), Value: []byte(v), Partition: int32(i % 2), Timestamp: base})
	}
	if err := cl.ProduceSync(ctx, poison...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	lk, err := lake.Open(lake.Options{Root: cfg.Lake.Root})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	startWorker := func(identity string) worker.Worker {
		w := worker.New(tc, cfg.Temporal.TaskQueue, worker.Options{Identity: identity})
		closeKafka, err := registerBatch(w, cfg, lk)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(closeKafka)
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		return w
	}
	// The first worker is stopped inside an archive step: the broker holds
	// the step's fetch, and the server lists the step as started by it.
	hold := holdNextFetch(t, ctx, kc, cfg, "m8-suhu-kejadian")
	w1 := startWorker("archive-e2e-1")
	if err := startArchives(ctx, cfg, tc, log); err != nil {
		t.Fatal(err)
	}
	// Starting again is idempotent: the same runs keep going.
	if err := startArchives(ctx, cfg, tc, log); err != nil {
		t.Fatal(err)
	}
	f := hold.wait(t, time.Minute)
	inFlight, err := startedBy(ctx, tc, "archive-e2e-1", workflows.ArchiveWorkflowID("m8-suhu-kejadian", f.partition))
	if err != nil || len(inFlight) != 1 {
		t.Fatalf("fetch of partition %d from offset %d held, but the server lists %v as started by archive-e2e-1 (%v)", f.partition, f.offset, inFlight, err)
	}
	w1.Stop()
	hold.release()
	step := inFlight[0]
	if ok, err := stillPending(ctx, tc, step); err != nil || !ok {
		t.Fatalf("%s completed although its worker was stopped inside it (%v)", step, err)
	}
	t.Logf("stopped the first worker inside %s (its fetch of partition %d from offset %d held)", step, f.partition, f.offset)
	produce(300, 600)
	w2 := startWorker("archive-e2e-2")
	defer w2.Stop()

	wantNext, err := kadmEnds(ctx, cfg, "m8-suhu-kejadian")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "every archive cursor at its partition's end", func() (bool, string) {
		for p, end := range wantNext {
			var st workflows.ArchiveState
			v, err := tc.QueryWorkflow(ctx, workflows.ArchiveWorkflowID("m8-suhu-kejadian", p), "", workflows.ArchiveQueryProgress)
			if err != nil {
				return false, err.Error()
			}
			if err := v.Get(&st); err != nil {
				return false, err.Error()
			}
			if st.Cursor != end {
				return false, fmt.Sprintf("partition %d cursor %d, end %d", p, st.Cursor, end)
			}
		}
		return true, ""
	})
	if a, err := retriedAttempt(ctx, tc, step); err != nil || a <= step.attempt {
		t.Errorf("%s: last ran in attempt %d (%v), want a retry", step, a, err)
	}

	// Every valid event exactly once in raw/, every poison record in rejected/.
	c := takeCensus(t, ctx, lk, "m8-suhu-kejadian", base.Add(-time.Hour), base.Add(10*time.Hour))
	n, ids, offsets := c.rawRows, c.ids, c.rawOffsets
	if n != 600 || len(ids) != 600 || len(offsets) != 600 {
		t.Fatalf("raw rows %d, distinct ids %d, distinct offsets %d; want 600 each", n, len(ids), len(offsets))
	}
	var rejected int64
	for p := range wantNext {
		pr, err := lk.ReadProgress(ctx, "m8-suhu-kejadian", p)
		if err != nil {
			t.Fatal(err)
		}
		if pr.NextOffset != wantNext[p] || pr.ArchivedThrough.IsZero() {
			t.Errorf("progress %d = %+v, want next %d and a time", p, pr, wantNext[p])
		}
	}
	rej := c.rejected
	rejected = int64(len(rej))
	if rejected != int64(len(poison)) {
		t.Fatalf("rejected rows = %d, want %d", rejected, len(poison))
	}
	for _, r := range rej {
		if r.Reason == "" {
			t.Errorf("rejected row at offset %d has no reason", r.KafkaOffset)
		}
	}
}

func kadmEnds(ctx context.Context, cfg *config.Config, topic string) (map[int32]int64, error) {
	adm, closeAdm, err := kafkaconn.NewAdmin(cfg.Kafka, "test")
	if err != nil {
		return nil, err
	}
	defer closeAdm()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for p, o := range ends[topic] {
		out[p] = o.Offset
	}
	return out, nil
}

// census is what the lake holds of one raw topic: raw rows as reckon's
// reader delivers them (each event once; ids and "partition/offset"
// counted), rejected rows, and every offset the lake holds in raw (every
// row, redeliveries too), rejected or raw_dropped (redeliveries a closed
// hour's compaction removed, docs/adr/0018-continuous-compaction.md).
type census struct {
	rawRows         int
	ids, rawOffsets map[string]int
	rejected        []lake.RejectedRow
	offsets         map[string]int // raw, rejected and raw_dropped together
}

func takeCensus(t *testing.T, ctx context.Context, lk *lake.Lake, topic string, from, to time.Time) census {
	t.Helper()
	c := census{ids: map[string]int{}, rawOffsets: map[string]int{}, offsets: map[string]int{}}
	_, err := lk.Scan(ctx, lake.Query{Topic: topic, From: from, To: to}, lake.ColAll, func(r *lake.RawRow) error {
		c.rawRows++
		c.ids[r.EventID]++
		c.rawOffsets[fmt.Sprintf("%d/%d", r.KafkaPartition, r.KafkaOffset)]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c.rejected = readRejected(t, lk.Root(), topic)
	if err := lk.Offsets(ctx, topic, func(_ string, p int32, o int64) error {
		c.offsets[fmt.Sprintf("%d/%d", p, o)]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return c
}

// sensorReading is a valid sensor reading (docs/requirements.md R-GATE-5)
// of device i%20+1 as a record;
// the event_id derives from name, so a rerun produces the same ids.
func sensorReading(topic, name string, at time.Time, i, suhu int) *kgo.Record {
	dev := fmt.Sprintf("sensor-%02d", i%20+1)
	v := fmt.Sprintf(`{"event_id":%q,"event_type":"sensor.suhu.terbaca","occurred_at":%q,"data":{"id_perangkat":%q,"lantai":3,"suhu_c":%d}}`,
		uuid.NewSHA1(uuid.NameSpaceOID, []byte(name)), at.Format(time.RFC3339), dev, suhu)
	return &kgo.Record{Topic: topic, Key: []byte(dev), Value: []byte(v), Timestamp: at}
}

func readRejected(t *testing.T, root, topic string) []lake.RejectedRow {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "rejected", "topic="+topic, "*", "*.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	var out []lake.RejectedRow
	for _, f := range files {
		rows, err := parquet.ReadFile[lake.RejectedRow](f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rows...)
	}
	return out
}
