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
	"reckon/internal/testing/testlog"
	"reckon/lake"
	"reckon/workflows"
)

// TestArchiveSurvivesSIGKILL runs `reckon batch` as real processes and
// SIGKILLs them while an ArchiveRange activity is in flight, proven before
// each kill and checked after it:
//
//   - after the write: a test-only barrier (envArchiveBarrier) stops a step
//     once it has written its lake files and progress, and the process
//     dies before Temporal hears that the step completed — the retry must
//     rewrite the same range without doubling a row;
//   - inside the read: the broker holds the activity's fetch, and the
//     process dies in it.
//
// Each interrupted step stays pending on the server, is retried by the
// next process after its heartbeat timeout, and in the end every offset is
// in the lake exactly once.
func TestArchiveSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	tc, hostport := testenv.Temporal(t)
	kc, brokers := testenv.Kafka(t, 2, "", "m8-suhu-kejadian")
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
	var ids []string
	for p := range ends {
		id := workflows.ArchiveWorkflowID("m8-suhu-kejadian", p)
		ids = append(ids, id)
		_, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: id, TaskQueue: cfg.Temporal.TaskQueue,
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
	progress := func() map[int32]int64 {
		out := map[int32]int64{}
		for p := range ends {
			if pr, err := lk.ReadProgress(ctx, "m8-suhu-kejadian", p); err == nil {
				out[p] = pr.NextOffset
			}
		}
		return out
	}
	cursor := func() (sum int64) {
		for _, o := range progress() {
			sum += o
		}
		return sum
	}
	var total int64
	for _, e := range ends {
		total += e
	}
	type child struct {
		cmd    *exec.Cmd
		out    *testlog.Buffer
		prefix string // its worker identity's start: "<pid>@"
	}
	startChild := func(extraEnv ...string) child {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(append(os.Environ(), env...), envChild+"=1", envChildArgs+"=batch\x1f--no-start")
		cmd.Env = append(cmd.Env, extraEnv...)
		out := &testlog.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return child{cmd, out, fmt.Sprintf("%d@", cmd.Process.Pid)}
	}
	var interrupted []archiveStep
	// kill SIGKILLs c and checks that step, in flight before, never
	// completed: the server still holds it as pending.
	kill := func(c child, step archiveStep, how string) {
		t.Helper()
		_ = c.cmd.Process.Signal(syscall.SIGKILL)
		_ = c.cmd.Wait()
		ok, err := stillPending(ctx, tc, step)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Fatalf("kill %s: %s completed before the kill landed\n%s", how, step, c.out.String())
		}
		interrupted = append(interrupted, step)
		t.Logf("killed %s: %s was in flight and stays pending; cursor %d of %d", how, step, cursor(), total)
	}

	// Kill 1, after the write. The first process runs with the archive
	// barrier: a step that has written its files and progress announces
	// itself on stdout and blocks, so its completion never reaches the
	// server, however slow the machine.
	c := startChild(envArchiveBarrier + "=1")
	var topic string
	var part int32
	var from, next int64
	waitFor(t, 2*time.Minute, "an archive step to reach the barrier", func() (bool, string) {
		out := c.out.String()
		i := strings.Index(out, "archive-barrier: ")
		if i < 0 {
			return false, "no step at the barrier\n" + out
		}
		_, err := fmt.Sscanf(out[i:], archiveBarrierLine, &topic, &part, &from, &next)
		return err == nil, fmt.Sprintf("barrier line unreadable (%v)\n%s", err, out)
	})
	if got := progress()[part]; got < next {
		t.Fatalf("step [%d, %d) of partition %d at the barrier, but its progress is %d", from, next, part, got)
	}
	inFlight, err := startedBy(ctx, tc, c.prefix, workflows.ArchiveWorkflowID(topic, part))
	if err != nil || len(inFlight) != 1 {
		t.Fatalf("step [%d, %d) of partition %d at the barrier, but the server lists %v as started by %s (%v)",
			from, next, part, inFlight, c.prefix, err)
	}
	t.Logf("evidence: partition %d's progress is at %d, written by [%d, %d), and the server holds %s",
		part, progress()[part], from, next, inFlight[0])
	kill(c, inFlight[0], "after the write")

	// Kill 2, inside the read: the broker holds the next fetch of the raw
	// topic, which only an archive activity of the new process makes.
	hold := holdNextFetch(t, ctx, kc, cfg, "m8-suhu-kejadian")
	c = startChild()
	f := hold.wait(t, time.Minute)
	id := workflows.ArchiveWorkflowID("m8-suhu-kejadian", f.partition)
	inFlight, err = startedBy(ctx, tc, c.prefix, id)
	if err != nil || len(inFlight) != 1 {
		t.Fatalf("fetch of partition %d from offset %d held, but the server lists %v as started by %s (%v)", f.partition, f.offset, inFlight, c.prefix, err)
	}
	t.Logf("evidence: the broker holds the fetch of partition %d from offset %d; the server holds %s", f.partition, f.offset, inFlight[0])
	kill(c, inFlight[0], "inside the read")
	hold.release()

	c = startChild()
	defer func() { _ = c.cmd.Process.Kill(); _ = c.cmd.Wait() }()
	waitFor(t, 2*time.Minute, "the last process to finish the archive", func() (bool, string) {
		return cursor() >= total, fmt.Sprintf("cursor %d of %d\n%s", cursor(), total, c.out.String())
	})
	// Each interrupted step ran again, in a later attempt.
	for _, s := range interrupted {
		a, err := retriedAttempt(ctx, tc, s)
		if err != nil {
			t.Fatal(err)
		}
		if a <= s.attempt {
			t.Errorf("%s: last ran in attempt %d, want a retry", s, a)
		}
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
