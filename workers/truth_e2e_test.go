package workers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	workflowservice "go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"reckon/activities"
	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
	"reckon/internal/testing/testenv"
	"reckon/internal/topics"
	"reckon/lake"
	"reckon/streaming"
	"reckon/verify/generate"
	"reckon/workflows"
)

var (
	e2e         = flag.Bool("e2e", false, "run the batch-truth end-to-end test (make e2e)")
	recordTruth = flag.Bool("record-truth", false, "with -e2e: record workflow histories into ../workflows/testdata for the replay tests")
	uiCheck     = flag.String("ui", "", "with -e2e (TestTruthEndToEnd) or alone (TestZReportEndToEnd): run the Temporal UI and check it with headless chromium, writing screenshots into this directory")
)

// TestTruthEndToEnd is the batch truth's acceptance test
// (docs/requirements.md R-TRUTH-11), on the real Temporal dev server
// and a kfake broker with the stream worker in process: live generator
// traffic with events beyond allowed lateness; the stream publishes panes;
// too-late events trigger targeted corrections (time-to-truth measured);
// the reconciliation runs; then for every (key, window) the highest-version
// pane equals the truth from the generator's manifest — for the payments
// stream and for payments_hop, a hopping stream on the same records (5 s
// windows every second, docs/adr/0041), whose too-late events correct
// every window covering them. A 3-day replay shows progress and publishes
// nothing new on a second run.
//
//	make e2e   (go test ./workers -run TestTruthEndToEnd -v -args -e2e)
func TestTruthEndToEnd(t *testing.T) {
	if !*e2e {
		t.Skip("run with -e2e (make e2e)")
	}
	began := time.Now()
	phase := began
	lap := func(name string) {
		t.Logf("phase %-28s %6.1fs", name, time.Since(phase).Seconds())
		phase = time.Now()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	st := newTruthStack(t, ctx, stackOptions{withUI: *uiCheck != "", tweak: addHoppingStream})
	st.runStream(t, ctx)
	cfg, sets, tc, lk, obs := st.cfg, st.sets, st.tc, st.lk, st.obs
	if err := startTruth(ctx, cfg, tc, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil { // idempotent
		t.Fatal(err)
	}
	lap("setup")

	// Live traffic: payments, paced by the wall clock, with too-late events.
	tr := st.liveTraffic(t, ctx, 5, 1200, 60)
	man := tr.man
	lap("traffic")
	t.Logf("generated %d records: %v; %d windows in the truth", man.Counts.Records, man.Counts.ByCategory, len(man.Truth))
	checkOnTimePanes(t, ctx, cfg)

	// Targeted corrections: the events the stream sent to the late topic
	// must each be covered by a batch pane counting it; time-to-truth is
	// from the generator releasing the event to the observer seeing that
	// pane committed.
	tooLate, lates := st.tooLate(t, ctx, tr)
	t.Logf("the stream sent %d records to %s: %d new events (generator intended %d beyond lateness), the rest redeliveries", lates, cfg.Topics.Late, len(tooLate), man.Counts.ByCategory[generate.BeyondLateness])
	ttt := st.timeToTruth(tooLate, 2*time.Minute) // a bound, not a goal: two streams correct at once on a loaded machine
	lap("targeted corrections")
	if len(tooLate) == 0 || len(ttt) < len(tooLate) {
		t.Errorf("targeted corrections covered %d of %d too-late events", len(ttt), len(tooLate))
	}
	tttLine := fmt.Sprintf("time-to-truth for too-late events (targeted correction, debounce %v): n=%d p50=%v p99=%v max=%v",
		cfg.Batch.CorrectDebounce, len(ttt), percentile(ttt, 0.50).Round(10*time.Millisecond), percentile(ttt, 0.99).Round(10*time.Millisecond), percentile(ttt, 1).Round(10*time.Millisecond))
	t.Log(tttLine)

	// The daily reconciliation, for every date the traffic touched.
	var dates []string
	for _, w := range man.Truth {
		if d := w.WindowStart[:10]; !slices.Contains(dates, d) {
			dates = append(dates, d)
		}
	}
	reckon := func(args ...string) (string, int) {
		t.Helper()
		var out, errOut bytes.Buffer
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		code := Main(ctx, args, nil, &out, &errOut, nil)
		if code != 0 {
			t.Errorf("reckon %s: exit %d: %s\n%s", strings.Join(args[:2], " "), code, errOut.String(), out.String())
		}
		return out.String(), code
	}
	// Traffic stays on while the batch works, as in production: clean
	// payments on keys of their own (bg-…), so the manifest's windows keep
	// their truth while the stream's offsets and watermarks move on.
	stopBackground := st.backgroundTraffic(t, ctx, 40)
	// Today is still in progress: a reconciliation vouches for the windows
	// the stream has purged (docs/adr/0015). The background traffic moves
	// the watermark on; once it has purged the manifest's last window, the
	// reconciliation of today checks every window of the traffic.
	var lastEnd, lastHopEnd time.Time
	for _, w := range man.Truth {
		last := &lastEnd
		if w.Stream == hopStream {
			last = &lastHopEnd
		}
		if we, err := time.Parse(time.RFC3339Nano, w.WindowEnd); err == nil && we.After(*last) {
			*last = we
		}
	}
	st.waitPurgedThrough(t, ctx, "payments", lastEnd)
	// A so-far reconciliation of a hopping stream checks the windows up
	// to a window boundary whose windows have all ended: one window more.
	st.waitPurgedThrough(t, ctx, hopStream, lastHopEnd.Add(5*time.Second))
	lap("stream purged the traffic's windows")
	var total activities.TruthReport
	for _, d := range dates {
		out, _ := reckon("reconcile", "--date", d, "--wait", "--set", "batch.horizon_wait=3m")
		t.Logf("reckon reconcile --date %s --wait\n%s", d, out)
		b, err := lk.ReadReport(ctx, "reconcile", d)
		var rep activities.Report
		if err == nil {
			err = json.Unmarshal(b, &rep)
		}
		if err != nil {
			t.Fatalf("report of %s not in the lake: %v", d, err)
		}
		total.Add(rep.Total)
		for _, part := range rep.Parts {
			if part.Stream == "payments" && d == lastEnd.Format(time.DateOnly) && part.To.Before(lastEnd) {
				t.Errorf("the reconciliation of %s checked payments up to %s, short of the traffic's last window end %s",
					d, part.To.Format(time.TimeOnly), lastEnd.Format(time.TimeOnly))
			}
		}
	}
	lap("reconcile")
	if total.Corrected == 0 || total.Reasons.Duplicates == 0 {
		t.Errorf("the reconciliation corrected %d windows (%d for duplicates); the stream's short dedup memory should have left some", total.Corrected, total.Reasons.Duplicates)
	}

	// For every (key, window): the highest version equals the manifest truth.
	obs.catchUp(t, ctx)
	highest := map[string]event.Pane{}
	versions := map[string]map[int64]string{}
	passed, failed := 0, 0
	perStream := map[string]int{}
	for _, p := range obs.snapshot() {
		k := p.pane.Stream + "|" + p.pane.Key + "|" + p.pane.WindowStart.UTC().Format(time.RFC3339)
		if !foreground(p.pane.Key) {
			continue
		}
		if versions[k] == nil {
			versions[k] = map[int64]string{}
		}
		// The version rule: stream and batch never publish the same version.
		if by, dup := versions[k][p.pane.Version]; dup {
			failed++
			t.Errorf("%s: version %d published twice (%s, then %s %s)", k, p.pane.Version, by, p.pane.ComputedBy, p.pane.Timing)
		}
		versions[k][p.pane.Version] = p.pane.ComputedBy + " " + string(p.pane.Timing)
		if p.pane.Version > highest[k].Version {
			highest[k] = p.pane
		}
	}
	truthKeys := map[string]bool{}
	for _, w := range man.Truth {
		ws, err := time.Parse(time.RFC3339Nano, w.WindowStart)
		if err != nil {
			t.Fatal(err)
		}
		k := w.Stream + "|" + w.Key + "|" + ws.UTC().Format(time.RFC3339)
		truthKeys[k] = true
		p, ok := highest[k]
		if ok && p.Count == w.Count && p.Sum == w.Sum && p.Min == w.Min && p.Max == w.Max {
			passed++
			perStream[w.Stream]++
			continue
		}
		failed++
		if failed <= 10 {
			t.Errorf("%s: highest pane v%d %d/%g (%s %s), truth %d/%g", k, p.Version, p.Count, p.Sum, p.ComputedBy, p.Timing, w.Count, w.Sum)
		}
	}
	for k, p := range highest {
		if !truthKeys[k] && p.Count != 0 {
			failed++
			t.Errorf("%s: pane v%d counts %d events the truth does not have", k, p.Version, p.Count)
		}
	}
	result := fmt.Sprintf("e2e: %d passed (%s %d, %s %d), %d failed", passed, "payments", perStream["payments"], hopStream, perStream[hopStream], failed)
	t.Log(result)
	if perStream[hopStream] == 0 {
		t.Errorf("no window of %s checked", hopStream)
	}
	lap("check")
	checkCuratedAgrees(t, ctx, lk, obs, "payments", foreground)
	checkCuratedAgrees(t, ctx, lk, obs, hopStream, foreground)
	lap("curated tables")

	// Replay three days twice: progress shown; the second run publishes nothing.
	day := dates[len(dates)-1]
	d, _ := time.Parse(time.DateOnly, day)
	from := d.AddDate(0, 0, -2).Format(time.DateOnly)
	cli := func() (string, activities.Report, int) {
		out, code := reckon("replay", "--from", from, "--to", day, "--progress-interval", "100ms", "--json")
		var rep activities.Report
		if i := strings.Index(out, "\n{"); i >= 0 {
			if err := json.Unmarshal([]byte(out[i+1:]), &rep); err != nil {
				t.Errorf("replay report: %v", err)
			}
		}
		return out, rep, code
	}
	before := obs.batchCount(t, ctx)
	out1, rep1, _ := cli()
	mid := obs.batchCount(t, ctx)
	out2, rep2, _ := cli()
	after := obs.batchCount(t, ctx)
	sentBackground := stopBackground()
	lap("replay x2")
	t.Logf("background traffic during reconcile and replay: %d events", sentBackground)
	if n := 3 * len(cfg.Streams); !strings.Contains(out1, "(stream, day)s") || len(rep1.Parts) != n || len(rep2.Parts) != n {
		t.Errorf("replay: parts %d/%d, output:\n%s", len(rep1.Parts), len(rep2.Parts), out1)
	}
	if rep2.Total.Corrected != 0 || after != mid {
		t.Errorf("second replay corrected %d, published %d records", rep2.Total.Corrected, after-mid)
	}
	t.Logf("replay %s..%s: first run corrected %d (published %d records), second corrected %d (published %d)\n%s",
		from, day, rep1.Total.Corrected, mid-before, rep2.Total.Corrected, after-mid, strings.TrimSpace(out2))

	// The schedule: apply is idempotent (startTruth created it); a trigger
	// runs the reconciliation of the day before its nominal time.
	if out, _ := reckon("schedule", "apply"); !strings.Contains(out, "updated") {
		t.Errorf("schedule apply: %s", out)
	}
	if out, _ := reckon("schedule", "describe"); !strings.Contains(out, "next") || !strings.Contains(out, "BufferAll") {
		t.Errorf("schedule describe: %s", out)
	}
	reckon("schedule", "trigger")
	sched := tc.ScheduleClient().GetHandle(ctx, cfg.Batch.ScheduleID)
	var scheduled string
	waitFor(t, time.Minute, "the triggered schedule to start a run", func() (bool, string) {
		d, err := sched.Describe(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, a := range d.Info.RecentActions {
			if a.StartWorkflowResult != nil {
				scheduled = a.StartWorkflowResult.WorkflowID
				return true, ""
			}
		}
		return false, "no action yet"
	})
	var srep activities.Report
	if err := tc.GetWorkflow(ctx, scheduled, "").Get(ctx, &srep); err != nil {
		t.Fatalf("scheduled run %s: %v", scheduled, err)
	}
	if want := time.Now().UTC().AddDate(0, 0, -1).Format(time.DateOnly); srep.Name != want && srep.Name != time.Now().UTC().AddDate(0, 0, -2).Format(time.DateOnly) {
		t.Errorf("scheduled run %s reconciled %s, want %s", scheduled, srep.Name, want)
	}
	lap("schedule")

	if st.ui != "" {
		waitingID, waitingRun := st.waitingRecompute(t, ctx)
		checkUI(t, ctx, tc, st.ui, *uiCheck, workflows.ReconcileWorkflowID(dates[0]), waitingID, waitingRun)
		lap("ui check")
	}

	if *recordTruth {
		dates := dates
		for file, id := range map[string]string{
			"reconcile_history.json":                workflows.ReconcileWorkflowID(dates[0]),
			"recompute_history.json":                workflows.ReconcileWorkflowID(dates[0]) + "/payments",
			"recompute_targeted_history.json":       workflows.CorrectWorkflowID("payments") + "/1",
			"recompute_curate_tables_history.json":  workflows.CorrectWorkflowID("payments") + "/1/curate",
			"recompute_correct_stream_history.json": workflows.CorrectWorkflowID("payments"),
			"replay_history.json":                   workflows.ReplayWorkflowID(from, day, nil, false),
		} {
			recordHistory(t, ctx, tc, id, "../workflows/testdata/"+file)
		}
	}

	summary := fmt.Sprintf("%s\n%s\nreconcile: windows %d, stream exact %d, corrected %d (duplicates %d, missing %d, beyond lateness %d), already corrected %d, events beyond lateness %d, count err max %g mean %.4f, sum err max %g mean %.2f\ntotal %.1fs",
		result, tttLine, total.Windows, total.StreamExact, total.Corrected, total.Reasons.Duplicates, total.Reasons.Missing, total.Reasons.BeyondLateness,
		total.AlreadyCorrected, total.EventsBeyondLateness, total.CountErrMax, total.CountErrMean, total.SumErrMax, total.SumErrMean, time.Since(began).Seconds())
	fmt.Fprintln(os.Stdout, summary)
	if failed > 0 {
		t.Fail()
	}
}

// hopStream is the hopping stream TestTruthEndToEnd adds beside payments.
const hopStream = "payments_hop"

// addHoppingStream adds payments_hop: the payments stream's records, key,
// value and event-time policy, its 5 s windows starting every second.
func addHoppingStream(cfg *config.Config) {
	s, _ := cfg.StreamByName("payments")
	s.Name, s.Hop = hopStream, time.Second
	cfg.Streams = append(cfg.Streams, s)
}

// truthStack is the system the batch-truth end-to-end test and
// BenchmarkTimeToTruth run on: a real Temporal dev server, a kfake broker
// with reckon's topics, the batch worker (archive and truth workflows) and
// the stream worker in process, every committed pane observed. Windows
// are seconds instead of minutes (5 s windows, 2 s allowed lateness, 1 s
// out-of-orderness and idle timeout, 1 s correction debounce), so windows
// close while a run lasts. Everything stops in tb's cleanup or when ctx
// ends.
type truthStack struct {
	cfg  *config.Config
	sets []string // the --set flags cfg was loaded with, for `reckon` calls
	tc   client.Client
	lk   *lake.Lake
	obs  *paneObserver
	ui   string // the Temporal UI's address, when started withUI
	// kafka is the kfake cluster, for tests that hold or observe its
	// requests (barriers, docs/adr/0032-deterministic-test-barriers.md).
	kafka *kfake.Cluster
}

func startTruthStack(tb testing.TB, ctx context.Context, withUI bool) *truthStack {
	tb.Helper()
	st := newTruthStack(tb, ctx, stackOptions{withUI: withUI})
	st.runStream(tb, ctx)
	return st
}

// stackOptions vary the truth stack for tests of one aspect.
type stackOptions struct {
	withUI bool
	// tweak, when set, changes the config (after the second-scale
	// windows are set) before anything starts.
	tweak func(*config.Config)
	// externalBatch: the test runs the batch worker itself (`reckon
	// batch`, which starts the long-running workflows).
	externalBatch bool
}

// newTruthStack is startTruthStack without the stream worker: the test
// runs it (runStream, or as a process it can kill).
func newTruthStack(tb testing.TB, ctx context.Context, o stackOptions) *truthStack {
	tb.Helper()
	st := &truthStack{}
	withUI := o.withUI
	var hostport string
	if withUI {
		st.tc, hostport, st.ui = temporalWithUI(tb)
	} else {
		st.tc, hostport = testenv.Temporal(tb)
	}
	var brokers []string
	st.kafka, brokers = testenv.Kafka(tb, 1, "")
	const tq = "truth-e2e"
	st.sets = []string{
		"kafka.brokers=" + brokers[0], "temporal.address=" + hostport, "temporal.task_queue=" + tq,
		"lake.root=" + lakeDir(tb), "metrics.addr=", "stream_worker.instance=e2e", "stream_worker.commit_interval=50ms",
		"batch.horizon_poll=1s", "batch.correct_debounce=1s", "batch.correct_max_delay=3s",
		"batch.late_wait=1s", "batch.pane_archive_idle=500ms",
		// The finalizer off: these tests see what the reconciliation,
		// replay and targeted corrections correct (TestFinalUnderSteadyTraffic
		// runs it).
		"batch.finalize_every=-1s",
		// A dedup memory shorter than the redelivery delay (2s): the stream
		// counts some redeliveries twice. Those windows never reach the
		// late topic; only the reconciliation finds them (duplicates).
		"stream_worker.dedup_ttl=500ms",
		// Future-dated events up to 20 s ahead (scaled with the 5 s
		// windows as the default 5 m is to 5 m windows): counted at once,
		// final only once the clock reaches their windows.
		"gate.max_future_skew=20s",
	}
	cfg, err := config.Load("", nil, st.sets)
	if err != nil {
		tb.Fatal(err)
	}
	// Seconds instead of minutes, so windows close while the test runs.
	for i := range cfg.Streams {
		s := &cfg.Streams[i]
		s.Window, s.AllowedLateness, s.OutOfOrderness, s.IdleTimeout, s.EmitInterval, s.Rolling = 5*time.Second, 2*time.Second, time.Second, time.Second, 0, 0
	}
	if o.tweak != nil {
		o.tweak(cfg)
		if err := cfg.Validate(); err != nil {
			tb.Fatal(err)
		}
	}
	st.cfg = cfg
	applyTopicMap(tb, ctx, cfg)
	if st.lk, err = lake.Open(lake.Options{Root: cfg.Lake.Root}); err != nil {
		tb.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// Every committed pane, with the wall time this observer saw it.
	st.obs = newPaneObserver(tb, ctx, cfg)
	if o.externalBatch {
		return st
	}

	// The batch worker (archive + truth) and its long-running workflows.
	w := worker.New(st.tc, tq, worker.Options{})
	registerBatchAndTruth(tb, w, cfg, st.lk)
	if err := w.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(w.Stop)
	if err := startArchives(ctx, cfg, st.tc, quiet); err != nil {
		tb.Fatal(err)
	}
	if err := startTruth(ctx, cfg, st.tc, quiet); err != nil {
		tb.Fatal(err)
	}
	return st
}

// runStream runs a stream worker in process until the returned stop, the
// end of ctx or tb's cleanup.
func (st *truthStack) runStream(tb testing.TB, ctx context.Context) (stop func()) {
	tb.Helper()
	sw, err := streaming.New(st.cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		tb.Fatal(err)
	}
	sctx, stopStream := context.WithCancel(ctx)
	streamDone := make(chan error, 1)
	go func() { streamDone <- sw.Run(sctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			stopStream()
			if err := <-streamDone; err != nil {
				tb.Errorf("stream worker: %v", err)
			}
		})
	}
	tb.Cleanup(stop)
	return stop
}

// lakeDir is a temporary lake root removed after everything registered
// later has stopped. Unlike t.TempDir it retries the removal for a while:
// an activity the stopped worker had in flight may still be finishing a
// progress file.
func lakeDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "reckon-truth-e2e-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		var err error
		if ok, _ := pollUntil(10*time.Second, func() (bool, string) { err = os.RemoveAll(dir); return err == nil, "" }); !ok {
			tb.Errorf("remove %s: %v", dir, err)
		}
	})
	return dir
}

