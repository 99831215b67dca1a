package streaming

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"reckon/internal/testing/testlog"
)

// startBroker starts a kfake broker persisted in dir, on port (0: any),
// set up as testenv.Kafka's; it is closed at the test's end unless closed
// before.
func startBroker(t *testing.T, dir string, port int) *kfake.Cluster {
	t.Helper()
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1), kfake.GroupMinSessionTimeout(500 * time.Millisecond),
		kfake.DataDir(dir)}
	if port != 0 {
		opts = append(opts, kfake.Ports(port))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// holdNextEndTxn holds the next EndTxn the broker receives until the broker
// closes, then drops its connection unanswered; the channel is closed once
// it is held.
func holdNextEndTxn(t *testing.T, c *kfake.Cluster) <-chan struct{} {
	t.Helper()
	held, release := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(release) })
	c.ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.DropControl()
		close(held)
		// Sleep this request (other connections go on) until the broker
		// closes, which ends the sleep.
		c.SleepControl(func() { <-release })
		return nil, errors.New("broker gone"), true
	})
	return held
}

// TestStreamSurvivesBrokerOutage: the broker goes away while the stream
// worker processes (its transaction cannot end: before, the worker exited
// with `end transaction: context deadline exceeded`), and comes back on
// the same address from its data dir. The worker must keep running — lose
// its session, wait for the broker, restore its partitions from the
// committed state — and its outputs must be exactly those of an
// uninterrupted run: no pane version, feature, late record or dead letter
// lost or published twice.
func TestStreamSurvivesBrokerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	const n = 2000
	want := func() outputs {
		cfg, recs := newTestEnv(t, n)
		produce(t, cfg, recs)
		runInProcess(t, cfg)
		return collect(t, cfg)
	}()

	dir := t.TempDir()
	b := startBroker(t, dir, 0)
	addr := b.ListenAddrs()[0]
	_, ps, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(ps)
	if err != nil {
		t.Fatal(err)
	}
	cfg, recs := newTestEnvOn(t, []string{addr}, n)
	// A transaction the broker cannot take gives up after this long (the
	// default is 30 s): the outage below outlasts it.
	cfg.Stream.TransactionTimeout = 3 * time.Second
	half := len(recs) / 2
	produce(t, cfg, recs[:half])

	lb := &testlog.Buffer{}
	w, err := New(cfg, slog.New(slog.NewTextHandler(lb, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	running := func(when string) {
		t.Helper()
		select {
		case err := <-done:
			t.Fatalf("the stream worker ended %s: %v\n%s", when, err, lb.String())
		default:
		}
	}
	waitFor(t, time.Minute, "the worker to commit some of the first half", func() (bool, string) {
		running("before the outage")
		n := committedTotal(t, cfg)
		return n > 0, strconv.FormatInt(n, 10) + " offsets committed"
	})
	// The barrier: the broker holds the worker's next EndTxn and goes away
	// with it unanswered, so the outage meets a transaction that cannot
	// end (a session lost), whatever the machine's pace. Without it an
	// idle worker could meet the outage between transactions, as a
	// rebalance abort of its next one; that path must keep it running too.
	held := holdNextEndTxn(t, b)
	select {
	case <-held:
	case err := <-done:
		t.Fatalf("the stream worker ended before its next transaction: %v\n%s", err, lb.String())
	}
	b.Close()
	downAt := time.Now()
	waitFor(t, 2*time.Minute, "the worker to lose its session (or abort on a rebalance) and wait for the broker",
		func() (bool, string) {
			running("during the outage")
			l := lb.String()
			return strings.Contains(l, "stream transaction session lost") ||
				strings.Contains(l, "transaction aborted (rebalance)"), "no lost session or aborted transaction in the log yet"
		})
	running("during the outage")
	startBroker(t, dir, port)
	t.Logf("broker back on %s after %v", addr, time.Since(downAt).Round(time.Millisecond))
	produce(t, cfg, recs[half:])
	waitDone(t, cfg, 2*time.Minute)
	running("after the outage")
	if !strings.Contains(lb.String(), "broker answers again") {
		t.Errorf("no new session after the outage in the log:\n%s", lb.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("stream worker: %v", err)
	}

	got := collect(t, cfg)
	if len(want.final) == 0 || len(want.late) == 0 || len(want.dlq) == 0 || len(want.features) == 0 {
		t.Fatalf("uninterrupted run published too little to compare: %d windows, %d late, %d dlq, %d features",
			len(want.final), len(want.late), len(want.dlq), len(want.features))
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
	if !maps.Equal(got.features, want.features) || !maps.Equal(got.late, want.late) || !maps.Equal(got.dlq, want.dlq) {
		t.Errorf("features %d/%d, late %d/%d, dlq %d/%d differ", len(got.features), len(want.features),
			len(got.late), len(want.late), len(got.dlq), len(want.dlq))
	}
	if testing.Verbose() {
		t.Log(lb.String())
	}
	t.Logf("compared %d windows, %d features, %d late, %d dead letters with the uninterrupted run",
		len(got.final), len(got.features), len(got.late), len(got.dlq))
}
