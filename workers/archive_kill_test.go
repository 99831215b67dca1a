package workers

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"reckon/internal/config"
	"reckon/internal/kafkaconn"
	"reckon/internal/testing/testenv"
	"reckon/lake"
	"reckon/workflows"
)

// TestArchiveSurvivesSIGKILL runs `reckon batch` as real processes and
// SIGKILLs them mid-archive (small steps, so a kill lands inside or between
// activities). Temporal retries the interrupted step on the next process;
// in the end every offset is in the lake exactly once.
func TestArchiveSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	tc, hostport := testenv.Temporal(t)
	_, brokers := testenv.Kafka(t, 2, "", "m8-suhu-kejadian")
	root := t.TempDir()
	env := []string{
		"RECKON_KAFKA_BROKERS=" + brokers[0], "RECKON_TEMPORAL_ADDRESS=" + hostport,
		"RECKON_LAKE_ROOT=" + root, "RECKON_TEMPORAL_TASK_QUEUE=archive-kill", "RECKON_METRICS_ADDR=",
	}
	cfg, err := config.Load("", env, nil)
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
	const n = 4000
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		r := sensorReading("m8-suhu-kejadian", fmt.Sprintf("k%d", i), base.Add(time.Duration(i)*3*time.Second), i, 20+i%10)
		if i%100 == 7 {
			r.Value = []byte(`{"broken":`) // poison: goes to rejected/
		}
		recs = append(recs, r)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ends, err := kadmEnds(ctx, cfg, "m8-suhu-kejadian")
	if err != nil {
		t.Fatal(err)
	}
	// Small steps: 40 archive activities per partition.
	for p := range ends {
		_, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: workflows.ArchiveWorkflowID("m8-suhu-kejadian", p), TaskQueue: cfg.Temporal.TaskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		}, "Archive", workflows.ArchiveState{Topic: "m8-suhu-kejadian", Partition: p, Cursor: -1, MaxRecords: 50})
		if err != nil {
			t.Fatal(err)
		}
	}
	lk, err := lake.Open(lake.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	// Progress files, not workflow queries: they need no running worker.
	cursor := func() (sum int64) {
		for p := range ends {
			if pr, err := lk.ReadProgress(ctx, "m8-suhu-kejadian", p); err == nil {
				sum += pr.NextOffset
			}
		}
		return sum
	}
	var total int64
	for _, e := range ends {
		total += e
	}
	startChild := func() (*exec.Cmd, *strings.Builder) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(append(os.Environ(), env...), envChild+"=1", envChildArgs+"=batch\x1f--no-start")
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &out
	}
	for kill := 1; kill <= 2; kill++ {
		before := cursor()
		cmd, out := startChild()
		for cursor() <= before && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(150 * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		after := cursor()
		t.Logf("kill %d: cursor %d -> %d of %d", kill, before, after, total)
		if after >= total {
			t.Fatalf("archive finished before kill %d: steps too large to test a mid-archive kill\n%s", kill, out.String())
		}
	}
	cmd, out := startChild()
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	for cursor() < total {
		if ctx.Err() != nil {
			t.Fatalf("archive did not finish: cursor %d of %d\n%s", cursor(), total, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}

	offsets := takeCensus(t, ctx, lk, "m8-suhu-kejadian", base.Add(-time.Hour), base.Add(24*time.Hour)).offsets
	if int64(len(offsets)) != total {
		t.Fatalf("lake holds %d distinct offsets, topic has %d", len(offsets), total)
	}
	for o, c := range offsets {
		if c != 1 {
			t.Fatalf("offset %s archived %d times", o, c)
		}
	}
}
