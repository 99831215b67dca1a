package workers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.temporal.io/sdk/client"

	"reckon/activities"
	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
	"reckon/internal/testing/testlog"
	"reckon/internal/testing/verifytest"
	"reckon/streaming/progress"
	"reckon/verify/progresscheck"
	"reckon/workflows"
)

// The tests in this file are the races docs/adr/0008-batch-truth.md's
// inferred horizon left open, each on the real stream worker, kfake and
// the batch's real workflows on the Temporal dev server; the restore race
// is streaming/progress_race_test.go's. docs/adr/0015-stream-progress.md
// closes them: the batch decides from the stream's published progress.

// raceEvent is one payment-shaped event of the race tests.
type raceEvent struct {
	name   string // event_id is derived from it (a redelivery repeats the name)
	typ    string // event type; default payment.checkout.completed
	user   string
	amount float64
	at     time.Time
}

func (e raceEvent) record(topic string, partition int32) *kgo.Record {
	typ := e.typ
	if typ == "" {
		typ = "payment.checkout.completed"
	}
	v := fmt.Sprintf(`{"event_id":%q,"event_type":%q,"occurred_at":%q,"data":{"user_id":%q,"amount":%s,"currency":"IDR"}}`,
		uuid.NewSHA1(uuid.NameSpaceOID, []byte(e.name)), typ, e.at.UTC().Format(time.RFC3339Nano), e.user, strconv.FormatFloat(e.amount, 'f', -1, 64))
	return &kgo.Record{Topic: topic, Partition: partition, Key: []byte(e.user), Value: []byte(v)}
}

// raceProducer produces events to chosen partitions of topic, with record
// timestamps of now; safe for concurrent use.
type raceProducer struct {
	cl    *kgo.Client
	topic string
}

func newRaceProducer(t *testing.T, cfg *config.Config, topic string) *raceProducer {
	t.Helper()
	cl, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "test"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &raceProducer{cl, topic}
}

// produce returns the records' offsets and the last one's timestamp.
func (rp *raceProducer) produce(ctx context.Context, partition int32, evs ...raceEvent) ([]int64, time.Time, error) {
	var recs []*kgo.Record
	for _, e := range evs {
		recs = append(recs, e.record(rp.topic, partition))
	}
	res := rp.cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		return nil, time.Time{}, err
	}
	var offs []int64
	var last time.Time
	for _, r := range res {
		offs = append(offs, r.Record.Offset)
		last = r.Record.Timestamp
	}
	return offs, last, nil
}

// must is produce for the test goroutine: a failure ends the test.
func (rp *raceProducer) must(t *testing.T, ctx context.Context, partition int32, evs ...raceEvent) ([]int64, time.Time) {
	t.Helper()
	offs, ts, err := rp.produce(ctx, partition, evs...)
	if err != nil {
		t.Fatal(err)
	}
	return offs, ts
}