// sent is a valid event as the generator released it.
type sent struct {
	key, win string
	at       time.Time
	n        int // valid unique events of its window released so far, itself included
}

// truthTraffic is what a live generator run sent.
type truthTraffic struct {
	man   *generate.Manifest
	sends map[string]sent // event_id → when the generator released it
	// redelivered holds partition/offset of the redeliveries.
	redelivered map[string]bool
}

// liveTraffic runs the generator's payments scenario against the stack,
// paced by the wall clock (count records at rate per second), with events
// beyond allowed lateness, duplicates redelivered after 2 s and poison.
func (st *truthStack) liveTraffic(tb testing.TB, ctx context.Context, seed, count int64, rate float64) *truthTraffic {
	tb.Helper()
	o := generate.Defaults(generate.Payments)
	var err error
	o.Target, err = generate.TargetFromConfig(st.cfg, generate.Payments)
	if err != nil {
		tb.Fatal(err)
	}
	o.Seed, o.Count, o.Rate, o.Keys = seed, count, rate, 30
	o.LateFraction, o.BeyondLatenessFraction, o.Delay = 0.08, 0.5, generate.DelayDist{Kind: "uniform", Mean: time.Second}
	// Future-dated events (within the gate's skew) in the traffic: they
	// must not close windows early (checkOnTimePanes).
	o.DuplicateFraction, o.PoisonFraction, o.SkewFraction, o.RedeliveryDelay = 0.02, 0.01, 0.02, 2*time.Second
	o.Start = time.Now().UTC().Truncate(time.Millisecond)
	g, err := generate.New(o)
	if err != nil {
		tb.Fatal(err)
	}
	rec := generate.NewRecorder(g)
	prod, err := kgo.NewClient(append(kafkaconn.Opts(st.cfg.Kafka, "generate"), generate.ProducerOpts()...)...)
	if err != nil {
		tb.Fatal(err)
	}
	defer prod.Close()
	tr := &truthTraffic{sends: map[string]sent{}, redelivered: map[string]bool{}}
	valid := map[string]int{}
	var redeliveredMu sync.Mutex // protects tr.redelivered until Run returns
	sink := generate.NewKafkaSink(prod, func(r generate.Record, p int32, o int64) {
		if r.Category == generate.Duplicate {
			redeliveredMu.Lock()
			tr.redelivered[fmt.Sprintf("%d/%d", p, o)] = true
			redeliveredMu.Unlock()
		}
	})
	err = g.Run(ctx, sink, generate.RunOptions{Clock: generate.SystemClock, Epoch: o.Start, OnRecord: func(r generate.Record) {
		rec.Add(r)
		if !r.Category.Valid() || r.Stream == "" {
			return
		}
		win := r.EventTime.UTC().Truncate(o.Target.Window).Format(time.RFC3339)
		valid[r.KeyName+"|"+win]++
		tr.sends[r.EventID] = sent{r.KeyName, win, time.Now(), valid[r.KeyName+"|"+win]}
	}})
	if err != nil {
		tb.Fatal(err)
	}
	redeliveredMu.Lock()
	defer redeliveredMu.Unlock()
	tr.man = rec.Manifest(true, nil)
	return tr
}

