package streaming

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
	"reckon/internal/kafkaconn"
	"reckon/internal/testing/testlog"
	"reckon/verify/generate"
)

// TestStreamScaleOut runs two stream workers in one consumer group against
// kfake (docs/adr/0010-scale-out.md): the raw partitions split between
// them and both process records; then one leaves — gracefully (its context
// ends: it finishes or aborts its transaction and leaves the group) or by
// SIGKILL of its process mid-stream — and the other takes over its
// partitions with their window and dedup state. The committed outputs equal
// a single uninterrupted worker's: no pane, feature, late record or dead
// letter lost or doubled, every window's versions rising (checkVersions).
func TestStreamScaleOut(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	want := func() outputs {
		cfg, recs := scaleOutEnv(t)
		produce(t, cfg, recs)
		runInProcess(t, cfg)
		return collect(t, cfg)
	}()
	if len(want.final) == 0 || len(want.late) == 0 || len(want.dlq) == 0 || len(want.features) == 0 {
		t.Fatalf("uninterrupted run published too little to compare: %d windows, %d late, %d dlq, %d features", len(want.final), len(want.late), len(want.dlq), len(want.features))
	}
	t.Run("graceful", func(t *testing.T) { scaleOut(t, want, false) })
	t.Run("sigkill", func(t *testing.T) { scaleOut(t, want, true) })
}

// scaleOutEnv is newTestEnv's payments traffic plus sensor readings, so
// both raw topics (3 partitions each) carry data and every member of a
// 2-worker group has work whatever the assignment. Sensors start before
// 08:00 so hourly suhu windows fire and take late events too. Records are
// in arrival order.
func scaleOutEnv(t *testing.T) (*config.Config, []*kgo.Record) {
	t.Helper()
	cfg, recs := newTestEnv(t, 2000)
	o := generate.Defaults(generate.Sensors)
	o.Seed, o.Count, o.Start, o.Rate = 7, 600, time.Date(2026, 11, 7, 7, 45, 0, 0, time.UTC), 0.5
	g, err := generate.New(o)
	if err != nil {
		t.Fatal(err)
	}
	for {
		r, ok := g.Next()
		if !ok {
			break
		}
		recs = append(recs, &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Timestamp: r.Arrival})
	}
	slices.SortStableFunc(recs, func(a, b *kgo.Record) int { return a.Timestamp.Compare(b.Timestamp) })
	return cfg, recs
}