// raceStack is the truth stack for the race tests: the stream worker is the
// test's to run; group sessions are short so a killed worker's partitions
// move at once to its successor.
func raceStack(t *testing.T, ctx context.Context, tweak func(*config.Config)) (*truthStack, *progress.View) {
	t.Helper()
	st := newTruthStack(t, ctx, stackOptions{tweak: func(c *config.Config) {
		c.Stream.SessionTimeout = time.Second
		if tweak != nil {
			tweak(c)
		}
	}})
	view, err := newProgressView(st.cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(view.Close)
	return st, view
}

// latestProgress is the view's latest committed progress of one key.
func latestProgress(t *testing.T, ctx context.Context, v *progress.View, stream, topic string, p int32) event.StreamProgress {
	t.Helper()
	if err := v.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	pr, _ := v.Get(stream, topic, p)
	return pr
}

// startRecompute starts a stand-alone recompute of stream's [from, to)
// that checks the horizon every second for up to three minutes.
func (st *truthStack) startRecompute(t *testing.T, ctx context.Context, stream string, from, to time.Time) string {
	t.Helper()
	id := workflows.RecomputeWorkflowID(stream, from, to)
	_, err := st.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: st.cfg.Temporal.TaskQueue}, workflows.RecomputeWorkflow,
		workflows.RecomputeParams{Stream: stream, From: from, To: to, Trigger: activities.TriggerManual, HorizonWait: 3 * time.Minute, HorizonPoll: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// recomputeStatus answers the recompute's status query.
func (st *truthStack) recomputeStatus(ctx context.Context, id string) (workflows.RecomputeStatus, error) {
	var s workflows.RecomputeStatus
	v, err := st.tc.QueryWorkflow(ctx, id, "", workflows.RecomputeQueryStatus)
	if err == nil {
		err = v.Get(&s)
	}
	return s, err
}

// waitRecompute waits for the recompute's result.
func (st *truthStack) waitRecompute(t *testing.T, ctx context.Context, id string, timeout time.Duration) activities.RecomputeResult {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var res activities.RecomputeResult
	if err := st.tc.GetWorkflow(wctx, id, "").Get(wctx, &res); err != nil {
		s, _ := st.recomputeStatus(ctx, id)
		t.Fatalf("recompute %s: %v (status %s, waiting: %s)", id, err, s.Status, s.Waiting)
	}
	return res
}

// waitLakeHolds waits until the lake's archive of topic/p reaches offset
// next (every record before it archived).
func (st *truthStack) waitLakeHolds(t *testing.T, ctx context.Context, topic string, p int32, next int64) {
	t.Helper()
	waitFor(t, time.Minute, fmt.Sprintf("the lake to archive %s/%d to %d", topic, p, next), func() (bool, string) {
		pr, err := st.lk.ReadProgress(ctx, topic, p)
		return err == nil && pr.NextOffset >= next, fmt.Sprintf("archived to %d (%v)", pr.NextOffset, err)
	})
}

// checkHighest compares the highest version of each window of stream in
// [from, to) with the truth (key → count and sum).
func checkHighest(t *testing.T, panes []seenPane, stream string, from, to time.Time, truth map[string][2]float64) {
	t.Helper()
	highest := map[string]event.Pane{}
	for _, sp := range panes {
		p := sp.pane
		if p.Stream == stream && !p.WindowStart.Before(from) && p.WindowStart.Before(to) && p.Version > highest[p.Key].Version {
			highest[p.Key] = p
		}
	}
	for k, want := range truth {
		p := highest[k]
		if float64(p.Count) != want[0] || p.Sum != want[1] {
			t.Errorf("%s %s@%s: highest pane v%d (%s %s) counts %d/%g, the truth %g/%g", stream, k, from.Format(time.TimeOnly), p.Version, p.ComputedBy, p.Timing, p.Count, p.Sum, want[0], want[1])
		}
	}
	for k, p := range highest {
		if _, ok := truth[k]; !ok {
			t.Errorf("%s %s@%s: pane v%d of a window without events", stream, k, from.Format(time.TimeOnly), p.Version)
		}
	}
}

// streamChild is `reckon stream` running as a child process (the test
// binary, see TestMain), so a test can SIGKILL it mid-transaction.
type streamChild struct {
	cmd    *exec.Cmd
	out    *testlog.Buffer
	exited chan struct{}
}

// streamProcess starts a stream worker process with st's config.
func (st *truthStack) streamProcess(t *testing.T) *streamChild {
	t.Helper()
	b, err := yaml.Marshal(st.cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "reckon.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// The config file only: no RECKON_* variable of the test's environment
	// may override it.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RECKON_") || strings.HasPrefix(kv, config.EnvTestPrefix) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, envChild+"=1", envChildArgs+"=stream\x1f--config\x1f"+path)
	c := &streamChild{cmd: cmd, out: &testlog.Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c.out, c.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() {
		c.kill()
		if t.Failed() {
			t.Logf("stream process %d output:\n%s", cmd.Process.Pid, c.out.String())
		}
	})
	return c
}

// kill SIGKILLs the process and waits for it to be gone.
func (c *streamChild) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.exited
}

// commitHold is holdCommitsAfter's barrier.
type commitHold struct {
	after    int64 // the partition offset whose transaction commits last
	released chan struct{}
	once     sync.Once
}

// release drops the held EndTxn requests' connections unanswered: their
// transactions never commit (the next instance of the transactional id
// aborts them). Safe to call more than once.
func (h *commitHold) release() { h.once.Do(func() { close(h.released) }) }

// holdCommitsAfter arms a barrier on the stack's kfake cluster: the
// transaction whose offset commit passes offset n of topic/partition
// (relative to the partition's end now) commits; every EndTxn of its
// transactional id after it is held until release, then dropped
// unanswered.
func holdCommitsAfter(t *testing.T, ctx context.Context, st *truthStack, topic string, partition int32, n int64) *commitHold {
	t.Helper()
	adm, closeAdm, err := kafkaconn.NewAdmin(st.cfg.Kafka, "test")
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	// Newer requests name the topic by its id only.
	md, err := adm.ListTopics(ctx, topic)
	closeAdm()
	if err != nil || md[topic].Err != nil {
		t.Fatalf("topic %s: %v %v", topic, err, md[topic].Err)
	}
	id := md[topic].ID
	end, _ := ends.Lookup(topic, partition)
	h := &commitHold{after: end.Offset + n, released: make(chan struct{})}
	t.Cleanup(h.release)
	c := st.kafka
	var mu sync.Mutex // guards txnID and lastLet
	var txnID string  // the transactional id whose offset commit passed h.after
	lastLet := false  // its next EndTxn went through; later ones are held
	// After release the barrier is gone: a restarted stream (same
	// transactional id) commits as usual.
	gone := func() bool {
		select {
		case <-h.released:
			c.DropControl()
			return true
		default:
			return false
		}
	}
	c.ControlKey(int16(kmsg.TxnOffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if gone() {
			return nil, nil, false
		}
		r := req.(*kmsg.TxnOffsetCommitRequest)
		for _, tp := range r.Topics {
			for _, pp := range tp.Partitions {
				if (tp.Topic == topic || tp.TopicID == id) && pp.Partition == partition && pp.Offset > h.after {
					mu.Lock()
					if txnID == "" {
						txnID = r.TransactionalID
					}
					mu.Unlock()
				}
			}
		}
		return nil, nil, false
	})
	c.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if gone() {
			return nil, nil, false
		}
		r := req.(*kmsg.EndTxnRequest)
		mu.Lock()
		hold := txnID != "" && r.TransactionalID == txnID && lastLet
		if txnID != "" && r.TransactionalID == txnID {
			lastLet = true
		}
		mu.Unlock()
		if !hold {
			return nil, nil, false
		}
		// Sleep this request (other connections go on) until released,
		// then close its connection without an answer.
		c.SleepControl(func() { <-h.released })
		return nil, errors.New("held by the test's barrier"), true
	})
	return h
}