// waitPurgedThrough waits until the stream's committed progress on every
// partition of its topic has purged through end.
func (st *truthStack) waitPurgedThrough(t *testing.T, ctx context.Context, stream string, end time.Time) {
	t.Helper()
	s, ok := st.cfg.StreamByName(stream)
	if !ok {
		t.Fatalf("no stream %s", stream)
	}
	m, err := topics.Load("")
	if err != nil {
		t.Fatal(err)
	}
	tp, ok := m.Find(s.Topic)
	if !ok {
		t.Fatalf("topic %s not in the topic map", s.Topic)
	}
	view, err := newProgressView(st.cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	waitFor(t, 2*time.Minute, stream+" purged through "+end.Format(time.TimeOnly), func() (bool, string) {
		for p := range tp.Partitions {
			if pr := latestProgress(t, ctx, view, stream, s.Topic, p); pr.PurgedThrough.Before(end) {
				return false, fmt.Sprintf("%s/%d purged through %s", s.Topic, p, pr.PurgedThrough.Format(time.TimeOnly))
			}
		}
		return true, ""
	})
}

// backgroundKeys prefixes the keys of backgroundTraffic.
const backgroundKeys = "bg-"

// foreground: the key is not background traffic's.
func foreground(key string) bool { return !strings.HasPrefix(key, backgroundKeys) }

// backgroundTraffic produces clean payments (on time, no duplicates or
// poison) at rate per second on keys of their own until the returned stop,
// which returns how many events it sent.
func (st *truthStack) backgroundTraffic(tb testing.TB, ctx context.Context, rate float64) (stop func() int64) {
	tb.Helper()
	o := generate.Options{Scenario: generate.Payments, Seed: 99, IDNonce: 99, Rate: rate, Keys: 20,
		KeyPrefix: backgroundKeys, Start: time.Now().UTC().Truncate(time.Millisecond)}
	var err error
	if o.Target, err = generate.TargetFromConfig(st.cfg, generate.Payments); err != nil {
		tb.Fatal(err)
	}
	g, err := generate.New(o)
	if err != nil {
		tb.Fatal(err)
	}
	prod, err := kgo.NewClient(append(kafkaconn.Opts(st.cfg.Kafka, "generate-bg"), generate.ProducerOpts()...)...)
	if err != nil {
		tb.Fatal(err)
	}
	bctx, cancel := context.WithCancel(ctx)
	var sent atomic.Int64
	done := make(chan error, 1)
	go func() {
		done <- g.Run(bctx, generate.NewKafkaSink(prod, nil), generate.RunOptions{Clock: generate.SystemClock,
			Epoch: o.Start, OnRecord: func(generate.Record) { sent.Add(1) }})
	}()
	var once sync.Once
	stop = func() int64 {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				tb.Errorf("background traffic: %v", err)
			}
			prod.Close()
		})
		return sent.Load()
	}
	tb.Cleanup(func() { stop() })
	return stop
}

