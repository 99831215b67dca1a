package streaming

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
	"reckon/internal/testing/testenv"
	"reckon/internal/testing/testlog"
	"reckon/internal/testing/verifytest"
	"reckon/internal/topics"
	"reckon/streaming/operator"
	"reckon/streaming/progress"
	"reckon/verify/progresscheck"
)

// raceConfig starts a broker with reckon's topics and returns the config
// of the progress race tests: every stream with the truth end-to-end
// test's second-scale settings (5 s windows, 2 s allowed lateness, 1 s
// out-of-orderness and idle timeout, no early panes, no rolling features),
// transactions every 50 ms, and sets applied as --set overrides.
func raceConfig(t *testing.T, sets ...string) *config.Config {
	t.Helper()
	_, brokers := testenv.Kafka(t, 1, "")
	cfg, err := config.Load("", nil, append([]string{
		"kafka.brokers=" + brokers[0], "metrics.addr=", "stream_worker.instance=race",
		"stream_worker.commit_interval=50ms", "stream_worker.session_timeout=1s",
	}, sets...))
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Streams {
		s := &cfg.Streams[i]
		s.Window, s.AllowedLateness, s.OutOfOrderness, s.IdleTimeout, s.EmitInterval, s.Rolling = 5*time.Second, 2*time.Second, time.Second, time.Second, 0, 0
	}
	adm, closeAdm, err := kafkaconn.NewAdmin(cfg.Kafka, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer closeAdm()
	m, err := topics.Load("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := topics.Apply(context.Background(), adm, m); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// raceWorker is a stream worker running in process.
type raceWorker struct {
	cancel context.CancelFunc
	done   chan error
	log    *testlog.Buffer
}

// startRaceWorker runs a new stream worker (a new instance of the same
// transactional id and group) until stop or the test's end.
func startRaceWorker(t *testing.T, cfg *config.Config) *raceWorker {
	t.Helper()
	lb := &testlog.Buffer{}
	w, err := New(cfg, slog.New(slog.NewTextHandler(lb, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rw := &raceWorker{cancel: cancel, done: make(chan error, 1), log: lb}
	go func() { rw.done <- w.Run(ctx) }()
	t.Cleanup(func() { rw.stop(t) })
	return rw
}

// stop ends the worker's run (it commits its open transaction first).
func (rw *raceWorker) stop(t *testing.T) {
	t.Helper()
	if rw.cancel == nil {
		return
	}
	rw.cancel()
	rw.cancel = nil
	if err := <-rw.done; err != nil {
		t.Errorf("stream worker: %v", err)
	}
}

// produceTo produces payments to one raw partition (record timestamps:
// now) and returns their offsets.
func produceTo(t *testing.T, cfg *config.Config, partition int32, evs ...payment) []int64 {
	t.Helper()
	cl, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "test"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for _, e := range evs {
		recs = append(recs, &kgo.Record{Topic: e.topic, Partition: partition, Key: []byte(e.user), Value: paymentJSON(e.id, e.user, e.amount, e.at)})
	}
	res := cl.ProduceSync(context.Background(), recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for _, r := range res {
		offs = append(offs, r.Record.Offset)
	}
	return offs
}

// payment is one payment.checkout.completed event.
type payment struct {
	topic  string
	id     uint64
	user   string
	amount float64
	at     time.Time
}

// TestProgressRestoreFromCheckpointOlderThanIdlePurge is the second race
// of docs/adr/0008-batch-truth.md's old horizon (closed by
// docs/adr/0015-stream-progress.md): the stream purges a window by the
// idle advance after its last checkpoint, then restarts. The restore must
// replay the committed ticks (docs/adr/0012-stream-state-replay-log.md) to
// the committed watermark before it processes anything: the progress it
// republishes never goes back, and an event of the purged window that
// waited in the topic during the restart goes to the late topic, not into
// a new pane the batch may already have corrected.
func TestProgressRestoreFromCheckpointOlderThanIdlePurge(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	// A checkpoint with the fourth record; none after it: the idle purge
	// that follows lives in the replay log's ticks only.
	cfg := raceConfig(t, "stream_worker.checkpoint_records=4", "stream_worker.checkpoint_interval=1h")
	st, _ := cfg.StreamByName("payments")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	latest := latestProgress(t, ctx, cfg, st, 0)

	// Window W, a few windows back: event times set the watermark, record
	// timestamps (now) only bound it.
	ws := time.Now().UTC().Truncate(st.Window).Add(-3 * st.Window)
	end := ws.Add(st.Window)
	pay := func(id uint64, user string, amount float64, at time.Duration) payment {
		return payment{st.Topic, id, user, amount, ws.Add(at)}
	}
	offs := produceTo(t, cfg, 0, pay(1, "u1", 10, time.Second), pay(2, "u1", 20, 2*time.Second), pay(3, "u2", 30, 3*time.Second), pay(4, "u2", 40, 4*time.Second))
	w1 := startRaceWorker(t, cfg)
	// Watermark ws+3s after the records; the idle advance fires W and then
	// purges it (watermark ≥ end + allowed lateness) with ticks alone.
	waitFor(t, 2*time.Minute, "the idle advance to purge W", func() (bool, string) {
		p := latest()
		return p.NextOffset > offs[3] && !p.PurgedThrough.Before(end.Add(time.Second)),
			fmt.Sprintf("progress %+v, want purged through %s", p, end.Add(time.Second))
	})
	w1.stop(t)
	before := latest()

	// The restore's input: the checkpoint predates the purge; the replay
	// log after it carries the ticks that purged.
	snaps, err := loadState(ctx, cfg, map[string]bool{stateKey(st.Name, st.Topic, 0): true, logKey(st.Topic, 0): true})
	if err != nil {
		t.Fatal(err)
	}
	ckpt, ok, err := checkpointOf(snaps, stateKey(st.Name, st.Topic, 0))
	if err != nil || !ok {
		t.Fatalf("no checkpoint of %s/0 (%v): checkpoint_records=4 should have written one", st.Topic, err)
	}
	op, err := operator.New(operatorOptions(st, cfg.Stream))
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Restore(ckpt.state); err != nil {
		t.Fatal(err)
	}
	if cp := op.Progress(); !cp.PurgedThrough.Before(end) {
		t.Fatalf("the checkpoint (epoch %d at offset %d) already purged W (purged through %s): the test does not restore from before the purge", ckpt.epoch, ckpt.next, cp.PurgedThrough)
	}
	lg, ok := snaps[logKey(st.Topic, 0)]
	if !ok {
		t.Fatal("no replay log after the checkpoint")
	}
	l, err := decodeLog(lg.state)
	if err != nil {
		t.Fatal(err)
	}
	ticks := 0
	for _, e := range l.entries {
		if e.tick != 0 {
			ticks++
		}
	}
	if l.epoch != ckpt.epoch || ticks == 0 {
		t.Fatalf("replay log epoch %d (checkpoint %d) with %d ticks in %d entries: the purge is not in the log", l.epoch, ckpt.epoch, ticks, len(l.entries))
	}
	t.Logf("checkpoint epoch %d at offset %d, watermark %s; replay log: %d entries, %d ticks; committed progress: watermark %s, purged through %s",
		ckpt.epoch, ckpt.next, op.Progress().Watermark.Format(time.TimeOnly), len(l.entries), ticks, before.Watermark.Format(time.StampMilli), before.PurgedThrough.Format(time.StampMilli))
	panesBefore, err := progresscheck.Read(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}

	// An event of the purged window waits in the topic when the new
	// instance starts: a restore short of the committed watermark would
	// take it into the window.
	late := produceTo(t, cfg, 0, pay(5, "u1", 25, 2500*time.Millisecond))[0]
	w2 := startRaceWorker(t, cfg)
	waitFor(t, 2*time.Minute, "the restarted worker to process the late event", func() (bool, string) {
		p := latest()
		return p.NextOffset > late, fmt.Sprintf("progress at %d, late event at %d", p.NextOffset, late)
	})
	w2.stop(t)
	// Partition 0's restore (the other partitions hold no record, so
	// nothing to replay).
	restored := regexp.MustCompile(`topic=` + st.Topic + ` partition=0 .*replayed_transactions=(\d+)`).FindStringSubmatch(w2.log.String())
	if restored == nil || restored[1] == "0" {
		t.Errorf("the restarted worker did not replay the log:\n%s", w2.log.String())
	}

	src := fmt.Sprintf("%s/0/%d", st.Topic, late)
	found := false
	if err := kafkaconn.ReadTopic(ctx, cfg.Kafka, "test", cfg.Topics.Late, func(r *kgo.Record) error {
		_, s := sourceOf(r)
		found = found || s == src
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Errorf("the event of purged window %s (%s) is not on the late topic", ws.Format(time.TimeOnly), src)
	}
	c := verifytest.Progress(t, ctx, cfg)
	var newPanes []string
	for _, p := range c.Panes[len(panesBefore.Panes):] {
		if p.WindowStart.Equal(ws) {
			newPanes = append(newPanes, fmt.Sprintf("%s v%d %s count %d", p.Key, p.Version, p.Timing, p.Count))
		}
	}
	if len(newPanes) > 0 {
		t.Errorf("after the restart the stream published panes of purged window %s: %v", ws.Format(time.TimeOnly), newPanes)
	}
	rs := c.Of(st.Name, st.Topic, 0)
	if i := slices.IndexFunc(rs, func(p event.StreamProgress) bool { return p.NextOffset > late }); i < 0 {
		t.Errorf("no progress past the late event at %d: %+v", late, rs)
	} else if rs[i].PurgedThrough.Before(before.PurgedThrough) {
		t.Errorf("progress after the restart %+v; before it, purged through %s", rs[i], before.PurgedThrough)
	}
}

// TestStreamRestartDoesNotIdleAheadOfWaitingRecords: a worker stops right
// after a window fired, still within its allowed lateness, and an event of
// the window arrives a moment later. An uninterrupted worker takes it into
// the window (a late pane). A restarted worker resumes the partition's
// processing clock where the committed state left it — downtime does not
// count as idle time (docs/adr/0012-stream-state-replay-log.md) — so it
// must take the event into the window as well, not idle-advance past the
// window's purge while the event still waits in the topic.
//
// The partition is restored (and its clock resumed) at assignment, while
// the consumer's first fetch of it may wait behind a long poll of other
// partitions (kgo's FetchMaxWait, 5 s); with an idle timeout of seconds a
// tick in between would purge the window first and send the event to the
// late topic. A restored partition holds its ticks until it is read to its
// last stable offset as of the assignment (catchup.go).
func TestStreamRestartDoesNotIdleAheadOfWaitingRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	cfg := raceConfig(t)
	st, _ := cfg.StreamByName("payments")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	latest := latestProgress(t, ctx, cfg, st, 0)
	ws := time.Now().UTC().Truncate(st.Window).Add(-3 * st.Window)
	end := ws.Add(st.Window)
	pay := func(id uint64, user string, amount float64, at time.Time) payment {
		return payment{st.Topic, id, user, amount, at}
	}
	// Watermark end: W fires, and has allowed lateness (2 s of watermark,
	// 1 s idle timeout + 2 s of processing time) left before its purge.
	offs := produceTo(t, cfg, 0, pay(1, "u1", 10, ws.Add(time.Second)), pay(2, "u1", 20, ws.Add(2*time.Second)), pay(3, "u2", 1, end.Add(st.OutOfOrderness)))
	w1 := startRaceWorker(t, cfg)
	waitFor(t, 2*time.Minute, "W to fire", func() (bool, string) {
		p := latest()
		return p.NextOffset > offs[2], fmt.Sprintf("progress %+v", p)
	})
	w1.stop(t)
	if p := latest(); !p.PurgedThrough.Before(end) {
		t.Fatalf("W purged before the stop: %+v", p)
	}
	late := produceTo(t, cfg, 0, pay(4, "u1", 30, ws.Add(3*time.Second)))[0]
	startRaceWorker(t, cfg)
	waitFor(t, 2*time.Minute, "the restarted worker to process the event", func() (bool, string) {
		p := latest()
		return p.NextOffset > late, fmt.Sprintf("progress %+v", p)
	})
	c := verifytest.Progress(t, ctx, cfg)
	var rs []string
	for _, r := range c.Of(st.Name, st.Topic, 0) {
		rs = append(rs, fmt.Sprintf("next %d wm %s proc %s", r.NextOffset, r.Watermark.Format(time.StampMilli), r.ProcessingTime.Format(time.StampMilli)))
	}
	if !slices.ContainsFunc(c.Panes, func(p event.Pane) bool { return p.Key == "u1" && p.WindowStart.Equal(ws) && p.Count == 3 }) {
		t.Errorf("the event that waited within W's lateness is in no pane of W; progress:\n%s", strings.Join(rs, "\n"))
	}
}

// latestProgress follows cfg's progress topic (closed at the test's end)
// and returns a func giving stream st's latest committed progress on
// partition p, read up to the topic's last stable offset.
func latestProgress(t *testing.T, ctx context.Context, cfg *config.Config, st config.Stream, p int32) func() event.StreamProgress {
	t.Helper()
	kopts, err := kafkaconn.Options(cfg.Kafka, "stream-progress")
	if err != nil {
		t.Fatal(err)
	}
	view, err := progress.NewView(progress.Options{Topic: cfg.Topics.StreamProgress, Kafka: kopts}, slog.New(slog.NewTextHandler(&testlog.Buffer{}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(view.Close)
	return func() event.StreamProgress {
		if err := view.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		pr, _ := view.Get(st.Name, st.Topic, p)
		return pr
	}
}
