// Command chaos is `make chaos` (docs/requirements.md R-PROOF-3): it runs
// the dev stack (`reckon
// dev`) on loopback with a temporary data dir and lake, produces a finite
// payments run with a manifest at a steady rate, SIGKILLs the stream
// component 3×, the batch component 2×, the Temporal dev server once and
// the broker once at random points (the dev supervisor restarts them), lets
// everything settle, runs the reconciliation for the traffic's date(s) and
// then `reckon verify --truth`. It prints what was killed when, the ledger,
// and a final line `chaos: N passed, M failed`; it exits non-zero on any
// failure. With -lake-faults R (make chaos CHAOS_ARGS='-lake-faults 0.05')
// the stack's lake storage also fails, stalls or loses the answer of a
// fraction R of its calls (docs/adr/0022-lake-fault-injection.md).
//
// Run from the module root: go run ./tools/chaos -bin bin/reckon -temporal bin/temporal
//
// Known gaps, stated rather than hidden:
//   - The dev broker is kfake with a data dir and without SyncWrites: each
//     produced batch is written to its segment file (write(2), no user-space
//     buffer) before the ack, so a SIGKILL of the broker process keeps every
//     acknowledged record in the page cache; only a machine crash could lose
//     them. This run kills processes, not the machine.
//   - The stream windows are shortened (1m window and lateness, 20s idle
//     timeout, written to a temporary config; gate.max_future_skew 30s in
//     proportion) so a run fits in minutes.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"reckon/internal/config"
	"reckon/streaming"
)

type kill struct {
	at   time.Duration // after the generator started
	name string
	pid  int
	err  error
	back time.Duration // until the supervisor restarted it (0: not seen)
}

type result struct {
	name string
	err  error
}

func main() {
	bin := flag.String("bin", "bin/reckon", "reckon binary")
	temporalBin := flag.String("temporal", "bin/temporal", "Temporal CLI (dev server)")
	base := flag.String("config", "deploy/reckon.yaml", "base configuration; the payments windows are shortened in a temporary copy")
	count := flag.Int64("count", 1800, "records the generator produces")
	rate := flag.Float64("rate", 10, "generator rate, events per second (paced on the wall clock)")
	seed := flag.Int64("seed", 0, "random seed of the kill schedule and the generator (0: from the clock)")
	budget := flag.Duration("timeout", 12*time.Minute, "give up after this long")
	keep := flag.Bool("keep", false, "keep the temporary directory")
	lakeFaults := flag.Float64("lake-faults", 0, "fraction of the dev stack's lake storage calls that fail on purpose (lake.faults.rate, docs/adr/0022-lake-fault-injection.md); 0: none. The reconcile and verify commands read the lake without faults")
	flag.Parse()
	if *lakeFaults < 0 || *lakeFaults > 1 {
		fmt.Fprintf(os.Stderr, "chaos: -lake-faults %v outside 0..1\n", *lakeFaults)
		os.Exit(2)
	}
	if *seed == 0 {
		*seed = time.Now().UnixNano() % 1_000_000
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *budget)
	defer cancel()
	code := run(ctx, *bin, *temporalBin, *base, *count, *rate, *seed, *lakeFaults, *keep)
	os.Exit(code)
}

func say(format string, a ...any) {
	fmt.Printf("chaos %s  "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, a...)...)
}