// tooLate waits until the stream worker has committed every raw record,
// and with them every late record, then returns the new events among
// those the stream sent to the late topic, and how many records the late
// topic holds.
func (st *truthStack) tooLate(tb testing.TB, ctx context.Context, tr *truthTraffic) ([]sent, int) {
	tb.Helper()
	st.waitStreamCommitted(tb, ctx)
	var out []sent
	lates := readLate(tb, ctx, st.cfg)
	for _, l := range lates {
		// A redelivery the stream no longer remembered went to the late
		// topic too; it changes no truth, so it has no time-to-truth.
		if s, ok := tr.sends[l.eventID]; ok && !tr.redelivered[l.source] && l.stream == "payments" {
			out = append(out, s)
		}
	}
	return out, len(lates)
}

// timeToTruth waits up to wait for a batch pane covering each too-late
// event (its window, counting at least as many events as were released up
// to it) and returns, sorted, the time from the generator releasing each
// covered event to the observer seeing that pane committed.
func (st *truthStack) timeToTruth(tooLate []sent, wait time.Duration) []time.Duration {
	covered := func(panes []seenPane, s sent) (time.Duration, bool) {
		for _, p := range panes {
			if p.pane.Stream == "payments" && p.pane.ComputedBy == event.ComputedByBatch && p.pane.Key == s.key &&
				p.pane.WindowStart.UTC().Format(time.RFC3339) == s.win &&
				p.pane.Count >= int64(s.n) && !p.at.Before(s.at) {
				return p.at.Sub(s.at), true
			}
		}
		return 0, false
	}
	var ttt []time.Duration
	pollUntil(wait, func() (bool, string) {
		ttt = ttt[:0]
		panes := st.obs.snapshot()
		for _, s := range tooLate {
			if d, ok := covered(panes, s); ok {
				ttt = append(ttt, d)
			}
		}
		return len(ttt) == len(tooLate), ""
	})
	slices.Sort(ttt)
	return ttt
}

