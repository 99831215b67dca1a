package workers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// proc is one supervised child process of `reckon dev`. The supervisor owns
// it: it starts the process, restarts it with backoff when it dies (killed
// with SIGKILL by an operator or by `make chaos`, or crashed), and stops it
// with SIGTERM (then SIGKILL after a grace period) when its context ends.
// While the file <run dir>/<name>.hold exists, a process that exited stays
// down (holdFile).
type proc struct {
	name  string
	path  string
	args  []string
	env   []string
	dir   string // working directory; "" = current
	quiet bool   // log to file only, not to the terminal
	// grace is how long a stopping process gets before SIGKILL. Default 15s.
	grace time.Duration

	logDir string
	runDir string
	out    io.Writer // terminal
	outMu  *sync.Mutex
	// holdChecks counts looks for the hold file, so a test can wait for
	// the supervisor to have looked again instead of sleeping.
	holdChecks atomic.Int64
}

// run supervises p until ctx ends. It returns after the last instance exited.
func (p *proc) run(ctx context.Context) {
	backoff := time.Second
	for restarts := 0; ; restarts++ {
		started := time.Now()
		err := p.once(ctx, restarts)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > 30*time.Second {
			backoff = time.Second
		}
		if p.held() {
			// A hold file keeps the component down until it is removed: an
			// operator's maintenance window, and how `make outages`
			// (tools/outages) holds a component down for minutes while
			// the rest of the stack runs on.
			p.say("exited (%v); held down while %s exists", errString(err), p.holdFile())
			for p.held() {
				select {
				case <-ctx.Done():
					return
				case <-time.After(holdPoll):
				}
			}
			backoff = time.Second
			p.say("hold released; restarting")
			continue
		}
		p.say("exited (%v); restarting in %v", errString(err), backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// holdPoll is how often a held component's supervisor looks for its hold
// file again.
const holdPoll = 500 * time.Millisecond

// holdFile is the file whose existence keeps p down after it exits: the
// supervisor does not restart it until the file is removed.
func (p *proc) holdFile() string { return filepath.Join(p.runDir, p.name+".hold") }

func (p *proc) held() bool {
	p.holdChecks.Add(1)
	_, err := os.Stat(p.holdFile())
	return err == nil
}

func errString(err error) string {
	if err == nil {
		return "status 0"
	}
	return err.Error()
}

func (p *proc) once(ctx context.Context, restarts int) error {
	logf, err := os.OpenFile(filepath.Join(p.logDir, p.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "---- %s start #%d at %s: %s %v\n", p.name, restarts, time.Now().UTC().Format(time.RFC3339), p.path,
		p.args)

	cmd := exec.Command(p.path, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Dir = p.dir
	// Own process group: a terminal Ctrl-C reaches only the supervisor,
	// which stops children in order. Pdeathsig: children die with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if !p.quiet {
				p.outMu.Lock()
				fmt.Fprintf(p.out, "%-9s| %s\n", p.name, line)
				p.outMu.Unlock()
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	if err := cmd.Start(); err != nil {
		pw.Close()
		<-copied
		return err
	}
	pidFile := filepath.Join(p.runDir, p.name+".pid")
	_ = os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
	if restarts > 0 {
		p.say("restarted (pid %d)", cmd.Process.Pid)
	}

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-done:
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM)
		grace := p.grace
		if grace == 0 {
			grace = 15 * time.Second
		}
		select {
		case werr = <-done:
		case <-time.After(grace):
			// SIGQUIT first: a Go process writes every goroutine's stack
			// to its log before it exits, which shows what it waited on.
			p.say("did not stop within %v; killing (goroutine stacks in %s)", grace, filepath.Join(p.logDir, p.name+".log"))
			_ = cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case werr = <-done:
			case <-time.After(2 * time.Second):
				_ = cmd.Process.Kill()
				werr = <-done
			}
		}
	}
	_ = os.Remove(pidFile)
	pw.Close()
	<-copied
	var ee *exec.ExitError
	if errors.As(werr, &ee) && ctx.Err() != nil {
		return nil
	}
	return werr
}

func (p *proc) say(format string, a ...any) {
	p.outMu.Lock()
	defer p.outMu.Unlock()
	fmt.Fprintf(p.out, "%-9s| reckon dev: "+format+"\n", append([]any{p.name}, a...)...)
}