// TestHorizonWaitsWhileTheStreamIsDown: the stream is killed while a
// window it fired is still within allowed lateness, and events of that
// window (one of them a redelivery the stream will count twice) wait in
// the topic while it is down — far longer than the old inferred horizon's
// margin (end + allowed_lateness + out_of_orderness + idle_timeout + 1 s
// on the archive's ingest time, or the idle rule's last record + idle
// timeout + distance to the purge + 1 s). A recompute of the range must
// keep waiting, naming the partition and the watermark the stream left,
// and publish nothing; once the stream is back, processes the events and
// purges the window, the recompute corrects it with the next version:
// no version is published twice and the highest one is the truth.
func TestHorizonWaitsWhileTheStreamIsDown(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st, view := raceStack(t, ctx, nil)
	cfg := st.cfg
	s, _ := cfg.StreamByName("payments")
	const p = 1
	prod := newRaceProducer(t, cfg, s.Topic)

	ws := time.Now().UTC().Truncate(s.Window).Add(-2 * s.Window)
	end, purgeAt := ws.Add(s.Window), ws.Add(s.Window+s.AllowedLateness)
	at := func(d time.Duration) time.Time { return ws.Add(d) }
	a1 := raceEvent{name: "a1", user: "k1", amount: 10, at: at(time.Second)}
	stream := st.streamProcess(t)
	// The barrier: the stream commits the transaction that takes the
	// record firing W (the fourth produced below); every transaction after
	// it is held at its EndTxn and never commits. Its idle advance purges
	// W about idle timeout + allowed lateness (3 s) later: without the hold
	// a test that stalls that long before the kill saw W purged.
	hold := holdCommitsAfter(t, ctx, st, s.Topic, p, 3)
	// The window's events, then one of the next window that sets the
	// watermark to end: W fires (on-time panes) and has allowed lateness
	// (2 s) left before its purge.
	offs, sentAt := prod.must(t, ctx, p, a1,
		raceEvent{name: "a2", user: "k1", amount: 20, at: at(2 * time.Second)},
		raceEvent{name: "b1", user: "k2", amount: 5, at: at(3 * time.Second)},
		raceEvent{name: "c1", user: "k2", amount: 1, at: end.Add(s.OutOfOrderness)})
	fired := offs[len(offs)-1]
	if fired != hold.after {
		t.Fatalf("the record firing W is at offset %d, the barrier holds after %d", fired, hold.after)
	}
	waitFor(t, time.Minute, "the stream to commit the record that fires W", func() (bool, string) {
		pr := latestProgress(t, ctx, view, s.Name, s.Topic, p)
		return pr.NextOffset > fired, fmt.Sprintf("progress at %d, want past %d", pr.NextOffset, fired)
	})
	committed := time.Now()
	stream.kill()
	hold.release()
	down := latestProgress(t, ctx, view, s.Name, s.Topic, p)
	if !down.PurgedThrough.Before(end) {
		t.Fatalf("the stream's progress purged W (through %s) %v after the record that fires it was committed: the progress runs ahead of the stream, or a transaction after the barrier committed",
			down.PurgedThrough.Format(time.StampMilli), time.Since(committed).Round(time.Millisecond))
	}
	t.Logf("stream killed at watermark %s (purged through %s); W ends %s", down.Watermark.Format(time.StampMilli), down.PurgedThrough.Format(time.StampMilli), end.Format(time.TimeOnly))

	id := st.startRecompute(t, ctx, s.Name, ws, end)
	// While it is down: a late event of W within lateness, and a
	// redelivery of a1 two seconds after the original, which the stream's
	// short dedup memory (500 ms of record time) will count again. The
	// wait is the scenario's timing (the producer's retry), not a
	// synchronisation.
	<-time.After(time.Until(sentAt.Add(2 * time.Second)))
	offs, lastTS := prod.must(t, ctx, p, raceEvent{name: "a3", user: "k1", amount: 30, at: at(3500 * time.Millisecond)}, a1)
	// How long the old rule would have waited, at most, before calling W
	// final — then some more.
	oldMargin := time.Second
	oldH := end.Add(s.AllowedLateness + s.OutOfOrderness + s.IdleTimeout + oldMargin)
	oldIdle := lastTS.Add(s.IdleTimeout + purgeAt.Sub(down.Watermark) + oldMargin)
	deadline := oldH
	if oldIdle.After(deadline) {
		deadline = oldIdle
	}
	deadline = deadline.Add(3 * time.Second)
	st.waitLakeHolds(t, ctx, s.Topic, p, offs[1]+1)
	var want string
	waitFor(t, time.Minute, "the stream's downtime to outlast the old horizon", func() (bool, string) {
		// The stream publishes nothing while it is down: the latest
		// committed progress is where it stood when it died.
		pr := latestProgress(t, ctx, view, s.Name, s.Topic, p)
		if !pr.PurgedThrough.Before(end) {
			t.Fatalf("progress of a killed stream purged W: %+v", pr)
		}
		want = fmt.Sprintf("%s/%d: watermark %s < %s needed", s.Topic, p, pr.Watermark.UTC().Format(time.RFC3339), purgeAt.UTC().Format(time.RFC3339))
		for _, sp := range st.obs.snapshot() {
			if sp.pane.ComputedBy == event.ComputedByBatch {
				t.Fatalf("a correction was published while the stream was down: %+v", sp.pane)
			}
		}
		rs, err := st.recomputeStatus(ctx, id)
		if err != nil {
			return false, err.Error()
		}
		if rs.Status != workflows.StatusWaiting {
			t.Fatalf("the recompute stopped waiting while the stream was down: %+v", rs)
		}
		lp, err := st.lk.ReadProgress(ctx, s.Topic, p)
		if err != nil {
			return false, err.Error()
		}
		// Waiting, for the right reason, after the old rule's horizon has
		// passed on the wall clock and on the archive's ingest time.
		return time.Now().After(deadline) && !lp.ArchivedThrough.Before(oldH) && strings.HasPrefix(rs.Waiting, want+" (last progress "),
			fmt.Sprintf("now %s, old horizon %s; archived through %s; waiting %q, want %q",
				time.Now().Format(time.TimeOnly), deadline.Format(time.TimeOnly), lp.ArchivedThrough.Format(time.TimeOnly), rs.Waiting, want)
	})
	t.Logf("after %v down the recompute still waits: %s", time.Since(committed).Round(time.Second), want)

	restarted := time.Now()
	st.streamProcess(t)
	st.waitRecompute(t, ctx, id, time.Minute)
	waitFor(t, time.Minute, "the stream to process the events that waited", func() (bool, string) {
		pr := latestProgress(t, ctx, view, s.Name, s.Topic, p)
		return pr.NextOffset > offs[1], fmt.Sprintf("progress at %d, want past %d", pr.NextOffset, offs[1])
	})
	st.obs.catchUp(t, ctx)
	panes := st.obs.snapshot()
	corrected, streamK1 := false, event.Pane{}
	for _, sp := range panes {
		pn := sp.pane
		if pn.Key != "k1" || !pn.WindowStart.Equal(ws) {
			continue
		}
		switch {
		case pn.ComputedBy == event.ComputedByStream && pn.Version > streamK1.Version:
			streamK1 = pn
		case pn.ComputedBy == event.ComputedByBatch:
			corrected = true
			if sp.at.Before(restarted) {
				t.Errorf("correction seen before the stream came back: %+v", pn)
			}
		}
	}
	if !corrected {
		t.Errorf("no correction of k1's window %s after the stream came back", ws.Format(time.TimeOnly))
	}
	// The stream took the waiting events into W (a late pane counting the
	// redelivery too: corrected for duplicates; a restored partition does
	// not tick before it is read to its last stable offset,
	// streaming.TestStreamRestartDoesNotIdleAheadOfWaitingRecords) or,
	// had they come after its idle advance, sent them to the late topic
	// (corrected for events beyond lateness). Either way the highest
	// version is the truth.
	t.Logf("the stream's last pane of k1's window: v%d %s count %d", streamK1.Version, streamK1.Timing, streamK1.Count)
	checkHighest(t, panes, s.Name, ws, end, map[string][2]float64{"k1": {3, 60}, "k2": {1, 5}})
	verifytest.Progress(t, ctx, cfg)
}

