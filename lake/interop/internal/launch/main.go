// Command launch runs a command and writes what it took — wall time, CPU
// time (user + system) and peak resident set size — as JSON to the file
// named by -out; the command's standard streams are launch's. It is
// BenchmarkLakeQueryProcess's way to measure a child process.
//
// Why a launcher: Go starts a child with vfork semantics (CLONE_VM), and
// Linux, when the child execs, records the peak RSS of the memory it
// leaves — the parent's — as the child's maxrss. A benchmark process that
// built a lake would lend every child its own peak. launch is a small
// process: the peak it lends, a few MB, is written beside the child's as
// floor_kib, and a child's max_rss_kib never reads below it.
//
//	launch -out m.json -- reckon lake query …
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Measurement is what launch writes.
type Measurement struct {
	WallNS    int64 `json:"wall_ns"`
	CPUNS     int64 `json:"cpu_ns"`
	MaxRSSKiB int64 `json:"max_rss_kib"`
	FloorKiB  int64 `json:"floor_kib"`
}

func main() {
	out := flag.String("out", "", "file to write the measurement to (required)")
	flag.Parse()
	if err := run(*out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "launch:", err)
		os.Exit(1)
	}
}

func run(out string, argv []string) error {
	if out == "" || len(argv) == 0 {
		return errors.New("usage: launch -out FILE -- COMMAND [ARG…]")
	}
	// Not getrusage(RUSAGE_SELF): that holds what launch itself was lent
	// at its exec; VmHWM is the peak of its own memory.
	floor, err := vmHWM()
	if err != nil {
		return err
	}
	c := exec.Command(argv[0], argv[1:]...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	t0 := time.Now()
	err = c.Run()
	wall := time.Since(t0)
	if err != nil {
		return fmt.Errorf("%s: %w", argv[0], err)
	}
	ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return errors.New("no rusage for the child process")
	}
	b, err := json.Marshal(Measurement{
		WallNS:    wall.Nanoseconds(),
		CPUNS:     (c.ProcessState.UserTime() + c.ProcessState.SystemTime()).Nanoseconds(),
		MaxRSSKiB: ru.Maxrss, // KiB on Linux
		FloorKiB:  floor,
	})
	if err != nil {
		return err
	}
	return os.WriteFile(out, b, 0o644)
}

// vmHWM is this process's peak resident set size in KiB.
func vmHWM() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, errors.New("no VmHWM in /proc/self/status")
}
