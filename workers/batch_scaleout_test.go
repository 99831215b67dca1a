package workers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"reckon/internal/config"
	"reckon/internal/kafkaconn"
	"reckon/internal/testing/testenv"
	"reckon/lake"
	"reckon/workflows"
)

// TestBatchScaleOut runs two batch workers — each with its own client
// connection and identity, as two `reckon batch` processes would — on one
// task queue with the archive workflows (docs/adr/0010-scale-out.md). Both
// poll and both execute archive activities; then one is stopped mid-archive
// while more records arrive, and the other finishes the work: every offset
// is in the lake exactly once.
func TestBatchScaleOut(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	_, hostport := testenv.Temporal(t)
	_, brokers := testenv.Kafka(t, 3, "", "m8-suhu-kejadian", "zreport-parts", "payments-kejadian")
	const topic = "m8-suhu-kejadian"
	cfg, err := config.Load("", nil, []string{
		"kafka.brokers=" + brokers[0], "temporal.address=" + hostport,
		"lake.root=" + t.TempDir(), "temporal.task_queue=batch-scaleout",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	cl, err := kgo.NewClient(kafkaconn.Opts(cfg.Kafka, "test")...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	base := time.Date(2026, 11, 7, 8, 0, 0, 0, time.UTC)
	produce := func(from, to int) {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, sensorReading(topic, fmt.Sprintf("scale%d", i), base.Add(time.Duration(i)*12*time.Second), i, 18+i%12))
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// Two "processes": separate connections, identities and lake handles
	// on the shared lake directory.
	type batchWorker struct {
		c          client.Client
		w          worker.Worker
		activities atomic.Int64
	}
	start := func(identity string) *batchWorker {
		c, err := client.Dial(client.Options{HostPort: hostport, Namespace: cfg.Temporal.Namespace, Identity: identity,
			Logger: tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		lk, err := lake.Open(lake.Options{Root: cfg.Lake.Root})
		if err != nil {
			t.Fatal(err)
		}
		bw := &batchWorker{c: c}
		bw.w = worker.New(c, cfg.Temporal.TaskQueue, worker.Options{
			Identity:     identity,
			Interceptors: []interceptor.WorkerInterceptor{&countActivities{n: &bw.activities}},
		})
		closeKafka, err := registerBatch(bw.w, cfg, lk)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(closeKafka)
		if err := bw.w.Start(); err != nil {
			t.Fatal(err)
		}
		return bw
	}
	b1, b2 := start("batch-1"), start("batch-2")
	defer b2.w.Stop()

	produce(0, 300)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// Both processes start the archives on boot, as in compose: idempotent.
	if err := startArchives(ctx, cfg, b1.c, log); err != nil {
		t.Fatal(err)
	}
	if err := startArchives(ctx, cfg, b2.c, log); err != nil {
		t.Fatal(err)
	}

	// Both poll the queue for workflow and activity tasks.
	for _, typ := range []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY} {
		waitFor(t, time.Minute, "both workers polling", func() (bool, string) {
			resp, err := b2.c.DescribeTaskQueue(ctx, cfg.Temporal.TaskQueue, typ)
			if err != nil {
				return false, err.Error()
			}
			var ids []string
			for _, p := range resp.GetPollers() {
				ids = append(ids, p.GetIdentity())
			}
			return slices.Contains(ids, "batch-1") && slices.Contains(ids, "batch-2"), fmt.Sprintf("%s pollers %v", typ, ids)
		})
	}
	// Both take archive work (three partitions × steps every idle period).
	waitFor(t, time.Minute, "both workers running activities", func() (bool, string) {
		a1, a2 := b1.activities.Load(), b2.activities.Load()
		return a1 > 0 && a2 > 0, fmt.Sprintf("activities run: batch-1 %d, batch-2 %d", a1, a2)
	})
	t.Logf("before the stop: batch-1 ran %d activities, batch-2 %d", b1.activities.Load(), b2.activities.Load())

	// Stop batch-1 while the archives run (possibly inside an activity), and
	// keep producing: batch-2 alone must finish everything.
	b1.w.Stop()
	after := b2.activities.Load()
	produce(300, 600)

	wantNext, err := kadmEnds(ctx, cfg, topic)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "every archive cursor at its partition's end", func() (bool, string) {
		for p, end := range wantNext {
			var st workflows.ArchiveState
			v, err := b2.c.QueryWorkflow(ctx, workflows.ArchiveWorkflowID(topic, p), "", workflows.ArchiveQueryProgress)
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
	if b2.activities.Load() == after {
		t.Error("batch-2 ran no activity after batch-1 stopped: the takeover was not exercised")
	}
	t.Logf("after the stop: batch-2 ran %d more activities", b2.activities.Load()-after)

	// Every offset of every partition in the lake exactly once.
	lk, err := lake.Open(lake.Options{Root: cfg.Lake.Root})
	if err != nil {
		t.Fatal(err)
	}
	c := takeCensus(t, ctx, lk, topic, base.Add(-time.Hour), base.Add(24*time.Hour))
	ids, offsets, n := c.ids, c.rawOffsets, c.rawRows
	if n != 600 || len(ids) != 600 || len(offsets) != 600 {
		t.Fatalf("raw rows %d, distinct ids %d, distinct offsets %d; want 600 each", n, len(ids), len(offsets))
	}
	var total int64
	for p, end := range wantNext {
		pr, err := lk.ReadProgress(ctx, topic, p)
		if err != nil {
			t.Fatal(err)
		}
		if pr.NextOffset != end {
			t.Errorf("partition %d progress %+v, want next %d", p, pr, end)
		}
		total += end
	}
	if total != 600 {
		t.Fatalf("end offsets sum to %d, want 600", total)
	}
}

// countActivities counts the activity tasks a worker executes.
type countActivities struct {
	interceptor.WorkerInterceptorBase
	n *atomic.Int64
}

func (c *countActivities) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &countActivity{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, n: c.n}
}

type countActivity struct {
	interceptor.ActivityInboundInterceptorBase
	n *atomic.Int64
}

func (c *countActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	c.n.Add(1)
	return c.Next.ExecuteActivity(ctx, in)
}