// waitStreamCommitted waits until the stream worker's group has committed
// every partition of every raw topic to its end: the late records, dead
// letters and panes of every produced record are committed too, in the
// same transactions as the offsets (docs/adr/0006-stream-exactly-once.md).
func (st *truthStack) waitStreamCommitted(tb testing.TB, ctx context.Context) {
	tb.Helper()
	adm, closeAdm, err := kafkaconn.NewAdmin(st.cfg.Kafka, "test")
	if err != nil {
		tb.Fatal(err)
	}
	defer closeAdm()
	var raw []string
	for _, s := range st.cfg.Streams {
		if !slices.Contains(raw, s.Topic) {
			raw = append(raw, s.Topic)
		}
	}
	waitFor(tb, time.Minute, "the stream worker to commit every raw record", func() (bool, string) {
		ends, err := adm.ListEndOffsets(ctx, raw...)
		if err != nil {
			return false, err.Error()
		}
		committed, err := adm.FetchOffsets(ctx, st.cfg.Stream.Group)
		if err != nil {
			return false, err.Error()
		}
		behind := ""
		ends.Each(func(e kadm.ListedOffset) {
			if c, _ := committed.Lookup(e.Topic, e.Partition); e.Offset > 0 && c.At < e.Offset && behind == "" {
				behind = fmt.Sprintf("%s/%d committed %d of %d", e.Topic, e.Partition, c.At, e.Offset)
			}
		})
		return behind == "", behind
	})
}

