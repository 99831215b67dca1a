// Package devstack runs the dev stack (`reckon dev`) on loopback for the
// end-to-end tools (tools/chaos, tools/outages): free ports, a temporary
// data dir and lake, a configuration with the payments windows shortened,
// the paced payments and fiscal generators with a manifest, and the run's
// ledger of checks. It is not for production code nor for `go test`: it starts real
// processes and prints to stdout.
package devstack

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"reckon/internal/config"
)

// Report is a run's ledger of checks; Say prefixes lines with its name and
// the UTC time. Not safe for concurrent use.
type Report struct {
	Name    string // "chaos", "outages": the prefix of every line
	Results []Result
}

// Result is one check.
type Result struct {
	Name string
	Err  error
}

// Say prints one timestamped line.
func (r *Report) Say(format string, a ...any) {
	fmt.Printf("%s %s  "+format+"\n", append([]any{r.Name, time.Now().UTC().Format("15:04:05")}, a...)...)
}

// Check records a check and prints it; it reports whether it passed.
func (r *Report) Check(name string, err error) bool {
	r.Results = append(r.Results, Result{name, err})
	if err != nil {
		r.Say("FAIL %s: %v", name, err)
	} else {
		r.Say("ok   %s", name)
	}
	return err == nil
}

// Failed is the number of failed checks.
func (r *Report) Failed() int {
	n := 0
	for _, c := range r.Results {
		if c.Err != nil {
			n++
		}
	}
	return n
}

// Finish prints `<name>: N passed, M failed` and returns the exit code.
func (r *Report) Finish() int {
	failed := r.Failed()
	fmt.Printf("%s: %d passed, %d failed\n", r.Name, len(r.Results)-failed, failed)
	if failed > 0 {
		return 1
	}
	return 0
}

// Stack is one run's dev stack: its configuration (a temporary copy with
// loopback ports and dirs as --set overrides) and the `reckon dev` process.
type Stack struct {
	Bin     string // reckon binary, absolute
	Dir     string // the run's temporary directory
	CfgPath string
	Sets    []string
	Cfg     *config.Config
	RunDir  string // the supervisor's pid (and hold) files
	LogPath string // dev.log: everything `reckon dev` printed

	dev     *exec.Cmd
	devDone chan error
	logFile *os.File
}

// NewStack writes the run's configuration into dir (see WriteConfig) and
// loads it; extraSets are appended to its overrides.
func NewStack(bin, temporalBin, base, dir string, extraSets ...string) (*Stack, error) {
	cfgPath, sets, err := WriteConfig(base, dir, temporalBin)
	if err != nil {
		return nil, err
	}
	sets = append(sets, extraSets...)
	cfg, err := config.Load(cfgPath, nil, sets)
	if err != nil {
		return nil, err
	}
	return &Stack{Bin: bin, Dir: dir, CfgPath: cfgPath, Sets: sets, Cfg: cfg,
		RunDir: filepath.Join(cfg.Dev.Dir, "run"), LogPath: filepath.Join(dir, "dev.log")}, nil
}

// Args is args followed by the run's --config and --set flags.
func (s *Stack) Args(args ...string) []string {
	out := append([]string{}, args...)
	out = append(out, "--config", s.CfgPath)
	for _, kv := range s.Sets {
		out = append(out, "--set", kv)
	}
	return out
}

// Start runs `reckon` with devArgs (Args("dev", ...) and more) in its own
// process group, copies its output to LogPath, passes its "reckon dev:"
// lines (but the topic list) to say, and waits up to 3 minutes for "up".
func (s *Stack) Start(ctx context.Context, devArgs []string, say func(string, ...any)) error {
	var err error
	if s.logFile, err = os.Create(s.LogPath); err != nil {
		return err
	}
	s.dev = exec.Command(s.Bin, devArgs...)
	s.dev.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	pr, pw := io.Pipe()
	s.dev.Stdout, s.dev.Stderr = pw, pw
	up := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		closed := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(s.logFile, line)
			if strings.Contains(line, "reckon dev: up.") && !closed {
				close(up)
				closed = true
			}
			if strings.HasPrefix(line, "reckon dev:") && !strings.Contains(line, "topics:") {
				say("%s", line)
			}
		}
	}()
	if err := s.dev.Start(); err != nil {
		return err
	}
	s.devDone = make(chan error, 1)
	go func() { s.devDone <- s.dev.Wait(); pw.Close() }()
	select {
	case <-up:
		return nil
	case err := <-s.devDone:
		s.devDone <- err
		return fmt.Errorf("reckon dev exited: %v (see %s)", err, s.LogPath)
	case <-time.After(3 * time.Minute):
		return errors.New("not up after 3m")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stop stops the stack gracefully (SIGTERM to the supervisor only), then
// hard (its whole process group) after 45 seconds.
func (s *Stack) Stop() {
	if s.dev != nil && s.dev.Process != nil {
		_ = s.dev.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.devDone:
		case <-time.After(45 * time.Second):
			_ = syscall.Kill(-s.dev.Process.Pid, syscall.SIGKILL)
			<-s.devDone
		}
	}
	if s.logFile != nil {
		s.logFile.Close()
	}
}

// Pid is the pid of the stack's component name (its pid file).
func (s *Stack) Pid(name string) (int, error) { return ReadPid(s.RunDir, name) }