func scaleOut(t *testing.T, want outputs, kill bool) {
	cfg, recs := scaleOutEnv(t)
	half := len(recs) / 2

	// B runs in this process and survives; A leaves. B, alone in the group
	// first, restores every partition (empty ones too: each publishes
	// progress) before A joins: a restore still running when A joined was
	// logged after the split, as if B had processed one of A's partitions.
	b := startWorker(t, withInstance(cfg, "b"))
	all := waitGroup(t, cfg, 1)[0]
	waitFor(t, 3*time.Minute, "B to restore every partition before A joins", func() (bool, string) {
		got := assigned(b.logs())
		return len(got) == len(all), fmt.Sprintf("B restored %v of %v", sortedSet(got), all)
	})
	var a interface {
		stop()
		logs() string
	}
	if kill {
		a = startChild(t, cfg, "a")
	} else {
		a = startWorker(t, withInstance(cfg, "a"))
	}
	split := waitGroup(t, cfg, 2)
	t.Logf("assignment with two members: %v", split)
	// What B restores from here on is what the split and A's leaving give
	// it.
	bFrom := len(b.logs())
	bLogs := func() string { return b.logs()[bFrom:] }

	// First half, paced: both workers process some of it.
	if err := producePaced(cfg, recs[:half], 20); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Minute, "both workers processing", func() (bool, string) {
		na, nb := len(assigned(a.logs())), len(assigned(b.logs()))
		return na > 0 && nb > 0, fmt.Sprintf("A restored %d partitions, B %d", na, nb)
	})
	aParts := assigned(a.logs())
	bBefore := assigned(bLogs())
	for p := range aParts {
		if bBefore[p] {
			t.Fatalf("partition %s processed by both workers before A left", p)
		}
	}

	// Second half arrives while A leaves, so A is likely inside a
	// transaction when it goes.
	produced := make(chan error, 1)
	go func() { produced <- producePaced(cfg, recs[half:], 20) }()
	before := committedTotal(t, cfg)
	waitFor(t, 3*time.Minute, "the workers to commit some of the second half", func() (bool, string) {
		n := committedTotal(t, cfg)
		return n > before, fmt.Sprintf("%d offsets committed", n)
	})
	if kill {
		// Aim the SIGKILL into an open transaction (records produced, not
		// yet committed): the hardest case for the survivor.
		aTxn := cfg.Kafka.ClientID + "-stream-a"
		for i := 0; i < 200 && txnState(t, cfg, aTxn) != "Ongoing"; i++ {
		}
	}
	a.stop()
	stopped := time.Now()
	t.Logf("A stopped (kill=%v) with %d offsets committed, its transaction %s; its partitions: %v",
		kill, committedTotal(t, cfg), txnState(t, cfg, cfg.Kafka.ClientID+"-stream-a"), sortedSet(aParts))
	if err := <-produced; err != nil {
		t.Fatal(err)
	}

	// B alone owns every partition and finishes the input.
	waitGroup(t, cfg, 1)
	waitDone(t, cfg, 3*time.Minute)
	taken := 0
	bAfter := assigned(bLogs())
	for p := range aParts {
		if bAfter[p] {
			taken++
		}
	}
	if taken == 0 {
		t.Errorf("B restored none of A's partitions %v (B: %v): the takeover was not exercised", sortedSet(aParts), sortedSet(bAfter))
	}
	t.Logf("B took over %d of A's %d partitions with their state; all input committed %v after A stopped", taken, len(aParts), time.Since(stopped).Round(100*time.Millisecond))

	if kill {
		// A's open transaction (if any) holds back read-committed readers
		// until the broker aborts it at the transaction timeout; a
		// restarted instance "a" would fence it at once (ADR 0006).
		waitFor(t, 3*time.Minute, "A's transaction to end", func() (bool, string) {
			st := txnState(t, cfg, cfg.Kafka.ClientID+"-stream-a")
			return st != "Ongoing" && !strings.HasPrefix(st, "Prepare"), "state " + st
		})
	}
	b.stop()

	got := collect(t, cfg)
	t.Logf("compared %d windows, %d features, %d late, %d dead letters with the uninterrupted run", len(got.final), len(got.features), len(got.late), len(got.dlq))
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
	for id, v := range want.features {
		if got.features[id] != v {
			t.Logf("feature %s: got %q want %q", id, got.features[id], v)
			break
		}
	}
	for id, v := range want.dlq {
		if got.dlq[id] != v {
			t.Logf("dlq %s: got %q want %q", id, got.dlq[id], v)
			break
		}
	}
	if !maps.Equal(got.features, want.features) || !maps.Equal(got.late, want.late) || !maps.Equal(got.dlq, want.dlq) {
		t.Errorf("features %d/%d, late %d/%d, dlq %d/%d differ", len(got.features), len(want.features), len(got.late), len(want.late), len(got.dlq), len(want.dlq))
	}
}

// withInstance is a copy of cfg for worker instance name.
func withInstance(cfg *config.Config, name string) *config.Config {
	c := *cfg
	c.Stream.Instance = name
	return &c
}

// inProcess is a worker running in the test process; stop ends its
// context: a graceful stop.
type inProcess struct {
	cancel context.CancelFunc
	done   chan error
	log    *testlog.Buffer
	once   sync.Once
	t      *testing.T
}

func startWorker(t *testing.T, cfg *config.Config) *inProcess {
	t.Helper()
	p := &inProcess{done: make(chan error, 1), log: &testlog.Buffer{}, t: t}
	w, err := New(cfg, slog.New(slog.NewTextHandler(p.log, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	var ctx context.Context
	ctx, p.cancel = context.WithCancel(context.Background())
	go func() { p.done <- w.Run(ctx) }()
	t.Cleanup(p.stop)
	return p
}

func (p *inProcess) stop() {
	p.once.Do(func() {
		p.cancel()
		if err := <-p.done; err != nil {
			p.t.Errorf("worker: %v", err)
		}
	})
}

func (p *inProcess) logs() string { return p.log.String() }

// child is a worker process (TestMain's child mode); stop SIGKILLs it.
type child struct {
	cmd  *exec.Cmd
	log  *testlog.Buffer
	once sync.Once
}

func startChild(t *testing.T, cfg *config.Config, instance string) *child {
	t.Helper()
	// The child loads its config from the environment: drop the caller's
	// RECKON_* variables (e.g. RECKON_TEST_TEMPORAL_BIN from make test),
	// which the config refuses as unknown keys.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RECKON_") {
			env = append(env, kv)
		}
	}
	env = append(env, envChild+"=1",
		"RECKON_KAFKA_BROKERS="+strings.Join(cfg.Kafka.Brokers, ","), "RECKON_STREAM_WORKER_INSTANCE="+instance,
		"RECKON_STREAM_WORKER_COMMIT_INTERVAL="+cfg.Stream.CommitInterval.String(), "RECKON_METRICS_ADDR=",
		"RECKON_STREAM_WORKER_SESSION_TIMEOUT="+cfg.Stream.SessionTimeout.String(),
		"RECKON_STREAM_WORKER_TRANSACTION_TIMEOUT="+cfg.Stream.TransactionTimeout.String(),
		"RECKON_STREAM_WORKER_CHECKPOINT_RECORDS="+strconv.FormatInt(cfg.Stream.CheckpointRecords, 10))
	c := &child{cmd: exec.Command(os.Args[0], "-test.run=^$"), log: &testlog.Buffer{}}
	c.cmd.Env = env
	c.cmd.Stderr = c.log
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stop)
	return c
}

