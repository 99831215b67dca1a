package workers

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"io"
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

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
	"reckon/internal/kafkaconn"
)

var walkthrough = flag.Bool("walkthrough", false, "run the operator walkthrough on real processes (make walkthrough)")

// replyWithin is how soon every waiting command must say what it waits for.
const replyWithin = 5 * time.Second

// TestOperatorWalkthrough is what a new operator does, on real processes
// (this test binary runs as `reckon`, TestMain): `reckon dev` → traffic →
// kill -9 the stream and the batch worker → Ctrl-C → `reckon dev` again →
// reconcile today (waits for the horizon) and yesterday → replay dry run
// of today → Ctrl-C. It asserts that no event_id repeats with a different
// payload across the two runs, that every waiting command (dev start-up,
// reconcile --wait, replay) says what it waits for within 5 s and what
// keeps running when interrupted, that a clean stop logs no ERROR, and
// that the batch metrics exist and move. It logs the stream's restart
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

	// Reconcile today: it waits for the horizon, says why, and on Ctrl-C
	// says what keeps running.
	m0 := scrapeMetrics(t, ctx, batchURL)
	rec := startReckon(t, "reconcile", append([]string{"--date", today, "--wait"}, setFlags(clientSets)...)...)
	rec.checkWaitSaysWhy(t, `waits: `)
	rec.interrupt(t)
	rec.requireLine(t, "stopped waiting; the reconcile keeps running in Temporal")

	// The batch metrics move: the reconcile's recomputes wait for the
	// horizon; Z-report keys arrive from the fiscal generator.
	waitFor(t, 2*time.Minute, "the batch metrics to move", func() (bool, string) {
		m := scrapeMetrics(t, ctx, batchURL)
		var waiting, checks0, checks, zkeys float64
		for k, v := range m {
			switch {
			case strings.HasPrefix(k, "reckon_batch_horizon_waiting{"):
				waiting += v
			case strings.HasPrefix(k, "reckon_batch_horizon_checks_total{") && strings.Contains(k, `result="waiting"`):
				checks += v
				checks0 += m0[k]
			case strings.HasPrefix(k, "reckon_batch_zreport_keys{"):
				zkeys += v
			}
		}
		return waiting > 0 && checks > checks0 && zkeys > 0,
			fmt.Sprintf("recomputes waiting %v, waiting horizon checks %v → %v, z-report keys %v", waiting, checks0, checks, zkeys)
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

	// A dry-run replay of today: the same waits, the same words.
	rep := startReckon(t, "replay", append([]string{"--from", today, "--to", today, "--dry-run", "--progress-interval", "1s"}, setFlags(clientSets)...)...)
	rep.checkWaitSaysWhy(t, `waits: `)
	rep.interrupt(t)
	rep.requireLine(t, "detached; the replay keeps running in Temporal")

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
	code    int
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
		p.code = cmd.ProcessState.ExitCode()
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

// checkWaitSaysWhy: the command's first line comes within replyWithin of
// its start and a line with what it waits for (want) within replyWithin
// of that.
func (p *reckonProc) checkWaitSaysWhy(t *testing.T, want string) {
	t.Helper()
	var firstAt time.Time
	waitFor(t, time.Minute, "reckon "+p.name+" to say what it waits for", func() (bool, string) {
		ls := p.out.since(p.started)
		if len(ls) > 0 && firstAt.IsZero() {
			firstAt = ls[0].at
		}
		for _, l := range ls {
			if strings.Contains(l.text, want) {
				if d := l.at.Sub(firstAt); d > replyWithin {
					t.Errorf("reckon %s said what it waits for %v after its first line: %s", p.name, d.Round(10*time.Millisecond), l.text)
				}
				t.Logf("reckon %s: first line after %v, the reason %v later: %s", p.name, firstAt.Sub(p.started).Round(10*time.Millisecond), l.at.Sub(firstAt).Round(10*time.Millisecond), l.text)
				return true, ""
			}
		}
		return false, p.out.text()
	})
	if d := firstAt.Sub(p.started); d > replyWithin {
		t.Errorf("reckon %s said nothing for %v after its start", p.name, d.Round(10*time.Millisecond))
	}
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