// percentile is the q-quantile (0..1) of sorted ds, 0 when empty.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

// paneObserver reads every committed pane of the summaries topic and
// remembers when it saw it.
type paneObserver struct {
	cfg *config.Config

	mu    sync.Mutex // protects following fields
	panes []seenPane
	next  map[int32]int64 // per partition, the offset after the last record read (control records included)
}

type seenPane struct {
	pane event.Pane
	at   time.Time
}

func newPaneObserver(t testing.TB, ctx context.Context, cfg *config.Config) *paneObserver {
	t.Helper()
	o := &paneObserver{cfg: cfg, next: map[int32]int64{}}
	// Control records too: with them the observer's position reaches the
	// last stable offset exactly, so catchUp knows when it has read
	// everything committed.
	cl, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "observer"),
		kgo.ConsumeTopics(cfg.Topics.Summaries), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	octx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for octx.Err() == nil {
			fs := cl.PollFetches(octx)
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				o.mu.Lock()
				defer o.mu.Unlock()
				o.next[r.Partition] = max(o.next[r.Partition], r.Offset+1)
				var p event.Pane
				if !r.Attrs.IsControl() && json.Unmarshal(r.Value, &p) == nil {
					o.panes = append(o.panes, seenPane{p, now})
				}
			})
		}
	}()
	t.Cleanup(func() { cancel(); <-done; cl.Close() })
	return o
}

func (o *paneObserver) snapshot() []seenPane {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.panes)
}

// batchCount is the number of batch panes committed so far (catchUp first).
func (o *paneObserver) batchCount(t testing.TB, ctx context.Context) int {
	o.catchUp(t, ctx)
	n := 0
	for _, p := range o.snapshot() {
		if p.pane.ComputedBy == event.ComputedByBatch {
			n++
		}
	}
	return n
}

func (o *paneObserver) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.panes)
}

// catchUp waits until the observer has read every partition of the
// summaries topic up to its last stable offset as of the call, so every
// pane committed before it is seen, and returns the count.
func (o *paneObserver) catchUp(t testing.TB, ctx context.Context) int {
	t.Helper()
	adm, closeAdm, err := kafkaconn.NewAdmin(o.cfg.Kafka, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer closeAdm()
	stable, err := adm.ListCommittedOffsets(ctx, o.cfg.Topics.Summaries)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the pane observer to read up to the last stable offsets", func() (bool, string) {
		o.mu.Lock()
		defer o.mu.Unlock()
		behind := ""
		stable.Each(func(s kadm.ListedOffset) {
			if o.next[s.Partition] < s.Offset && behind == "" {
				behind = fmt.Sprintf("partition %d read to %d of %d", s.Partition, o.next[s.Partition], s.Offset)
			}
		})
		return behind == "", behind
	})
	return o.count()
}

// lateRecord is one record of the late topic: its event and raw source.
type lateRecord struct {
	eventID string
	source  string // partition/offset in the raw topic
	stream  string // the stream that found it too late
}

// readLate returns every committed record on the late topic, read to its
// last stable offsets as of the call (not to the first quiet second, which
// a loaded machine reached with records still to come).
func readLate(t testing.TB, ctx context.Context, cfg *config.Config) []lateRecord {
	t.Helper()
	var out []lateRecord
	err := kafkaconn.ReadTopic(ctx, cfg.Kafka, "late-reader", cfg.Topics.Late, func(r *kgo.Record) error {
		var e struct {
			EventID string `json:"event_id"`
		}
		if json.Unmarshal(r.Value, &e) != nil {
			return nil
		}
		l := lateRecord{eventID: e.EventID}
		var p, o string
		for _, h := range r.Headers {
			switch h.Key {
			case event.HeaderSourcePartition:
				p = string(h.Value)
			case event.HeaderSourceOffset:
				o = string(h.Value)
			case "reckon.stream":
				l.stream = string(h.Value)
			}
		}
		l.source = p + "/" + o
		out = append(out, l)
		return nil
	})
	if err != nil {
		t.Fatalf("read the late topic: %v", err)
	}
	return out
}

// recordHistory writes the history of workflow id's latest run as JSON.
func recordHistory(t *testing.T, ctx context.Context, c client.Client, id, path string) {
	t.Helper()
	recordRun(t, ctx, c, id, "", path)
}

// recordRun writes the history of run runID of workflow id (the latest
// when empty) as JSON.
func recordRun(t *testing.T, ctx context.Context, c client.Client, id, runID, path string) {
	t.Helper()
	hist := &historypb.History{}
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		hist.Events = append(hist.Events, e)
	}
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %d events of %s %s into %s", len(hist.Events), id, runID, path)
}

