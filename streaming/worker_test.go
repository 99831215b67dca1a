package streaming

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
	"reckon/internal/testing/testenv"
	"reckon/internal/topics"
	"reckon/verify/generate"
)

const envChild = "STREAMING_TEST_CHILD" // not RECKON_*: the config refuses unknown RECKON_ variables

// TestMain lets the test binary run as a `reckon stream` child process, so
// the crash test can SIGKILL a real worker process mid-transaction.
func TestMain(m *testing.M) {
	// Tiny checkpoint chunks: every restore in these tests (in process and
	// in killed child processes) reassembles multi-record checkpoints.
	chunkBytes = 2 << 10
	if os.Getenv(envBrokerChild) != "" {
		runBrokerChild()
	}
	if os.Getenv(envChild) != "" {
		// STREAMING_TEST_CONFIG: a config file of the test's (streams other than the defaults).
		cfg, err := config.Load(os.Getenv("STREAMING_TEST_CONFIG"), os.Environ(), nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		deterministic(cfg)
		w, err := New(cfg, slog.New(slog.NewTextHandler(os.Stderr, nil)), nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if err := w.Run(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// outputs is everything a run published, in a comparable form.
type outputs struct {
	final    map[string]event.Pane // latest pane per window
	versions map[string][]int64    // every committed version per window, in order
	features map[string]string     // event_id -> count/sum
	late     map[string]bool       // source topic/partition/offset
	dlq      map[string]string     // source topic/partition/offset -> reason
}

// testEnv is a broker with the topic map applied and the generator's
// traffic produced, plus the config pointing at it.
// testCheckpointRecords is the checkpoint_records of the tests' workers.
const testCheckpointRecords = "150"

func newTestEnv(t testing.TB, count int64, tweak ...func(*generate.Options)) (*config.Config, []*kgo.Record) {
	t.Helper()
	var brokers []string
	if _, bench := t.(*testing.B); bench && os.Getenv(envBenchBroker) == "process" {
		brokers = brokerProcess(t)
	} else {
		_, brokers = testenv.Kafka(t, 1, "")
	}
	return newTestEnvOn(t, brokers, count, tweak...)
}

// newTestEnvOn is newTestEnv on the given brokers.
func newTestEnvOn(t testing.TB, brokers []string, count int64, tweak ...func(*generate.Options)) (*config.Config, []*kgo.Record) {
	t.Helper()
	env := []string{
		"RECKON_KAFKA_BROKERS=" + brokers[0],
		"RECKON_STREAM_WORKER_INSTANCE=test",
		"RECKON_STREAM_WORKER_COMMIT_INTERVAL=20ms",
		"RECKON_METRICS_ADDR=",
		"RECKON_STREAM_WORKER_SESSION_TIMEOUT=1s",
		// Small checkpoints: restores in these tests mix checkpoints and
		// replay logs (a few hundred records per partition).
		"RECKON_STREAM_WORKER_CHECKPOINT_RECORDS=" + testCheckpointRecords,
	}
	cfg, err := config.Load("", env, nil)
	if err != nil {
		t.Fatal(err)
	}
	deterministic(cfg)
	ctx := context.Background()
	adm, closeAdm, err := kafkaconn.NewAdmin(cfg.Kafka, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer closeAdm()
	m, err := topics.Load("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := topics.Apply(ctx, adm, m); err != nil {
		t.Fatal(err)
	}
	o := generate.Defaults(generate.Payments)
	o.Seed, o.Count, o.Start = 42, count, time.Date(2026, 11, 7, 8, 0, 0, 0, time.UTC)
	o.LateFraction, o.DuplicateFraction, o.PoisonFraction = 0.1, 0.05, 0.02
	o.Rate = 2 // events per second of event time: 3000 events span ~25 minutes, five 5-minute windows
	for _, f := range tweak {
		f(&o)
	}
	g, err := generate.New(o)
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for {
		r, ok := g.Next()
		if !ok {
			break
		}
		recs = append(recs, &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Timestamp: r.Arrival})
	}
	return cfg, recs
}

func produce(t testing.TB, cfg *config.Config, recs []*kgo.Record) {
	t.Helper()
	if err := produceRecords(cfg, recs); err != nil {
		t.Fatal(err)
	}
}

// produceInTransaction produces recs (all of one topic) in one committed
// transaction, so every partition written ends with a commit marker, and
// returns the offset after each partition's last record.
func produceInTransaction(t testing.TB, cfg *config.Config, recs []*kgo.Record) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "test"), kgo.TransactionalID("test-input"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	next := map[int32]int64{}
	for _, r := range res {
		if r.Record.Topic != recs[0].Topic {
			t.Fatalf("records of %s and %s: one topic only", recs[0].Topic, r.Record.Topic)
		}
		next[r.Record.Partition] = max(next[r.Record.Partition], r.Record.Offset+1)
	}
	return next
}

// produceRecords is produce for goroutines other than the test's.
func produceRecords(cfg *config.Config, recs []*kgo.Record) error {
	cl, err := kgo.NewClient(kafkaconn.Opts(cfg.Kafka, "test")...)
	if err != nil {
		return err
	}
	defer cl.Close()
	return cl.ProduceSync(context.Background(), recs...).FirstErr()
}

// deterministic makes outputs depend on the records only, not on the wall
// clock of each run: no processing-time panes, no idle advance.
func deterministic(cfg *config.Config) {
	for i := range cfg.Streams {
		cfg.Streams[i].EmitInterval = 0
		cfg.Streams[i].IdleTimeout = 1000 * time.Hour
	}
}

// waitDone waits until the stream group has committed every raw offset.
func waitDone(t testing.TB, cfg *config.Config, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := WaitCaughtUp(ctx, cfg); err != nil {
		t.Fatalf("stream worker did not finish: %v", err)
	}
}

// collect reads every committed output record.
func collect(t *testing.T, cfg *config.Config) outputs {
	t.Helper()
	o := outputs{final: map[string]event.Pane{}, versions: map[string][]int64{}, features: map[string]string{}, late: map[string]bool{}, dlq: map[string]string{}}
	read(t, cfg, cfg.Topics.Summaries, func(r *kgo.Record) {
		var p event.Pane
		if err := json.Unmarshal(r.Value, &p); err != nil {
			t.Fatalf("pane: %v: %s", err, r.Value)
		}
		k := p.RecordKey()
		o.versions[k] = append(o.versions[k], p.Version)
		if p.Version > o.final[k].Version {
			p.EmittedAt, p.ProcessedAt, p.Watermark = time.Time{}, time.Time{}, time.Time{}
			o.final[k] = p
		}
	})
	read(t, cfg, cfg.Topics.Features, func(r *kgo.Record) {
		var f event.Feature
		if err := json.Unmarshal(r.Value, &f); err != nil {
			t.Fatal(err)
		}
		if _, dup := o.features[f.EventID]; dup {
			t.Errorf("feature for %s published twice", f.EventID)
		}
		o.features[f.EventID] = fmt.Sprintf("%d/%g", f.Count, f.Sum)
	})
	// Sources are topic/partition/offset: the DLQ and the late topic
	// collect records from every raw topic.
	src := func(r *kgo.Record) string { _, s := sourceOf(r); return s }
	read(t, cfg, cfg.Topics.Late, func(r *kgo.Record) { o.late[src(r)] = true })
	read(t, cfg, cfg.Topics.DLQ, func(r *kgo.Record) {
		for _, h := range r.Headers {
			if h.Key == event.HeaderReason {
				o.dlq[src(r)] = string(h.Value)
			}
		}
	})
	return o
}

func read(t *testing.T, cfg *config.Config, topic string, fn func(*kgo.Record)) {
	t.Helper()
	if err := kafkaconn.ReadTopic(context.Background(), cfg.Kafka, "test", topic, func(r *kgo.Record) error { fn(r); return nil }); err != nil {
		t.Fatal(err)
	}
}

func runInProcess(t *testing.T, cfg *config.Config) {
	t.Helper()
	w, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	waitDone(t, cfg, time.Minute)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestStreamOutputsAndDeadLetters(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	run := func(latePanes string) outputs {
		cfg, recs := newTestEnv(t, 3000)
		cfg.Stream.LatePanes = latePanes
		produce(t, cfg, recs)
		runInProcess(t, cfg)
		return collect(t, cfg)
	}
	o := run(config.LatePanesPerEvent)
	if len(o.final) == 0 || len(o.features) == 0 || len(o.late) == 0 || len(o.dlq) == 0 {
		t.Fatalf("outputs missing: %d windows, %d features, %d late, %d dead letters", len(o.final), len(o.features), len(o.late), len(o.dlq))
	}
	published := 0
	for k, vs := range o.versions {
		published += len(vs)
		for i, v := range vs {
			if v != int64(i+1) {
				t.Fatalf("window %s versions %v: not 1..n", k, vs)
			}
		}
	}
	// One late pane per window per transaction: the same final panes
	// (figures and versions), published versions rising, fewer panes.
	tx := run(config.LatePanesPerTransaction)
	if !maps.Equal(tx.final, o.final) || !maps.Equal(tx.features, o.features) || !maps.Equal(tx.late, o.late) {
		t.Errorf("per_transaction: %d final panes, %d features, %d late differ from per_event's %d, %d, %d", len(tx.final), len(tx.features), len(tx.late), len(o.final), len(o.features), len(o.late))
	}
	checkVersions(t, config.LatePanesPerTransaction, tx, o)
	txPublished := 0
	for _, vs := range tx.versions {
		txPublished += len(vs)
	}
	t.Logf("panes published: %d one per late event, %d one per window per transaction", published, txPublished)
	for src, reason := range o.dlq {
		if reason == "" {
			t.Errorf("dead letter %s without reason", src)
		}
	}
	t.Logf("%d windows, %d features, %d late, %d dead letters", len(o.final), len(o.features), len(o.late), len(o.dlq))
}

// TestStreamCrashRecovery SIGKILLs a real worker process several times
// mid-run and checks that the committed outputs equal an uninterrupted
// run's: no pane, feature, late record or dead letter lost or doubled, and
// every window's versions as checkVersions wants them — in both late
// pane modes.
func TestStreamCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	for _, mode := range []string{config.LatePanesPerTransaction, config.LatePanesPerEvent} {
		t.Run(mode, func(t *testing.T) { testCrashRecovery(t, mode) })
	}
}

func testCrashRecovery(t *testing.T, latePanes string) {
	const n = 3000
	want := func() outputs {
		cfg, recs := newTestEnv(t, n)
		cfg.Stream.LatePanes = latePanes
		produce(t, cfg, recs)
		runInProcess(t, cfg)
		return collect(t, cfg)
	}()

	// The same records in four chunks: each worker process gets new work,
	// is killed with SIGKILL soon after it first committed some of it, and
	// the next one takes over from the committed state.
	cfg, recs := newTestEnv(t, n)
	cfg.Stream.LatePanes = latePanes
	env := append(os.Environ(), envChild+"=1",
		"RECKON_KAFKA_BROKERS="+cfg.Kafka.Brokers[0], "RECKON_STREAM_WORKER_INSTANCE=test",
		"RECKON_STREAM_WORKER_COMMIT_INTERVAL=20ms", "RECKON_METRICS_ADDR=", "RECKON_STREAM_WORKER_SESSION_TIMEOUT=1s",
		"RECKON_STREAM_WORKER_CHECKPOINT_RECORDS="+testCheckpointRecords, "RECKON_STREAM_WORKER_LATE_PANES="+latePanes)
	rng := rand.New(rand.NewPCG(1, 2))
	chunk := len(recs) / 4
	kills := 0
	for kills < 3 {
		// Records keep arriving while the worker runs, so the kill lands
		// mid-stream, often inside an open transaction.
		before := committedTotal(t, cfg)
		produced := make(chan error, 1)
		go func(part []*kgo.Record) { produced <- producePaced(cfg, part, 10) }(recs[kills*chunk : (kills+1)*chunk])
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		deadline := time.Now().Add(time.Minute)
		for committedTotal(t, cfg) == before && time.Now().Before(deadline) {
			select {
			case err := <-exited:
				t.Fatalf("worker process exited on its own (%v): %s", err, stderr.String())
			case <-time.After(20 * time.Millisecond):
			}
		}
		// A random delay after the first commit, on purpose: it spreads
		// the kills over the run (mid-transaction, mid-restore, between
		// iterations); nothing waits on it.
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		if err := <-produced; err != nil {
			t.Fatal(err)
		}
		kills++
		t.Logf("kill %d with %d offsets committed; child's last line: %s", kills, committedTotal(t, cfg), lastLine(stderr.String()))
		if os.Getenv("STREAMING_TEST_VERBOSE") != "" {
			t.Logf("child %d stderr:\n%s", kills, stderr.String())
		}
	}
	if p := committedTotal(t, cfg); p == 0 {
		t.Fatal("the killed workers committed nothing: the kills did not test recovery")
	} else {
		t.Logf("killed workers committed %d offsets before the last run", p)
	}
	// A last uninterrupted run finishes the work.
	produce(t, cfg, recs[3*chunk:])
	runInProcess(t, cfg)
	got := collect(t, cfg)

	if len(want.final) == 0 || len(want.late) == 0 || len(want.dlq) == 0 || len(want.features) == 0 {
		t.Fatalf("uninterrupted run published too little to compare: %d windows, %d late, %d dlq, %d features", len(want.final), len(want.late), len(want.dlq), len(want.features))
	}
	if !maps.Equal(got.final, want.final) {
		t.Errorf("final panes differ: %d windows vs %d", len(got.final), len(want.final))
		for k, p := range want.final {
			if got.final[k] != p {
				t.Errorf("  %s: got %+v want %+v", k, got.final[k], p)
				break
			}
		}
	}
	checkVersions(t, cfg.Stream.LatePanes, got, want)
	shown := 0
	for id, v := range got.features {
		if want.features[id] != v && shown < 5 {
			shown++
			t.Logf("feature %s: got %s want %s", id, v, want.features[id])
		}
	}
	if !maps.Equal(got.features, want.features) || !maps.Equal(got.late, want.late) || !maps.Equal(got.dlq, want.dlq) {
		t.Errorf("features %d/%d, late %d/%d, dlq %d/%d differ", len(got.features), len(want.features), len(got.late), len(want.late), len(got.dlq), len(want.dlq))
	}
}

// checkVersions compares the pane versions each window published in got
// with an uninterrupted run's (want; the final panes are compared apart).
// One late pane per event: exactly the same versions, 1..n. One per
// transaction: where transactions end differs between the runs, so the
// superseded versions skipped differ too; every window's versions must
// still rise strictly (none published twice) within 1..final.
func checkVersions(t *testing.T, latePanes string, got, want outputs) {
	t.Helper()
	for k, vs := range got.versions {
		if latePanes == config.LatePanesPerEvent {
			if !slices.Equal(vs, want.versions[k]) {
				t.Errorf("window %s versions %v, uninterrupted %v", k, vs, want.versions[k])
				return
			}
			continue
		}
		for i, v := range vs {
			if v < 1 || i > 0 && v <= vs[i-1] || v > want.final[k].Version {
				t.Errorf("window %s versions %v: not rising within 1..%d", k, vs, want.final[k].Version)
				return
			}
		}
	}
}

func committedTotal(t *testing.T, cfg *config.Config) int64 {
	t.Helper()
	adm, closeAdm, err := kafkaconn.NewAdmin(cfg.Kafka, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer closeAdm()
	var raw []string
	for _, s := range cfg.Streams {
		raw = append(raw, s.Topic)
	}
	committed, err := adm.FetchOffsetsForTopics(context.Background(), cfg.Stream.Group, raw...)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	committed.Each(func(o kadm.OffsetResponse) {
		if o.At > 0 {
			n += o.At
		}
	})
	return n
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestStreamIdlePartitionsTickAfterRestart: a worker restarted while its
// partitions get no new records restores them at assignment (not at their
// next record) and resumes their processing clock where the committed
// state left it, so idle watermarks keep advancing and windows still fire.
// With the input produced in a transaction every partition ends with a
// commit marker, which the worker never sees as a record: a restored
// partition holds its ticks until it is read to its last stable offset
// (catchup.go), and must not take that marker for a record still waiting.
func TestStreamIdlePartitionsTickAfterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	for _, txn := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "transactional"}[txn], func(t *testing.T) {
			testIdleTickAfterRestart(t, txn)
		})
	}
}

func testIdleTickAfterRestart(t *testing.T, transactional bool) {
	cfg, recs := newTestEnv(t, 600)
	for i := range cfg.Streams {
		cfg.Streams[i].IdleTimeout = time.Second
	}
	if transactional {
		produceInTransaction(t, cfg, recs)
	} else {
		produce(t, cfg, recs)
	}
	// The group's committed offsets stop before each partition's trailing
	// marker; WaitCaughtUp tells it from a record still waiting.
	runInProcess(t, cfg)
	s := cfg.Streams[0]
	for _, st := range cfg.Streams {
		if st.Name == "payments" {
			s = st
		}
	}
	_, _, _, before, err := CommittedStats(context.Background(), cfg, s)
	if err != nil || before.IsZero() {
		t.Fatalf("watermark after the first run: %v %v", before, err)
	}

	// No new input: the second worker must still tick every partition.
	w, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var after time.Time
	waitFor(t, time.Minute, "the lowest committed watermark to advance while idle", func() (bool, string) {
		select {
		case err := <-done:
			t.Fatalf("worker stopped: %v", err)
		default:
		}
		_, _, _, wm, err := CommittedStats(context.Background(), cfg, s)
		if err != nil {
			return false, err.Error()
		}
		after = wm
		return after.After(before), fmt.Sprintf("lowest watermark %v after an idle restart, %v before: idle partitions did not tick", after, before)
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("lowest watermark advanced %v while idle after the restart", after.Sub(before))
}
