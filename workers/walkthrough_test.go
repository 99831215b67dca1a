package workers

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"reckon/activities"
	"reckon/internal/config"
	"reckon/internal/kafkaconn"
	"reckon/internal/temporalconn"
	"reckon/workflows"
)

var walkthrough = flag.Bool("walkthrough", false, "run the operator walkthrough on real processes (make walkthrough)")

// replyWithin is how soon every waiting command must say what it waits for.
const replyWithin = 5 * time.Second

// TestOperatorWalkthrough is what a new operator does, on real processes
// (this test binary runs as `reckon`, TestMain): `reckon dev` → traffic →
// kill -9 the stream and the batch worker → Ctrl-C → `reckon dev` again →
// reconcile today and yesterday while the demo generators run → replay dry
// run of today → Ctrl-C → follow it again. It asserts that the
// reconciliation of today completes under traffic and says up to where it
// checked (issue 24), that no event_id repeats with a different payload
// across the two runs, that every command speaks within 5 s and a waiting
// one says what it waits for within 5 s (dev start-up; reconcile and
// replay within 5 s of a recompute's horizon check answering "not ready",
// read from the workflows' histories) and what keeps running when
// interrupted, that a clean stop
// logs no ERROR, and that the batch metrics exist and move. It logs the stream's restart
// wait (kill -9 → partition assigned) with dynamic membership (the first
// run: the reference) and with static membership (the default, the second
// run), side by side.
//
//	make walkthrough   (go test ./workers -run TestOperatorWalkthrough -v -args -walkthrough)
func TestOperatorWalkthrough(t *testing.T) {
	if !*walkthrough {
		t.Skip("run with -walkthrough (make walkthrough)")
	}
	temporalBin := os.Getenv("RECKON_TEST_TEMPORAL_BIN")
	if temporalBin == "" {
		t.Fatal("set RECKON_TEST_TEMPORAL_BIN to the temporal CLI (make walkthrough does)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	dir := t.TempDir()
	sets := []string{
		"dev.dir=" + dir, "dev.temporal_bin=" + temporalBin, "lake.root=" + filepath.Join(dir, "lake"),
		"dev.kafka_port=" + freePort(t), "dev.temporal_port=" + freePort(t), "dev.ui_port=" + freePort(t),
		"dev.ofd_port=" + freePort(t),
		"metrics.addr=127.0.0.1:" + freePort(t),
	}
	cfg, err := config.Load("", nil, sets)
	if err != nil {
		t.Fatal(err)
	}
	kafkaCfg := cfg.Kafka
	kafkaCfg.Brokers = []string{"127.0.0.1:" + strconv.Itoa(cfg.Dev.KafkaPort)}
	clientSets := append(sets, "kafka.brokers="+kafkaCfg.Brokers[0], "temporal.address=127.0.0.1:"+strconv.Itoa(cfg.Dev.TemporalPort))
	today := time.Now().UTC().Format(time.DateOnly)
	yesterday := time.Now().UTC().AddDate(0, 0, -1).Format(time.DateOnly)

	// Run 1, with dynamic group membership: the reference restart wait.
	dev1 := startReckon(t, "dev", append([]string{"--set", "stream_worker.membership=dynamic"}, setFlags(sets)...)...)
	dev1.checkStartup(t)
	batchURL := dev1.waitMetricsURL(t, "batch", time.Time{})
	first := scrapeMetrics(t, ctx, batchURL)
	checkBatchFamilies(t, cfg, first)
	dev1.waitStreamProcessed(t, ctx)
	before := dev1.killAndTimeReassign(t, filepath.Join(dir, "run"))
	killed := time.Now()
	killPid(t, filepath.Join(dir, "run", "batch.pid"))
	dev1.waitMetricsURL(t, "batch", killed) // the batch came back after the kill
	dev1.interrupt(t)
	run1End := time.Now()

	// Run 2, the default (static membership).
	dev2 := startReckon(t, "dev", setFlags(sets)...)
	dev2.checkStartup(t)
	batchURL = dev2.waitMetricsURL(t, "batch", time.Time{})
	dev2.waitStreamProcessed(t, ctx)
	after := dev2.killAndTimeReassign(t, filepath.Join(dir, "run"))
	t.Logf("stream restart wait, kill -9 → partition assigned: dynamic membership %v (reference, run 1), static membership %v (default, run 2); same machine, same run",
		before.Round(10*time.Millisecond), after.Round(10*time.Millisecond))

	// Reconcile today while the demo generators run: it completes, checks
	// the windows the stream has purged and says up to where (docs/adr/
	// 0015-stream-progress.md, "Today so far"); a recompute that waits for
	// its horizon meanwhile is said within 5 s.
	ccfg, err := config.Load("", nil, clientSets)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := temporalconn.Dial(ctx, ccfg.Temporal, slog.New(slog.DiscardHandler), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	m0 := scrapeMetrics(t, ctx, batchURL)
	purged0, ends0 := streamPoints(t, ctx, ccfg)
	rec := startReckon(t, "reconcile", append([]string{"--date", today, "--wait"}, setFlags(clientSets)...)...)
	rec.checkSpeaks(t)
	if code := rec.wait(t, 5*time.Minute); code != 0 {
		t.Errorf("reconcile %s under traffic: exit %d:\n%s", today, code, rec.out.text())
	}
	purged1, ends1 := streamPoints(t, ctx, ccfg)
	t.Logf("reconcile %s completed under traffic in %v, %d raw records produced meanwhile", today,
		time.Since(rec.started).Round(100*time.Millisecond), ends1-ends0)
	if ends1 == ends0 {
		t.Errorf("no traffic while the reconcile of %s ran: the raw topics stayed at %d records", today, ends0)
	}
	rec.requireLine(t, "price of speed: reconcile "+today)
	checkCheckedUpTo(t, ccfg, rec, purged0, purged1)
	checkWaitsSaid(t, ctx, tc, workflows.ReconcileWorkflowID(today), rec)

	// The batch metrics move: the reconcile's recomputes found their
	// horizon final and finished; Z-report keys arrive from the fiscal
	// generator. (Windows checked move only once the stream has purged a
	// window with traffic: 5m + 5m of lateness after the first payment,
	// later than this walkthrough gets to; logged.)
	waitFor(t, 2*time.Minute, "the batch metrics to move", func() (bool, string) {
		m := scrapeMetrics(t, ctx, batchURL)
		sum := func(m map[string]float64, name string, labels ...string) float64 {
			var n float64
			for k, v := range m {
				if !strings.HasPrefix(k, name+"{") {
					continue
				}
				match := true
				for _, l := range labels {
					match = match && strings.Contains(k, l)
				}
				if match {
					n += v
				}
			}
			return n
		}
		final0, final := sum(m0, "reckon_batch_horizon_checks_total", `result="final"`),
			sum(m, "reckon_batch_horizon_checks_total", `result="final"`)
		recs0, recs := sum(m0, "reckon_batch_recomputes_total", `trigger="reconcile"`),
			sum(m, "reckon_batch_recomputes_total", `trigger="reconcile"`)
		checked0, checked := sum(m0, "reckon_batch_windows_checked_total", `trigger="reconcile"`),
			sum(m, "reckon_batch_windows_checked_total", `trigger="reconcile"`)
		zkeys := sum(m, "reckon_batch_zreport_keys")
		return final > final0 && recs > recs0 && zkeys > 0,
			fmt.Sprintf("final horizon checks %v → %v, reconcile recomputes %v → %v, windows checked %v → %v, z-report keys %v",
				final0, final, recs0, recs, checked0, checked, zkeys)
	})
	m1 := scrapeMetrics(t, ctx, batchURL)
	checkBatchFamilies(t, cfg, m1)
	t.Logf("batch figures (run 2): %s", seriesOf(m1, "reckon_batch_"))

	// Yesterday: nothing to wait for; the report names its file.
	yrec := startReckon(t, "reconcile", append([]string{"--date", yesterday, "--wait"}, setFlags(clientSets)...)...)
	if code := yrec.wait(t, 2*time.Minute); code != 0 {
		t.Errorf("reconcile %s: exit %d:\n%s", yesterday, code, yrec.out.text())
	}
	yrec.requireLine(t, "price of speed: reconcile "+yesterday)
	yrec.requireLine(t, "report: "+filepath.Join(dir, "lake")+"/reports/reconcile/"+yesterday+".json")
	if strings.Contains(yrec.out.text(), "<lake>") {
		t.Errorf("a placeholder reached the user:\n%s", yrec.out.text())
	}

	// A dry-run replay of today: Ctrl-C once it has started says what
	// keeps running; the same command follows it again to its report.
	replayArgs := append([]string{"--from", today, "--to", today, "--dry-run", "--progress-interval", "1s"},
		setFlags(clientSets)...)
	rep := startReckon(t, "replay", replayArgs...)
	rep.checkSpeaks(t)
	rep.interrupt(t)
	switch out := rep.out.text(); {
	case strings.Contains(out, "detached; the replay keeps running in Temporal"):
		t.Logf("reckon replay, interrupted: detached")
	case strings.Contains(out, "price of speed: replay"):
		t.Logf("reckon replay, interrupted: it had finished already")
	default:
		t.Errorf("reckon replay, interrupted: neither detached nor done:\n%s", out)
	}
	follow := startReckon(t, "replay", replayArgs...)
	follow.checkSpeaks(t)
	if code := follow.wait(t, 5*time.Minute); code != 0 {
		t.Errorf("replay %s --dry-run, followed: exit %d:\n%s", today, code, follow.out.text())
	}
	purged1, _ = streamPoints(t, ctx, ccfg)
	follow.requireLine(t, "(dry run: nothing published)")
	checkCheckedUpTo(t, ccfg, follow, nil, purged1)
	checkWaitsSaid(t, ctx, tc, workflows.ReplayWorkflowID(today, today, nil, true), rep, follow)

	// No event_id of run 1 comes back in run 2 with another payload.
	checkEventIDs(t, ctx, cfg, kafkaCfg, run1End)

	dev2.interrupt(t)
}

// setFlags turns key=value pairs into --set flags.
func setFlags(sets []string) []string {
	var out []string
	for _, s := range sets {
		out = append(out, "--set", s)
	}
	return out
}

// freePort is a TCP port free on 127.0.0.1 a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// checkBatchFamilies: the scrape-time batch figures exist for every raw
// topic (and partition) and every Z-report status.
func checkBatchFamilies(t *testing.T, cfg *config.Config, m map[string]float64) {
	t.Helper()
	for _, topic := range rawTopics(cfg) {
		if _, ok := m[fmt.Sprintf(`reckon_batch_archive_lag_offsets{topic=%q,partition="0"}`, topic)]; !ok {
			t.Errorf("no archive lag of %s/0", topic)
		}
		if _, ok := m[fmt.Sprintf(`reckon_batch_compaction_backlog_files{topic=%q}`, topic)]; !ok {
			t.Errorf("no compaction backlog of %s", topic)
		}
	}
	for _, s := range []string{"waiting", "matched", "mismatched", "incomplete"} {
		if _, ok := m[fmt.Sprintf(`reckon_batch_zreport_keys{status=%q}`, s)]; !ok {
			t.Errorf("no Z-report keys of status %s", s)
		}
	}
}

// checkEventIDs reads every raw topic and finds no event_id whose records
// before and after the end of run 1 differ in payload (a redelivery
// repeats its bytes; a new event must not reuse an id).
func checkEventIDs(t *testing.T, ctx context.Context, cfg *config.Config, kc config.Kafka, run1End time.Time) {
	t.Helper()
	type seen struct {
		sum  [32]byte
		run1 bool
	}
	ids := map[string]seen{}
	var shared, conflicts, run1, run2 int
	for _, topic := range rawTopics(cfg) {
		err := kafkaconn.ReadTopic(ctx, kc, "walkthrough", topic, func(r *kgo.Record) error {
			var e struct {
				EventID string `json:"event_id"`
			}
			if json.Unmarshal(r.Value, &e) != nil || e.EventID == "" {
				return nil // poison: no id to compare
			}
			inRun1 := r.Timestamp.Before(run1End)
			if inRun1 {
				run1++
			} else {
				run2++
			}
			s := seen{sha256.Sum256(r.Value), inRun1}
			prev, ok := ids[e.EventID]
			if !ok {
				ids[e.EventID] = s
				return nil
			}
			if prev.run1 != inRun1 {
				shared++
				if prev.sum != s.sum {
					conflicts++
					if conflicts <= 5 {
						t.Errorf("event_id %s of run 1 came back in run 2 with another payload: %s", e.EventID, r.Value)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("event ids: %d records of run 1, %d of run 2; %d ids in both runs, %d of them with another payload", run1, run2, shared, conflicts)
	if run1 == 0 || run2 == 0 {
		t.Errorf("traffic in both runs expected: %d and %d records", run1, run2)
	}
}

// reckonProc is one `reckon` process of the walkthrough, its output
// recorded line by line with the time each line arrived.
type reckonProc struct {
	name    string
	cmd     *exec.Cmd
	out     *timedLines
	started time.Time
	exited  chan struct{}
	// code and exitedAt are set before exited is closed.
	code     int
	exitedAt time.Time
}

func startReckon(t *testing.T, cmdName string, flags ...string) *reckonProc {
	t.Helper()
	args := append([]string{cmdName}, flags...)
	cmd := exec.Command(os.Args[0], args...)
	// Configuration from the flags only: no RECKON_* variable of the
	// test's environment applies. The children of `reckon dev` are this
	// binary too (envChild), with their own command lines.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RECKON_") && !strings.HasPrefix(kv, envChildArgs+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, envChild+"=1")
	p := &reckonProc{name: args[0], cmd: cmd, out: &timedLines{}, exited: make(chan struct{})}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	go p.out.read(pr)
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = cmd.Wait()
		p.code, p.exitedAt = cmd.ProcessState.ExitCode(), time.Now()
		pw.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-p.exited:
			case <-time.After(90 * time.Second):
				_ = cmd.Process.Kill()
				<-p.exited
			}
		}
		if t.Failed() {
			t.Logf("reckon %s output:\n%s", p.name, p.out.text())
		}
	})
	return p
}

// wait waits for the process to exit and returns its exit code.
func (p *reckonProc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.code
	case <-time.After(timeout):
		t.Fatalf("reckon %s did not exit within %v", p.name, timeout)
		return -1
	}
}

// interrupt is Ctrl-C: SIGINT, then the process must exit 0 with no
// ERROR line after the signal, and (reckon dev) every component must stop
// within its grace period.
func (p *reckonProc) interrupt(t *testing.T) {
	t.Helper()
	at := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 90*time.Second); code != 0 {
		t.Errorf("reckon %s: exit %d after Ctrl-C", p.name, code)
	}
	var said []string
	for _, l := range p.out.since(at) {
		if strings.Contains(l.text, "level=ERROR") || strings.Contains(l.text, "did not stop within") {
			t.Errorf("reckon %s: on a clean stop: %s", p.name, l.text)
		}
		if m := stacksIn.FindStringSubmatch(l.text); m != nil {
			if b, err := os.ReadFile(m[1]); err == nil {
				if i := strings.LastIndex(string(b), "SIGQUIT"); i >= 0 {
					t.Logf("%s from SIGQUIT:\n%s", m[1], b[i:])
				}
			}
		}
		if strings.Contains(l.text, "reckon dev: ") || strings.Contains(l.text, "stopping") {
			said = append(said, fmt.Sprintf("+%v %s", l.at.Sub(at).Round(10*time.Millisecond), l.text))
		}
	}
	if len(said) > 0 {
		t.Logf("reckon %s after Ctrl-C:\n%s", p.name, strings.Join(said, "\n"))
	}
	t.Logf("reckon %s stopped %v after Ctrl-C", p.name, time.Since(at).Round(10*time.Millisecond))
}

// requireLine fails unless some output line contains s.
func (p *reckonProc) requireLine(t *testing.T, s string) {
	t.Helper()
	if !strings.Contains(p.out.text(), s) {
		t.Errorf("reckon %s: no line with %q in\n%s", p.name, s, p.out.text())
	}
}

var (
	devLine  = regexp.MustCompile(`^reckon dev: `)
	stacksIn = regexp.MustCompile(`goroutine stacks in (\S+)\)`)
)

// checkStartup waits for `reckon dev` to be up and checks that it spoke
// within replyWithin of its start and never fell silent for longer while
// starting up.
func (p *reckonProc) checkStartup(t *testing.T) {
	t.Helper()
	waitFor(t, 3*time.Minute, "reckon dev to be up", func() (bool, string) {
		select {
		case <-p.exited:
			t.Fatalf("reckon dev exited %d:\n%s", p.code, p.out.text())
		default:
		}
		return strings.Contains(p.out.text(), "reckon dev: up."), ""
	})
	last, lastText := p.started, "(start)"
	for _, l := range p.out.since(p.started) {
		if !devLine.MatchString(l.text) {
			continue
		}
		if gap := l.at.Sub(last); gap > replyWithin {
			t.Errorf("reckon dev was silent for %v at start-up, after %q, before %q", gap.Round(10*time.Millisecond), lastText, l.text)
		}
		last, lastText = l.at, l.text
		if strings.HasPrefix(l.text, "reckon dev: up.") {
			break
		}
	}
	t.Logf("reckon dev up in %v", last.Sub(p.started).Round(10*time.Millisecond))
}

// checkSpeaks: the command's first line comes within replyWithin of its
// start.
func (p *reckonProc) checkSpeaks(t *testing.T) {
	t.Helper()
	waitFor(t, time.Minute, "reckon "+p.name+" to say something", func() (bool, string) {
		select {
		case <-p.exited:
			return true, ""
		default:
		}
		return len(p.out.since(p.started)) > 0, ""
	})
	ls := p.out.since(p.started)
	if len(ls) == 0 {
		t.Errorf("reckon %s exited %d without a word", p.name, p.code)
		return
	}
	if d := ls[0].at.Sub(p.started); d > replyWithin {
		t.Errorf("reckon %s said nothing for %v after its start", p.name, d.Round(10*time.Millisecond))
	}
}

// streamPoints is, per stream with published progress on every non-empty
// partition of its raw topic, the least purged-through point of them
// (docs/adr/0015-stream-progress.md), and the raw topics' records so far
// (the sum of their end offsets).
func streamPoints(t *testing.T, ctx context.Context, cfg *config.Config) (map[string]time.Time, int64) {
	t.Helper()
	view, err := newProgressView(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	if err := view.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	adm, closeAdm, err := kafkaconn.NewAdmin(cfg.Kafka, "walkthrough")
	if err != nil {
		t.Fatal(err)
	}
	defer closeAdm()
	purged := map[string]time.Time{}
	var records int64
	for _, topic := range rawTopics(cfg) {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		ends.Each(func(o kadm.ListedOffset) { records += max(o.Offset, 0) })
		for _, st := range cfg.Streams {
			if st.Topic != topic {
				continue
			}
			least, all := time.Time{}, true
			ends.Each(func(o kadm.ListedOffset) {
				if o.Offset <= 0 {
					return
				}
				pr, ok := view.Get(st.Name, topic, o.Partition)
				if !ok || pr.PurgedThrough.IsZero() {
					all = false
					return
				}
				if least.IsZero() || pr.PurgedThrough.Before(least) {
					least = pr.PurgedThrough
				}
			})
			if all && !least.IsZero() {
				purged[st.Name] = least
			}
		}
	}
	return purged, records
}

var checkedLine = regexp.MustCompile(`(?m)^(\S+): checked windows up to (\S+); windows to (\S+) still open`)

// checkCheckedUpTo checks what a report of today says it checked: a line
// "<stream>: checked windows up to T; windows to U still open" for the
// payments stream at least; for every such line U is after T, T is at or
// before the stream's purge after the command (purged1: a recompute
// checks only windows the stream has purged) and, when purged0 is given,
// at or after the last window end the stream had purged before the
// command started (the check picks the latest one purged when it runs).
func checkCheckedUpTo(t *testing.T, cfg *config.Config, p *reckonProc, purged0, purged1 map[string]time.Time) {
	t.Helper()
	out := p.out.text()
	seen := map[string]bool{}
	for _, m := range checkedLine.FindAllStringSubmatch(out, -1) {
		name := m[1]
		st, ok := cfg.StreamByName(name)
		to, err1 := time.Parse(time.RFC3339, m[2])
		open, err2 := time.Parse(time.RFC3339, m[3])
		if !ok || err1 != nil || err2 != nil {
			t.Errorf("reckon %s: unreadable line %q", p.name, m[0])
			continue
		}
		seen[name] = true
		if !open.After(to) {
			t.Errorf("reckon %s: %q: the open windows do not follow the checked ones", p.name, m[0])
		}
		if p1, ok := purged1[name]; ok && to.After(p1) {
			t.Errorf("reckon %s: %q: past the stream's purge %s", p.name, m[0], p1.UTC().Format(time.RFC3339))
		}
		if p0, ok := purged0[name]; ok && to.Before(p0.Truncate(st.Window)) {
			t.Errorf("reckon %s: %q: short of the last window end the stream had purged before it started, %s",
				p.name, m[0], p0.Truncate(st.Window).UTC().Format(time.RFC3339))
		}
		t.Logf("reckon %s: %s", p.name, m[0])
	}
	if !seen["payments"] {
		t.Errorf("reckon %s: the report of today does not say up to where it checked payments:\n%s", p.name, out)
	}
}

// checkWaitsSaid: every recompute child of workflow id that waited for its
// horizon (a CheckHorizon result not ready, in its history) for longer
// than replyWithin from that answer on, while one of procs followed the
// workflow, was said by that process within replyWithin of the answer
// ("<child> waits: …"). It logs how many waited (under traffic with a
// fixed target, usually none) and how long after the start of the check
// that answered the reason came: a long poll (batch.horizon_poll) answers
// only at its end, so a waiting command is silent until then.
func checkWaitsSaid(t *testing.T, ctx context.Context, c client.Client, id string, procs ...*reckonProc) {
	t.Helper()
	var children []*commonpb.WorkflowExecution
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		if a := e.GetChildWorkflowExecutionStartedEventAttributes(); a != nil {
			children = append(children, a.GetWorkflowExecution())
		}
	}
	waited, said := 0, 0
	for _, ch := range children {
		asked, from, until := horizonWait(t, ctx, c, ch)
		if from.IsZero() || until.Sub(from) <= replyWithin {
			continue
		}
		waited++
		var attached *reckonProc
		for _, p := range procs {
			if !p.started.After(from) && !p.exitedAt.Before(from.Add(replyWithin)) {
				attached = p
			}
		}
		if attached == nil {
			t.Logf("%s waited for its horizon from %s for %v, while no command followed it", ch.GetWorkflowId(),
				from.UTC().Format(time.TimeOnly), until.Sub(from).Round(time.Second))
			continue
		}
		var at time.Time
		for _, l := range attached.out.since(from) {
			if strings.Contains(l.text, ch.GetWorkflowId()+" waits: ") {
				at = l.at
				break
			}
		}
		if at.IsZero() || at.Sub(from) > replyWithin {
			t.Errorf("%s waited for its horizon from %s for %v; reckon %s did not say so within %v (said at %s)",
				ch.GetWorkflowId(), from.UTC().Format(time.TimeOnly), until.Sub(from).Round(time.Second), attached.name,
				replyWithin, at.UTC().Format(time.TimeOnly))
			continue
		}
		said++
		t.Logf("%s waited for its horizon for %v; reckon %s said so %v after the check answered, %v after it began",
			ch.GetWorkflowId(), until.Sub(from).Round(time.Second), attached.name, at.Sub(from).Round(10*time.Millisecond),
			at.Sub(asked).Round(10*time.Millisecond))
	}
	t.Logf("%s: %d recomputes, %d waited for their horizon longer than %v, %d of them said in time",
		id, len(children), waited, replyWithin, said)
}

// horizonWait reads a recompute's history: when its first horizon check
// that was not ready was scheduled and when it completed, and when the
// next ready one completed (or the recompute closed; now if neither).
// Zero when no check waited.
func horizonWait(t *testing.T, ctx context.Context, c client.Client, ex *commonpb.WorkflowExecution) (
	asked, from, until time.Time) {
	t.Helper()
	checks := map[int64]time.Time{} // CheckHorizon scheduled: event id → time
	it := c.GetWorkflowHistory(ctx, ex.GetWorkflowId(), ex.GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", ex.GetWorkflowId(), err)
		}
		at := e.GetEventTime().AsTime()
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "CheckHorizon" {
			checks[e.GetEventId()] = at
		}
		if a := e.GetActivityTaskCompletedEventAttributes(); a != nil && !checks[a.GetScheduledEventId()].IsZero() {
			var h activities.HorizonResult
			if err := converter.GetDefaultDataConverter().FromPayloads(a.GetResult(), &h); err != nil {
				t.Fatalf("%s: horizon result: %v", ex.GetWorkflowId(), err)
			}
			switch {
			case !h.Ready && from.IsZero():
				asked, from = checks[a.GetScheduledEventId()], at
			case h.Ready && !from.IsZero() && until.IsZero():
				until = at
			}
		}
		closed := e.GetWorkflowExecutionCompletedEventAttributes() != nil || e.GetWorkflowExecutionFailedEventAttributes() != nil ||
			e.GetWorkflowExecutionContinuedAsNewEventAttributes() != nil || e.GetWorkflowExecutionCanceledEventAttributes() != nil ||
			e.GetWorkflowExecutionTerminatedEventAttributes() != nil || e.GetWorkflowExecutionTimedOutEventAttributes() != nil
		if closed && !from.IsZero() && until.IsZero() {
			until = at
		}
	}
	if !from.IsZero() && until.IsZero() {
		until = time.Now()
	}
	return asked, from, until
}

var metricsURL = regexp.MustCompile(`msg=metrics url=(\S+)`)

// waitMetricsURL returns the /metrics URL the component last logged
// after since.
func (p *reckonProc) waitMetricsURL(t *testing.T, component string, since time.Time) string {
	t.Helper()
	var url string
	waitFor(t, 2*time.Minute, component+" to serve /metrics", func() (bool, string) {
		for _, l := range p.out.since(since) {
			if strings.HasPrefix(l.text, fmt.Sprintf("%-9s| ", component)) {
				if m := metricsURL.FindStringSubmatch(l.text); m != nil {
					url = m[1]
				}
			}
		}
		return url != "", ""
	})
	return url
}

// waitStreamProcessed waits until the stream worker has counted records.
func (p *reckonProc) waitStreamProcessed(t *testing.T, ctx context.Context) {
	t.Helper()
	url := p.waitMetricsURL(t, "stream", p.started)
	waitFor(t, 2*time.Minute, "the stream worker to count records", func() (bool, string) {
		m := scrapeMetrics(t, ctx, url)
		var n float64
		for k, v := range m {
			if strings.HasPrefix(k, "reckon_stream_records_total{") {
				n += v
			}
		}
		return n > 0, fmt.Sprintf("%v records", n)
	})
}

// killAndTimeReassign SIGKILLs the stream worker and returns how long it
// took until its restarted successor logged a partition assigned.
func (p *reckonProc) killAndTimeReassign(t *testing.T, runDir string) time.Duration {
	t.Helper()
	at := time.Now()
	killPid(t, filepath.Join(runDir, "stream.pid"))
	var took time.Duration
	waitFor(t, 3*time.Minute, "the restarted stream worker to be assigned a partition", func() (bool, string) {
		for _, l := range p.out.since(at) {
			if strings.HasPrefix(l.text, "stream   | ") && strings.Contains(l.text, "msg=\"partition assigned\"") {
				took = l.at.Sub(at)
				return true, ""
			}
		}
		return false, ""
	})
	return took
}

// killPid SIGKILLs the process whose pid the file holds.
func killPid(t *testing.T, pidFile string) {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

// timedLines records lines with the time each arrived; safe for
// concurrent use.
type timedLines struct {
	mu    sync.Mutex // protects lines
	lines []timedLine
}

type timedLine struct {
	at   time.Time
	text string
}

func (l *timedLines) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		l.mu.Lock()
		l.lines = append(l.lines, timedLine{time.Now(), sc.Text()})
		l.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, r)
}

func (l *timedLines) since(t time.Time) []timedLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []timedLine
	for _, x := range l.lines {
		if !x.at.Before(t) {
			out = append(out, x)
		}
	}
	return out
}

func (l *timedLines) text() string {
	var b strings.Builder
	for _, x := range l.since(time.Time{}) {
		b.WriteString(x.text)
		b.WriteByte('\n')
	}
	return b.String()
}