// TestHorizonPerStreamOnASharedTopic: two streams read one raw topic, each
// with its own event type. Partition 0 carries only the first stream's
// events for a while, partition 1 only the second's. Each stream's
// progress is keyed and computed separately: on a partition without its
// events a stream has no watermark (however far the partition's offsets
// and the other stream's watermark move), its recompute waits and says
// so; its max event time follows its own events only. One event of each
// stream on the other partition lets both finish.
func TestHorizonPerStreamOnASharedTopic(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const refundType = "payment.refund.completed"
	st, view := raceStack(t, ctx, func(c *config.Config) {
		for _, s := range c.Streams {
			if s.Name == "payments" {
				r := s
				r.Name, r.EventTypes = "refunds", []string{refundType}
				c.Streams = append(c.Streams, r)
				break
			}
		}
		c.Gate.Types[refundType] = c.Gate.Types["payment.checkout.completed"]
	})
	cfg := st.cfg
	a, _ := cfg.StreamByName("payments")
	b, _ := cfg.StreamByName("refunds")
	if a.Topic != b.Topic || a.SettingsDigest() == b.SettingsDigest() {
		t.Fatalf("streams %+v and %+v", a, b)
	}
	topic := a.Topic
	prod := newRaceProducer(t, cfg, topic)
	st.runStream(t, ctx)

	ws := time.Now().UTC().Truncate(a.Window).Add(-3 * a.Window)
	end := ws.Add(a.Window)
	// Partition 1: one refund in W.
	refundOffs, _ := prod.must(t, ctx, 1, raceEvent{name: "r1", typ: refundType, user: "r1", amount: 7, at: ws.Add(2 * time.Second)})
	// Partition 0: payments only, paced, their event times moving past
	// W's purge point.
	var payOffs []int64
	tick := time.NewTicker(150 * time.Millisecond)
	for i := range 14 {
		<-tick.C // traffic pacing, not a synchronisation
		o, _ := prod.must(t, ctx, 0, raceEvent{name: fmt.Sprintf("p%d", i), user: "k" + strconv.Itoa(i%2), amount: float64(i + 1), at: ws.Add(time.Second + time.Duration(i)*750*time.Millisecond)})
		payOffs = append(payOffs, o...)
	}
	tick.Stop()
	st.waitLakeHolds(t, ctx, topic, 0, payOffs[len(payOffs)-1]+1)
	st.waitLakeHolds(t, ctx, topic, 1, refundOffs[0]+1)
	idA := st.startRecompute(t, ctx, a.Name, ws, end)
	idB := st.startRecompute(t, ctx, b.Name, ws, end)

	// Each stream has purged W where it has events, and waits where it
	// has none.
	waitFor(t, time.Minute, "each stream's recompute to wait on the partition without its events only", func() (bool, string) {
		ra, err1 := st.recomputeStatus(ctx, idA)
		rb, err2 := st.recomputeStatus(ctx, idB)
		if err1 != nil || err2 != nil {
			return false, fmt.Sprint(err1, err2)
		}
		okA := ra.Status == workflows.StatusWaiting && !strings.Contains(ra.Waiting, "\n") &&
			strings.HasPrefix(ra.Waiting, topic+"/1: no watermark yet (no payment.checkout.completed event processed;")
		okB := rb.Status == workflows.StatusWaiting && !strings.Contains(rb.Waiting, "\n") &&
			strings.HasPrefix(rb.Waiting, topic+"/0: no watermark yet (no "+refundType+" event processed;")
		if okA && okB {
			t.Logf("payments waits: %s\nrefunds waits: %s", ra.Waiting, rb.Waiting)
		}
		return okA && okB, fmt.Sprintf("payments %s %q; refunds %s %q", ra.Status, ra.Waiting, rb.Status, rb.Waiting)
	})

	c, err := progresscheck.Read(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// maxEventTime is the watermark's basis, max of min(occurred_at,
	// record timestamp) over the stream's records before next.
	maxEventTime := func(p int32, typ string, next int64) time.Time {
		var m time.Time
		for _, r := range c.Raw[topic][p] {
			e, ok := progresscheck.Decode(r)
			if !ok || r.Offset >= next || e.EventType != typ {
				continue
			}
			et := e.OccurredAt
			if r.Timestamp.Before(et) {
				et = r.Timestamp
			}
			if et.After(m) {
				m = et
			}
		}
		return m.UTC()
	}
	for _, k := range []struct {
		s      config.Stream
		p      int32
		typ    string
		others int64 // the partition's end: none of these offsets are this stream's
	}{{b, 0, refundType, payOffs[len(payOffs)-1] + 1}, {a, 1, "payment.checkout.completed", refundOffs[0] + 1}} {
		rs := c.Of(k.s.Name, topic, k.p)
		if len(rs) < 2 || rs[len(rs)-1].NextOffset != k.others {
			t.Errorf("%s on %s/%d: %d progress records, last at %v; want them to follow the partition's offsets to %d", k.s.Name, topic, k.p, len(rs), rs, k.others)
		}
		for _, r := range rs {
			if !r.Watermark.IsZero() || !r.MaxEventTime.IsZero() || !r.PurgedThrough.IsZero() || r.Settings != k.s.SettingsDigest() {
				t.Errorf("%s on %s/%d has only the other stream's events, yet published %+v", k.s.Name, topic, k.p, r)
				break
			}
		}
	}
	for _, k := range []struct {
		s   config.Stream
		p   int32
		typ string
	}{{a, 0, "payment.checkout.completed"}, {b, 1, refundType}} {
		rs := c.Of(k.s.Name, topic, k.p)
		if len(rs) == 0 {
			t.Fatalf("no progress of %s on %s/%d", k.s.Name, topic, k.p)
		}
		with := 0
		for _, r := range rs {
			if want := maxEventTime(k.p, k.typ, r.NextOffset); !r.MaxEventTime.Equal(want) || r.Settings != k.s.SettingsDigest() {
				t.Errorf("%s on %s/%d at offset %d: max event time %s, its own events' %s (settings %s)", k.s.Name, topic, k.p, r.NextOffset, r.MaxEventTime, want, r.Settings)
			}
			if !r.Watermark.IsZero() {
				with++
			}
		}
		if last := rs[len(rs)-1]; with == 0 || last.PurgedThrough.Before(end) {
			t.Errorf("%s on %s/%d: %d records with a watermark, last %+v; want W purged", k.s.Name, topic, k.p, with, last)
		}
	}
	pa, _ := view.Get(a.Name, topic, 0)
	pb, _ := view.Get(b.Name, topic, 0)
	if pa.Stream != a.Name || pb.Stream != b.Name || pa.Watermark.IsZero() || !pb.Watermark.IsZero() {
		t.Errorf("the view mixes the streams' progress of %s/0: %+v and %+v", topic, pa, pb)
	}

	// One event of each stream where it had none: both watermarks start,
	// purge W by the idle advance, and both recomputes finish.
	prod.must(t, ctx, 0, raceEvent{name: "r2", typ: refundType, user: "r2", amount: 3, at: ws.Add(3 * time.Second)})
	prod.must(t, ctx, 1, raceEvent{name: "p-late", user: "k9", amount: 4, at: ws.Add(4 * time.Second)})
	for _, id := range []string{idA, idB} {
		if res := st.waitRecompute(t, ctx, id, time.Minute); res.Report.Windows == 0 {
			t.Errorf("%s checked no window: %+v", id, res.Report)
		}
	}
	st.obs.catchUp(t, ctx)
	var wantA = map[string][2]float64{"k9": {1, 4}}
	for i := range 14 {
		if at := ws.Add(time.Second + time.Duration(i)*750*time.Millisecond); at.Before(end) {
			k := "k" + strconv.Itoa(i%2)
			w := wantA[k]
			wantA[k] = [2]float64{w[0] + 1, w[1] + float64(i+1)}
		}
	}
	panes := st.obs.snapshot()
	checkHighest(t, panes, a.Name, ws, end, wantA)
	checkHighest(t, panes, b.Name, ws, end, map[string][2]float64{"r1": {1, 7}, "r2": {1, 3}})
	verifytest.Progress(t, ctx, cfg)
}

// TestHorizonWaitsThroughATooLateTail: a partition's on-time traffic
// stops, but a tail of too-late records (event times an hour before the
// watermark) keeps arriving, faster than the idle timeout. What the
// operator does: a too-late record does not move the max event time, and
// every record, too-late or not, restarts the idle clock — so the tail
// holds the partition's watermark where the on-time traffic left it (the
// window still accepts events, and one does arrive within lateness), and
// only once the tail stops does the idle advance purge the window. The
// published purged-through point never passes a window the stream still
// accepts events for, and the batch waits, saying why, until the stream's
// progress says the window is purged.
//
// A tail that never stops keeps the window open until the recompute's
// horizon_wait: a liveness limit, not a safety one.
func TestHorizonWaitsThroughATooLateTail(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st, view := raceStack(t, ctx, nil)
	cfg := st.cfg
	s, _ := cfg.StreamByName("payments")
	const p = 2
	prod := newRaceProducer(t, cfg, s.Topic)
	st.runStream(t, ctx)

	ws := time.Now().UTC().Truncate(s.Window).Add(-3 * s.Window)
	end, purgeAt := ws.Add(s.Window), ws.Add(s.Window+s.AllowedLateness)
	onTime, _ := prod.must(t, ctx, p,
		raceEvent{name: "e1", user: "k4", amount: 10, at: ws.Add(time.Second)},
		raceEvent{name: "e2", user: "k4", amount: 20, at: ws.Add(2500 * time.Millisecond)})
	maxET := ws.Add(2500 * time.Millisecond)
	wm0 := maxET.Add(-s.OutOfOrderness)

	// The tail: too-late records, one every 150 ms, at least tailLen of
	// them (12 s, far longer than the idle advance would need to purge W:
	// idle timeout + purgeAt − wm0 = 6.5 s) and on until the recompute was
	// seen waiting (stopTail), however slowly the archive and the recompute
	// get there; one event of W within lateness amid them.
	const tailLen = 80
	var tailEnd, tailN atomic.Int64 // offset after the tail's last record, and its records, once produced
	tailDone := make(chan error, 1)
	stopTail := make(chan struct{})
	var stopOnce sync.Once
	stop := func() { stopOnce.Do(func() { close(stopTail) }) }
	defer stop()
	go func() {
		tick := time.NewTicker(150 * time.Millisecond)
		defer tick.Stop()
		var last int64
		i := 0
		for ; ; i++ {
			if i >= tailLen {
				select {
				case <-stopTail:
					tailN.Store(int64(i))
					tailEnd.Store(last + 1)
					tailDone <- nil
					return
				default:
				}
			}
			<-tick.C // traffic pacing (the scenario: faster than the idle timeout), not a synchronisation
			evs := []raceEvent{{name: fmt.Sprintf("late%d", i), user: "old", amount: 1, at: ws.Add(-time.Hour)}}
			if i == tailLen/2 {
				evs = append(evs, raceEvent{name: "e3", user: "k4", amount: 5, at: ws.Add(500 * time.Millisecond)})
			}
			offs, _, err := prod.produce(ctx, p, evs...)
			if err != nil {
				tailDone <- err
				return
			}
			last = offs[len(offs)-1]
		}
	}()

	st.waitLakeHolds(t, ctx, s.Topic, p, onTime[1]+1)
	id := st.startRecompute(t, ctx, s.Name, ws, end)
	want := fmt.Sprintf("%s/%d: watermark %s < %s needed", s.Topic, p, wm0.UTC().Format(time.RFC3339), purgeAt.UTC().Format(time.RFC3339))
	var waiting workflows.RecomputeStatus
	waitFor(t, time.Minute, "the recompute to wait, while the tail runs, on the watermark the tail holds", func() (bool, string) {
		var err error
		if waiting, err = st.recomputeStatus(ctx, id); err != nil {
			return false, err.Error()
		}
		return waiting.Status == workflows.StatusWaiting && strings.HasPrefix(waiting.Waiting, want+" (last progress "), fmt.Sprintf("%s %q, want %q", waiting.Status, waiting.Waiting, want)
	})
	stop()
	if err := <-tailDone; err != nil {
		t.Fatal(err)
	}
	t.Logf("during the tail (%d records) the recompute waited: %s", tailN.Load(), waiting.Waiting)

	res := st.waitRecompute(t, ctx, id, time.Minute)
	if res.Report.Windows != 1 {
		t.Errorf("recompute report %+v: want the one window", res.Report)
	}
	last := latestProgress(t, ctx, view, s.Name, s.Topic, p)
	if last.PurgedThrough.Before(end) {
		t.Errorf("the recompute finished, yet the stream's progress purged only through %s", last.PurgedThrough)
	}

	c := verifytest.Progress(t, ctx, cfg)
	tail := tailEnd.Load()
	during := 0
	for _, r := range c.Of(s.Name, s.Topic, p) {
		if r.NextOffset <= onTime[1] || r.NextOffset >= tail {
			continue
		}
		// Committed while tail records were still to be processed.
		during++
		if !r.MaxEventTime.Equal(maxET) || !r.PurgedThrough.Before(end) {
			t.Errorf("progress during the tail: %+v; want max event time %s held and W (ending %s) not purged", r, maxET.Format(time.StampMilli), end.Format(time.TimeOnly))
		}
	}
	if during < 10 {
		t.Errorf("only %d progress records committed during the tail", during)
	}
	late := 0
	if err := kafkaconn.ReadTopic(ctx, cfg.Kafka, "test", cfg.Topics.Late, func(r *kgo.Record) error {
		if e, ok := progresscheck.Decode(r); ok && e.Data["user_id"] == "old" {
			late++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n := tailN.Load(); int64(late) != n {
		t.Errorf("%d of the %d too-late records on the late topic", late, n)
	}
	st.obs.catchUp(t, ctx)
	checkHighest(t, st.obs.snapshot(), s.Name, ws, end, map[string][2]float64{"k4": {3, 35}})
	if !slices.ContainsFunc(st.obs.snapshot(), func(sp seenPane) bool {
		return sp.pane.Key == "k4" && sp.pane.WindowStart.Equal(ws) && sp.pane.ComputedBy == event.ComputedByStream && sp.pane.Count == 3
	}) {
		t.Errorf("the stream published no pane of W counting the event that arrived within lateness amid the tail")
	}
}