// Generator is a finite, paced payments run with a manifest.
type Generator struct {
	Manifest string
	LogPath  string
	Started  time.Time
	Done     chan error // receives the process's exit once
	log      *os.File
}

// StartGenerator starts `reckon generate` for count payments at rate per
// second, paced from now, with a manifest in the run's dir.
func (s *Stack) StartGenerator(ctx context.Context, count int64, rate float64, seed int64) (*Generator, error) {
	return s.startGenerator(ctx, "", "payments", count, rate,
		"--seed", strconv.FormatInt(seed, 10),
		"--delay-dist", "exp:15s", "--redelivery-delay", "10s")
}

// StartFiscal starts `reckon generate --scenario fiscal` for count parts at
// rate per second, paced from now, with its manifest in the run's dir
// (fiscal-manifest.json): the shifts of the drives the stack's simulated
// operator answers for (zreport.ofd_sim_generator_seed and _keys, as
// `reckon dev`'s fiscal generator), numbered from now's key slot with fresh
// event ids. ofdDelay, partDelay and redelivery are the mean delays of the
// OFD part, the DWH part (RMS: half) and a redelivery.
func (s *Stack) StartFiscal(ctx context.Context, count int64, rate float64, ofdDelay, partDelay, redelivery time.Duration) (*Generator, error) {
	return s.startGenerator(ctx, "fiscal-", "fiscal", count, rate,
		"--seed", strconv.FormatInt(s.Cfg.ZReport.OFDSimGeneratorSeed, 10), "--keys", strconv.Itoa(s.Cfg.ZReport.OFDSimGeneratorKeys),
		"--id-nonce", "random", "--first-key", "now",
		"--ofd-delay", ofdDelay.String(), "--part-delay", partDelay.String(), "--redelivery-delay", redelivery.String())
}

// startGenerator runs one paced, finite `reckon generate` with a manifest;
// prefix names its files in the run's dir.
func (s *Stack) startGenerator(ctx context.Context, prefix, scenario string, count int64, rate float64, args ...string) (*Generator, error) {
	g := &Generator{Manifest: filepath.Join(s.Dir, prefix+"manifest.json"), LogPath: filepath.Join(s.Dir, prefix+"generate.log"), Done: make(chan error, 1)}
	var err error
	if g.log, err = os.Create(g.LogPath); err != nil {
		return nil, err
	}
	args = append([]string{"generate", "--scenario", scenario,
		"--count", strconv.FormatInt(count, 10), "--rate", strconv.FormatFloat(rate, 'f', -1, 64),
		"--start", "now", "--pace", "on", "--wait", "2m", "--manifest", g.Manifest}, args...)
	cmd := exec.CommandContext(ctx, s.Bin, s.Args(args...)...)
	cmd.Stdout, cmd.Stderr = g.log, g.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	g.Started = time.Now()
	if err := cmd.Start(); err != nil {
		g.log.Close()
		return nil, err
	}
	go func() { err := cmd.Wait(); g.log.Close(); g.Done <- err }()
	return g, nil
}

// Await waits for the generator to end (or ctx), records the check name
// in rep — its exit and a complete manifest — and prints the tail of its
// log when it failed. It returns the check's error.
func (g *Generator) Await(ctx context.Context, rep *Report, name string) error {
	var err error
	select {
	case err = <-g.Done:
		if err == nil {
			err = ManifestComplete(g.Manifest)
		}
	case <-ctx.Done():
		err = ctx.Err()
	}
	rep.Check(name, err)
	if err != nil && ctx.Err() == nil {
		fmt.Printf("%s\n", Tail(ReadFileString(g.LogPath), 20))
	}
	return err
}

// WriteConfig writes a copy of base with the payments stream's windows
// shortened, and returns it with the loopback ports and dirs as --set
// overrides.
func WriteConfig(base, dir, temporalBin string) (string, []string, error) {
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
	ports, err := FreePorts(6)
	if err != nil {
		return "", nil, err
	}
	sets := []string{
		"dev.dir=" + filepath.Join(dir, "dev"),
		"lake.root=" + filepath.Join(dir, "lake"),
		"dev.kafka_port=" + strconv.Itoa(ports[0]),
		"dev.temporal_port=" + strconv.Itoa(ports[1]),
		"dev.ui_port=" + strconv.Itoa(ports[2]),
		"dev.temporal_bin=" + temporalBin,
		"dev.generate_rate=0",
		"metrics.addr=127.0.0.1:" + strconv.Itoa(ports[3]),
		// The OFD simulator's port (reckon dev points zreport.ofd_url at it).
		"dev.ofd_port=" + strconv.Itoa(ports[4]),
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

// FreePorts returns n loopback ports free at the time of the call.
func FreePorts(n int) ([]int, error) {
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

// ReadPid reads the pid file of component name in the supervisor's run dir.
func ReadPid(runDir, name string) (int, error) {
	b, err := os.ReadFile(filepath.Join(runDir, name+".pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// Alive reports whether process pid exists.
func Alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// ReadFileString is the file's content, or "" when it cannot be read.
func ReadFileString(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// ManifestComplete fails unless the generator's manifest says it produced
// its whole --count.
func ManifestComplete(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !strings.Contains(string(b), `"complete": true`) {
		return errors.New("manifest says the run stopped before --count")
	}
	return nil
}

// RunCmd runs bin with args and returns its combined output.
func RunCmd(ctx context.Context, bin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Indent indents every line of s by four spaces.
func Indent(s string) string {
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}

// Tail is the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