// temporalWithUI is testenv.Temporal with the web UI on a free port.
func temporalWithUI(t testing.TB) (client.Client, string, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	var extra []string
	for _, sa := range workflows.SearchAttributes() {
		extra = append(extra, "--search-attribute", sa)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv, err := testsuite.StartDevServer(ctx, testsuite.DevServerOptions{
		ExistingPath: testenv.TemporalBin(t), EnableUI: true, UIPort: port, LogLevel: "error", ExtraArgs: extra,
		ClientOptions: &client.Options{Logger: tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))},
		Stdout:        io.Discard, Stderr: io.Discard,
	})
	if err != nil {
		t.Fatalf("start temporal dev server: %v", err)
	}
	t.Cleanup(func() { srv.Client().Close(); _ = srv.Stop() })
	return srv.Client(), srv.FrontendHostPort(), "http://127.0.0.1:" + port
}

// waitingRecompute starts a targeted recompute of payments that waits for
// the archive to reach an offset the partition never will, until the
// test ends (or 10 minutes): a running recompute with a reason on its
// page. It returns the workflow's id and run id.
func (st *truthStack) waitingRecompute(t *testing.T, ctx context.Context) (string, string) {
	t.Helper()
	start := time.Now().UTC().Truncate(5 * time.Second)
	id := workflows.RecomputeWorkflowID("payments", start, start.Add(5*time.Second)) + "/ui-waits"
	run, err := st.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: st.cfg.Temporal.TaskQueue, StaticSummary: "recompute payments (UI check: waits for the archive)"},
		workflows.RecomputeWorkflow, workflows.RecomputeParams{
			Stream: "payments", From: start, To: start.Add(5 * time.Second), Trigger: activities.TriggerManual,
			Windows:     []activities.WindowRef{{Key: "u1", Start: start}},
			After:       []activities.PartitionOffset{{Partition: 0, Offset: 1 << 40}, {Partition: 2, Offset: 1 << 41}},
			HorizonWait: 10 * time.Minute, HorizonPoll: time.Second,
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.tc.TerminateWorkflow(context.Background(), id, "", "UI check done") })
	waitFor(t, time.Minute, "the UI check's recompute to wait for the horizon", func() (bool, string) {
		s, err := st.recomputeStatus(ctx, id)
		return err == nil && s.Status == workflows.StatusWaiting, fmt.Sprintf("%+v %v", s, err)
	})
	return id, run.GetRunID()
}