func run(ctx context.Context, bin, temporalBin, base string, count int64, rate float64, seed int64, lakeFaults float64, keep bool) int {
	var results []result
	check := func(name string, err error) bool {
		results = append(results, result{name, err})
		if err != nil {
			say("FAIL %s: %v", name, err)
		} else {
			say("ok   %s", name)
		}
		return err == nil
	}
	finish := func() int {
		failed := 0
		for _, r := range results {
			if r.err != nil {
				failed++
			}
		}
		fmt.Printf("chaos: %d passed, %d failed\n", len(results)-failed, failed)
		if failed > 0 {
			return 1
		}
		return 0
	}
	var err error
	for _, p := range []*string{&bin, &temporalBin, &base} {
		if *p, err = filepath.Abs(*p); err != nil {
			check("setup", err)
			return finish()
		}
	}
	dir, err := os.MkdirTemp("", "reckon-chaos-")
	if err != nil {
		check("setup", err)
		return finish()
	}
	if keep {
		say("data in %s (kept)", dir)
	} else {
		// A failed run keeps its data (dev.log, the lake) for diagnosis.
		defer func() {
			for _, r := range results {
				if r.err != nil {
					say("data in %s (kept: the run failed)", dir)
					return
				}
			}
			os.RemoveAll(dir)
		}()
	}
	cfgPath, sets, err := writeConfig(base, dir)
	if err != nil {
		check("setup", err)
		return finish()
	}
	setArgs := func(args ...string) []string {
		out := append([]string{}, args...)
		out = append(out, "--config", cfgPath)
		for _, s := range sets {
			out = append(out, "--set", s)
		}
		return out
	}
	cfg, err := config.Load(cfgPath, nil, sets)
	if err != nil {
		check("setup", err)
		return finish()
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 8))
	say("seed %d, dir %s, broker %s, temporal %s", seed, dir, cfg.Kafka.Brokers[0], cfg.Temporal.Address)
	// Storage faults go to the dev stack only (its children inherit its
	// --set): the stack must get past them, and the checks after it read
	// the lake as it is.
	devArgs := setArgs("dev", "--without", "generate,ofd")
	if lakeFaults > 0 {
		devArgs = append(devArgs, "--set", "lake.faults.rate="+strconv.FormatFloat(lakeFaults, 'f', -1, 64), "--set", "lake.faults.seed="+strconv.FormatInt(seed, 10))
		say("lake storage faults: %g of the stack's lake calls fail, stall or lose their answer (seed %d)", lakeFaults, seed)
	}

	// The dev stack, without its forever generators and the OFD simulator.
	devLog, err := os.Create(filepath.Join(dir, "dev.log"))
	if err != nil {
		check("setup", err)
		return finish()
	}
	defer devLog.Close()
	dev := exec.Command(bin, devArgs...)
	dev.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	pr, pw := io.Pipe()
	dev.Stdout, dev.Stderr = pw, pw
	up := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		closed := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(devLog, line)
			if strings.Contains(line, "reckon dev: up.") && !closed {
				close(up)
				closed = true
			}
			if strings.HasPrefix(line, "reckon dev:") && !strings.Contains(line, "topics:") {
				say("%s", line)
			}
		}
	}()
	if err := dev.Start(); err != nil {
		check("dev stack up", err)
		return finish()
	}
	devDone := make(chan error, 1)
	go func() { devDone <- dev.Wait(); pw.Close() }()
	defer func() {
		// Stop the stack gracefully (SIGTERM to the supervisor only), then
		// hard after a grace period.
		_ = dev.Process.Signal(syscall.SIGTERM)
		select {
		case <-devDone:
		case <-time.After(45 * time.Second):
			_ = syscall.Kill(-dev.Process.Pid, syscall.SIGKILL)
			<-devDone
		}
	}()
	select {
	case <-up:
		check("dev stack up", nil)
	case err := <-devDone:
		check("dev stack up", fmt.Errorf("reckon dev exited: %v (see %s)", err, devLog.Name()))
		return finish()
	case <-time.After(3 * time.Minute):
		check("dev stack up", errors.New("not up after 3m"))
		return finish()
	case <-ctx.Done():
		check("dev stack up", ctx.Err())
		return finish()
	}

	// The finite, paced generator run with a manifest.
	manifest := filepath.Join(dir, "manifest.json")
	genOut, err := os.Create(filepath.Join(dir, "generate.log"))
	if err != nil {
		check("setup", err)
		return finish()
	}
	defer genOut.Close()
	gen := exec.CommandContext(ctx, bin, setArgs("generate", "--scenario", "payments",
		"--count", strconv.FormatInt(count, 10), "--rate", strconv.FormatFloat(rate, 'f', -1, 64),
		"--seed", strconv.FormatInt(seed, 10), "--start", "now", "--pace", "on",
		"--delay-dist", "exp:15s", "--redelivery-delay", "10s", "--wait", "2m",
		"--manifest", manifest)...)
	gen.Stdout, gen.Stderr = genOut, genOut
	gen.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	t0 := time.Now()
	day0 := t0.UTC().Format(time.DateOnly)
	if err := gen.Start(); err != nil {
		check("generator", err)
		return finish()
	}
	genDone := make(chan error, 1)
	go func() { genDone <- gen.Wait() }()
	say("generator: %d payments at %g/s (~%v of traffic plus the late tail)", count, rate, time.Duration(float64(count)/rate*float64(time.Second)).Round(time.Second))

	// The kill schedule: random points over the traffic, at least 12s apart
	// so each restart is under way before the next kill.
	span := time.Duration(float64(count) / rate * float64(time.Second))
	names := []string{"stream", "stream", "stream", "batch", "batch", "temporal", "broker"}
	rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	kills := schedule(rng, names, 10*time.Second, span, 12*time.Second)
	runDir := filepath.Join(cfg.Dev.Dir, "run")
	for i := range kills {
		k := &kills[i]
		select {
		case <-time.After(time.Until(t0.Add(k.at))):
		case <-ctx.Done():
			k.err = ctx.Err()
			continue
		}
		k.pid, k.err = readPid(runDir, k.name)
		if k.err == nil {
			k.err = syscall.Kill(k.pid, syscall.SIGKILL)
		}
		if k.err != nil {
			say("kill %-8s at t+%v: %v", k.name, k.at.Round(time.Second), k.err)
			continue
		}
		say("killed %-8s at t+%v (pid %d)", k.name, k.at.Round(time.Second), k.pid)
		// Wait for the supervisor's restart: a new pid in the pid file.
		back := time.Now()
		for time.Since(back) < 60*time.Second && ctx.Err() == nil {
			if p, err := readPid(runDir, k.name); err == nil && p != k.pid && alive(p) {
				k.back = time.Since(back)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if k.back == 0 {
			k.err = fmt.Errorf("not restarted within 60s")
		} else {
			say("%s restarted after %v", k.name, k.back.Round(100*time.Millisecond))
		}
	}
	for _, k := range kills {
		check(fmt.Sprintf("kill -9 %s at t+%v and restart", k.name, k.at.Round(time.Second)), k.err)
	}

	select {
	case err := <-genDone:
		if err == nil {
			err = manifestComplete(manifest)
		}
		check("generator finished, manifest complete", err)
		if err != nil {
			b, _ := os.ReadFile(genOut.Name())
			fmt.Printf("%s\n", tail(string(b), 20))
		}
	case <-ctx.Done():
		check("generator finished", ctx.Err())
		return finish()
	}
	say("generator done after %v", time.Since(t0).Round(time.Second))

	// Settle: the stream consumes everything.
	sctx, scancel := context.WithTimeout(ctx, 2*time.Minute)
	err = streaming.WaitCaughtUp(sctx, cfg)
	scancel()
	check("stream caught up", err)

	// Reconcile every date the traffic touched (today, and yesterday when
	// the run crossed midnight), waiting for the report.
	days := []string{day0}
	if d := time.Now().UTC().Format(time.DateOnly); d != day0 {
		days = append(days, d)
	}
	for _, d := range days {
		out, err := runCmd(ctx, bin, setArgs("reconcile", "--date", d, "--wait")...)
		fmt.Print(indent(out))
		check("reconcile "+d, err)
	}

	out, err := runCmd(ctx, bin, setArgs("verify", "--manifest", manifest, "--truth")...)
	fmt.Print(indent(out))
	check("verify --truth (conserved: produced = accepted + late + dead-lettered + duplicates; closed windows = truth)", err)

	if lakeFaults > 0 {
		injected := strings.Count(readFileString(devLog.Name()), "lake: injected ")
		say("lake faults named in the stack's log: %d (faults the lake gave up retrying: each failed an activity attempt, which Temporal retried)", injected)
	}
	fmt.Println("kills:")
	for _, k := range kills {
		status := "restarted after " + k.back.Round(100*time.Millisecond).String()
		if k.err != nil {
			status = k.err.Error()
		}
		fmt.Printf("  t+%-5v %-8s pid %-7d %s\n", k.at.Round(time.Second), k.name, k.pid, status)
	}
	return finish()
}

// writeConfig writes a copy of base with the payments stream's windows
// shortened, and returns it with the loopback ports and dirs as --set
// overrides.
func writeConfig(base, dir string) (string, []string, error) {
	b, err := os.ReadFile(base)
	if err != nil {
		return "", nil, err
	}
	s := string(b)
	old := "    window: 5m\n    out_of_orderness: 5s\n    allowed_lateness: 5m\n    idle_timeout: 1m\n"
	if strings.Count(s, old) != 1 {
		return "", nil, fmt.Errorf("%s: payments stream block not found as expected", base)
	}
	s = strings.Replace(s, old, "    window: 1m\n    out_of_orderness: 5s\n    allowed_lateness: 1m\n    idle_timeout: 20s\n", 1)
	path := filepath.Join(dir, "reckon.yaml")
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		return "", nil, err
	}
	ports, err := freePorts(6)
	if err != nil {
		return "", nil, err
	}
	temporalBin, _ := filepath.Abs(flag.Lookup("temporal").Value.String())
	sets := []string{
		"dev.dir=" + filepath.Join(dir, "dev"),
		"lake.root=" + filepath.Join(dir, "lake"),
		"dev.kafka_port=" + strconv.Itoa(ports[0]),
		"dev.temporal_port=" + strconv.Itoa(ports[1]),
		"dev.ui_port=" + strconv.Itoa(ports[2]),
		"dev.temporal_bin=" + temporalBin,
		"dev.generate_rate=0",
		"metrics.addr=127.0.0.1:" + strconv.Itoa(ports[3]),
		"zreport.ofd_url=http://127.0.0.1:" + strconv.Itoa(ports[4]),
		// The SQL endpoint too: a run must not take (or fail on) the
		// default port of a `reckon dev` beside it.
		"sql.listen=127.0.0.1:" + strconv.Itoa(ports[5]),
		"kafka.brokers=127.0.0.1:" + strconv.Itoa(ports[0]),
		"temporal.address=127.0.0.1:" + strconv.Itoa(ports[1]),
		"batch.horizon_poll=5s",
		"batch.horizon_wait=5m",
		// Skewed (future, yet accepted) events end the reconciled range up
		// to 0.8 max_future_skew past the traffic, and the horizon waits
		// for the stream's watermark to pass that plus the lateness: with
		// the default 5m the horizon wait above races it (a run missed it
		// by seconds). Scaled with the windows, as the header says.
		"gate.max_future_skew=30s",
	}
	return path, sets, nil
}

// schedule spreads the kills over [from, to) at random, at least gap apart.
func schedule(rng *rand.Rand, names []string, from, to, gap time.Duration) []kill {
	need := gap * time.Duration(len(names))
	if to-from < need {
		to = from + need
	}
	slack := to - from - need
	var offs []time.Duration
	for range names {
		offs = append(offs, time.Duration(rng.Int64N(int64(slack)+1)))
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	kills := make([]kill, len(names))
	for i, n := range names {
		kills[i] = kill{at: from + offs[i] + gap*time.Duration(i), name: n}
	}
	return kills
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func readPid(runDir, name string) (int, error) {
	b, err := os.ReadFile(filepath.Join(runDir, name+".pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func readFileString(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func manifestComplete(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !strings.Contains(string(b), `"complete": true`) {
		return errors.New("manifest says the run stopped before --count")
	}
	return nil
}

func runCmd(ctx context.Context, bin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