func (c *child) stop() {
	c.once.Do(func() {
		_ = c.cmd.Process.Signal(syscall.SIGKILL)
		_ = c.cmd.Wait()
	})
}

func (c *child) logs() string { return c.log.String() }

var assignedLine = regexp.MustCompile(`msg="partition assigned" topic=(\S+) partition=(\d+)`)

// assigned lists the partitions a worker's log says it restored state for
// and processed.
func assigned(log string) map[string]bool {
	out := map[string]bool{}
	for _, m := range assignedLine.FindAllStringSubmatch(log, -1) {
		out[m[1]+"/"+m[2]] = true
	}
	return out
}

func sortedSet(s map[string]bool) []string {
	out := slices.Collect(maps.Keys(s))
	sort.Strings(out)
	return out
}

// waitGroup waits until the stream group is stable with n members, each
// assigned at least one partition, together all raw partitions, none
// twice; it returns each member's partitions.
func waitGroup(t *testing.T, cfg *config.Config, n int) [][]string {
	t.Helper()
	adm, closeAdm, err := kafkaconn.NewAdmin(cfg.Kafka, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer closeAdm()
	raw := map[string]bool{}
	for _, s := range cfg.Streams {
		raw[s.Topic] = true
	}
	ctx := context.Background()
	var split [][]string
	waitFor(t, 3*time.Minute, fmt.Sprintf("a stable group of %d", n), func() (bool, string) {
		ends, err := adm.ListEndOffsets(ctx, slices.Collect(maps.Keys(raw))...)
		if err != nil {
			return false, err.Error()
		}
		total := 0
		ends.Each(func(kadm.ListedOffset) { total++ })
		gs, err := adm.DescribeGroups(ctx, cfg.Stream.Group)
		if err != nil {
			return false, err.Error()
		}
		g := gs[cfg.Stream.Group]
		if g.State != "Stable" || len(g.Members) != n {
			return false, fmt.Sprintf("state %s, %d members", g.State, len(g.Members))
		}
		split = nil
		seen := map[string]bool{}
		for _, m := range g.Members {
			ca, ok := m.Assigned.AsConsumer()
			if !ok {
				return false, "not a consumer assignment"
			}
			var ps []string
			for _, tp := range ca.Topics {
				for _, p := range tp.Partitions {
					k := fmt.Sprintf("%s/%d", tp.Topic, p)
					if seen[k] {
						return false, k + " assigned twice"
					}
					seen[k] = true
					ps = append(ps, k)
				}
			}
			if len(ps) == 0 {
				return false, "a member without partitions"
			}
			sort.Strings(ps)
			split = append(split, ps)
		}
		return len(seen) == total, fmt.Sprintf("%d of %d partitions assigned", len(seen), total)
	})
	return split
}

func txnState(t *testing.T, cfg *config.Config, txnID string) string {
	t.Helper()
	adm, closeAdm, err := kafkaconn.NewAdmin(cfg.Kafka, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer closeAdm()
	ds, err := adm.DescribeTransactions(context.Background(), txnID)
	if err != nil {
		return "error: " + err.Error()
	}
	d, err := ds.On(txnID, nil)
	if err != nil {
		if errors.Is(err, kerr.TransactionalIDNotFound) {
			return "none"
		}
		return "error: " + err.Error()
	}
	return d.State
}

// producePaced produces recs in chunks of n, so workers see records arrive
// while they run. It does not touch a testing.T: tests run it in a
// goroutine and check its error on the test goroutine.
func producePaced(cfg *config.Config, recs []*kgo.Record, n int) error {
	for len(recs) > 0 {
		k := min(n, len(recs))
		if err := produceRecords(cfg, recs[:k]); err != nil {
			return err
		}
		recs = recs[k:]
		time.Sleep(5 * time.Millisecond) // paces the producer on purpose, not a synchronisation
	}
	return nil
}