// TestReconcileWaitingUI renders a waiting reconciliation in the Temporal
// UI (headless chromium) and checks what it says: a little live traffic,
// then a reconciliation of today whose payments recompute waits for an
// archive held behind its target (waitingReconcile). Run with -ui DIR;
// the screenshots docs/img/ui-reconcile-waits*.png come from it.
//
//	go test ./workers -run TestReconcileWaitingUI -v -args -ui /tmp/ui
func TestReconcileWaitingUI(t *testing.T) {
	if *uiCheck == "" {
		t.Skip("run with -ui DIR")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	st := startTruthStack(t, ctx, true)
	if err := startTruth(ctx, st.cfg, st.tc, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	st.liveTraffic(t, ctx, 7, 120, 60)
	st.waitStreamCommitted(t, ctx)
	id, run := st.waitingReconcile(t, ctx, time.Now().UTC().Format(time.DateOnly))
	checkWaitingReconcileUI(t, ctx, st.tc, st.ui, *uiCheck, id, run)
}

// waitingReconcile starts a reconciliation of date whose payments
// recompute waits for the archive: the archive of payments' raw partition
// 0 is terminated and one record produced behind it, which the stream
// processes, so the recompute's target (the stream's offset) is one the
// archive has not reached. It returns the reconciliation's id and run id;
// when the test ends the reconciliation is terminated and the archive
// started again.
func (st *truthStack) waitingReconcile(t *testing.T, ctx context.Context, date string) (string, string) {
	t.Helper()
	topic := ""
	for _, s := range st.cfg.Streams {
		if s.Name == "payments" {
			topic = s.Topic
		}
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := st.tc.TerminateWorkflow(ctx, workflows.ArchiveWorkflowID(topic, 0), "", "UI check: hold the archive"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := startArchives(context.Background(), st.cfg, st.tc, quiet); err != nil {
			t.Errorf("restart the archives: %v", err)
		}
	})
	prod, err := kgo.NewClient(append(kafkaconn.Opts(st.cfg.Kafka, "ui-hold"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	v := fmt.Sprintf(`{"event_id":%q,"event_type":"payment.checkout.completed","occurred_at":%q,"data":{"user_id":"ui-hold","amount":1}}`,
		uuid.NewString(), now.Format(time.RFC3339Nano))
	err = prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Key: []byte("ui-hold"), Value: []byte(v)}).FirstErr()
	prod.Close()
	if err != nil {
		t.Fatal(err)
	}
	st.waitStreamCommitted(t, ctx)
	id := workflows.ReconcileWorkflowID(date) + "/ui-waits"
	run, err := st.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: st.cfg.Temporal.TaskQueue,
		StaticSummary: "reconcile " + date + " (UI check: the archive held)"},
		workflows.Reconcile, workflows.ReconcileParams{Date: date, HorizonWait: 10 * time.Minute, HorizonPoll: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.tc.TerminateWorkflow(context.Background(), id, "", "UI check done") })
	waitFor(t, time.Minute, "the UI check's reconciliation to wait for the archive", func() (bool, string) {
		s, err := st.recomputeStatus(ctx, id+"/payments")
		return err == nil && s.Status == workflows.StatusWaiting && strings.Contains(s.Waiting, "archived to offset"),
			fmt.Sprintf("%+v %v", s, err)
	})
	return id, run.GetRunID()
}

// checkWaitingReconcileUI renders the waiting reconciliation's details
// (each stream on its own line: done, or the child recomputing it) and
// its payments child's (what it waits for, partition by partition).
func checkWaitingReconcileUI(t *testing.T, ctx context.Context, tc client.Client, ui, dir, id, run string) {
	t.Helper()
	renderUI(t, ctx, dir, "ui-reconcile-waits", ui+"/namespaces/default/workflows/"+url.PathEscape(id)+"/"+run+"/user-metadata",
		"1 of 2 streams done", "payments: recomputing", id+"/payments", "suhu: matched")
	child, err := tc.DescribeWorkflowExecution(ctx, id+"/payments", "")
	if err != nil {
		t.Fatal(err)
	}
	renderUI(t, ctx, dir, "ui-reconcile-child-waits", ui+"/namespaces/default/workflows/"+url.PathEscape(id+"/payments")+"/"+
		child.GetWorkflowExecutionInfo().GetExecution().GetRunId()+"/user-metadata", "waiting for the horizon", "archived to offset")
}

// checkUI renders Temporal UI pages in headless chromium (Debian
// `chromium`) and checks that an operator finds the batch-truth workflows:
// the list filtered by reckon's search attributes, a reconciliation with
// its children named by their static summaries, and a running recompute
// whose User Metadata tab says what it waits for (its current details,
// which the UI reads with the __temporal_workflow_metadata query). Screenshots go
// to dir. The UI renders in the browser after its API calls return: the
// page's text is read again until every wanted text is on it, within a
// minute (ui_cdp_test.go).
func checkUI(t *testing.T, ctx context.Context, tc client.Client, ui, dir, reconcileID, waitingID, waitingRun string) {
	t.Helper()
	render := func(name, page string, want ...string) {
		t.Helper()
		renderUI(t, ctx, dir, name, page, want...)
	}
	corrected := `WorkflowType="Recompute" AND ReckonStatus="corrected"` // the README's query
	render("ui-corrections", ui+"/namespaces/default/workflows?query="+url.QueryEscape(corrected), "correct/payments/1", "Recompute")
	// Why a correction happened: its details say what triggered it and
	// list each corrected window, before and after.
	list, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default", Query: corrected + ` AND WorkflowId STARTS_WITH "correct/"`})
	if err != nil || len(list.GetExecutions()) == 0 {
		t.Errorf("list %s: %v, %d runs", corrected, err, len(list.GetExecutions()))
	} else {
		e := list.GetExecutions()[0].GetExecution()
		render("ui-correction-why", ui+"/namespaces/default/workflows/"+url.PathEscape(e.GetWorkflowId())+"/"+e.GetRunId()+"/user-metadata",
			"corrected · trigger: correction (too-late events arrived", "corrections", "published", "reason")
	}
	render("ui-reconcile", ui+"/namespaces/default/workflows/"+url.PathEscape(reconcileID), "reconcile", "recompute payments for")
	render("ui-recompute-waits", ui+"/namespaces/default/workflows/"+url.PathEscape(waitingID)+"/"+waitingRun+"/user-metadata", "waiting for the horizon", "archived to", "need 1099511627777",
		"need 2199023255553")
	// Its input, durations readable (workflows/durations.go).
	render("ui-recompute-input", ui+"/namespaces/default/workflows/"+url.PathEscape(waitingID)+"/"+waitingRun+"/history",
		`"horizon_wait": "10m0s"`, `"horizon_poll": "1s"`)
}

// renderUI renders page in headless chromium (Debian `chromium`), waits
// up to a minute until every wanted text is on it (the UI renders after
// its API calls return; ui_cdp_test.go reads the text again), and writes
// a screenshot dir/name.png.
func renderUI(t *testing.T, ctx context.Context, dir, name, page string, want ...string) {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("-ui needs chromium on PATH (Debian: apt-get install chromium): %v", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, name+".png")
	p, err := openPage(ctx, bin, page, t.TempDir())
	if err != nil {
		t.Errorf("chromium %s: %v", page, err)
		return
	}
	defer p.close()
	var missing []string
	ok, _ := pollUntil(time.Minute, func() (bool, string) {
		text, err := p.text()
		if err != nil {
			missing = []string{"(" + err.Error() + ")"}
			return false, ""
		}
		missing = missing[:0]
		for _, w := range want {
			if !strings.Contains(text, w) {
				missing = append(missing, w)
			}
		}
		return len(missing) == 0, ""
	})
	if err := p.screenshot(shot); err != nil {
		t.Errorf("chromium screenshot %s: %v", page, err)
	}
	if !ok {
		t.Errorf("UI %s: %q not on the page within a minute (screenshot %s)", page, missing, shot)
	}
	t.Logf("UI %s: screenshot %s", page, shot)
}

// applyTopicMap applies the embedded topic map to cfg's broker.
func applyTopicMap(tb testing.TB, ctx context.Context, cfg *config.Config) {
	tb.Helper()
	m, err := topics.Load("")
	if err != nil {
		tb.Fatal(err)
	}
	adm, closeAdm, err := kafkaconn.NewAdmin(cfg.Kafka, "test")
	if err != nil {
		tb.Fatal(err)
	}
	defer closeAdm()
	if _, err := topics.Apply(ctx, adm, m); err != nil {
		tb.Fatal(err)
	}
}

// registerBatchAndTruth registers the batch worker's archive and truth
// workflows and activities on w, as `reckon batch` does; their Kafka
// clients and progress view close at the test's end (cleanups run last in
// first out: after a worker stop registered later).
func registerBatchAndTruth(tb testing.TB, w worker.Registry, cfg *config.Config, lk *lake.Lake) {
	tb.Helper()
	closeArchive, err := registerBatch(w, cfg, lk)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(closeArchive)
	closeTruth, err := registerTruth(w, cfg, lk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(closeTruth)
}
