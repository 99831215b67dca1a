// Command benchinstr measures reckon's hot paths in instructions: each
// target's benchmark runs under `valgrind --tool=callgrind` at two
// iteration counts, and instructions per op are ΔI/ΔN, so the setup a
// benchmark does before timing (filling the dedup set, building records)
// cancels out. Callgrind counts the instructions the process executes, not
// time: the figure does not move with the machine's load, so a change in
// it is a change in the code (docs/adr/0042-benchmark-protocol.md).
// GODEBUG=asyncpreemptoff=1 keeps the runtime's preemption signals, which
// depend on timing, out of the count.
//
// It prints go test -bench lines (package reckon/tools/benchinstr) that
// tools/benchreport reads: `make bench-instr` alone, and a step of
// `make bench`.
//
//	go run ./tools/benchinstr [-only hot-path] [-scale 1]
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Target is one benchmark measured in instructions.
type Target struct {
	// Name is the sub-benchmark of BenchmarkInstr it is reported as.
	Name string
	// Pkg is the package (a path the go command takes), Bench the
	// -test.bench pattern selecting exactly one benchmark.
	Pkg, Bench string
	// PerOp is how many units one benchmark op processes (rows in an
	// archive batch), Unit what the figure counts per unit.
	PerOp int
	Unit  string
	// N1 < N2 are the two iteration counts.
	N1, N2 int
}

// Targets are the hot paths of issue 30: the stream's (decode + gate +
// dedup + window), its parts, and the archive's whole path.
var Targets = []Target{
	{Name: "hot-path", Pkg: "./streaming/operator", Bench: `^BenchmarkOperatorHotPath$/^decode\+gate\+dedup=1M\+window$`,
		PerOp: 1, Unit: "instr/event", N1: 50_000, N2: 150_000},
	{Name: "dedup+window", Pkg: "./streaming/operator", Bench: `^BenchmarkOperatorHotPath$/^dedup=1M\+window$`,
		PerOp: 1, Unit: "instr/event", N1: 50_000, N2: 150_000},
	{Name: "gate-check", Pkg: "./internal/event", Bench: `^BenchmarkGateCheck$`,
		PerOp: 1, Unit: "instr/event", N1: 50_000, N2: 150_000},
	{Name: "archive", Pkg: "./lake", Bench: `^BenchmarkArchiveBatch$`,
		PerOp: 200_000, Unit: "instr/row", N1: 1, N2: 3},
}

func main() {
	only := flag.String("only", "", "measure only the targets whose name contains this")
	scale := flag.Float64("scale", 1, "multiply the iteration counts (keep N1 < N2)")
	valgrind := flag.String("valgrind", "valgrind", "the valgrind binary")
	flag.Parse()
	bin, err := os.MkdirTemp("", "benchinstr")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(bin)
	start := time.Now()
	fmt.Println("goos: linux")
	fmt.Println("pkg: reckon/tools/benchinstr")
	failed := false
	built := map[string]string{}
	for _, t := range Targets {
		if !strings.Contains(t.Name, *only) {
			continue
		}
		t.N1, t.N2 = max(1, int(float64(t.N1)**scale)), max(2, int(float64(t.N2)**scale))
		exe, ok := built[t.Pkg]
		if !ok {
			exe = filepath.Join(bin, strings.NewReplacer("/", "_", ".", "_").Replace(t.Pkg)+".test")
			if out, err := exec.Command("go", "test", "-c", "-o", exe, t.Pkg).CombinedOutput(); err != nil {
				fmt.Printf("--- FAIL: BenchmarkInstr/%s\n    go test -c %s: %v\n    %s\n", t.Name, t.Pkg, err, indent(out))
				failed = true
				continue
			}
			built[t.Pkg] = exe
		}
		m, err := Measure(context.Background(), *valgrind, exe, t)
		if err != nil {
			fmt.Printf("--- FAIL: BenchmarkInstr/%s\n    %v\n", t.Name, err)
			failed = true
			continue
		}
		fmt.Printf("BenchmarkInstr/%s\t%d\t%.0f %s\t%d instr-at-n1\t%d instr-at-n2\n", t.Name, t.N2-t.N1, m.PerUnit, t.Unit, m.I1, m.I2)
	}
	if failed {
		fmt.Printf("FAIL\treckon/tools/benchinstr\t%.1fs\n", time.Since(start).Seconds())
		os.Exit(1)
	}
	fmt.Println("PASS")
	fmt.Printf("ok  \treckon/tools/benchinstr\t%.1fs\n", time.Since(start).Seconds())
}

// Measurement is a target's two counts and the figure from them.
type Measurement struct {
	I1, I2  int64   // instructions of the whole process at N1 and N2
	PerUnit float64 // (I2 − I1) / (N2 − N1) / PerOp
}

// Measure runs t's benchmark binary exe under callgrind at N1 and N2.
func Measure(ctx context.Context, valgrind, exe string, t Target) (Measurement, error) {
	if t.N1 >= t.N2 || t.PerOp <= 0 {
		return Measurement{}, fmt.Errorf("%s: need N1 < N2 and PerOp > 0 (%d, %d, %d)", t.Name, t.N1, t.N2, t.PerOp)
	}
	var m Measurement
	for i, n := range []int{t.N1, t.N2} {
		c, err := Count(ctx, valgrind, exe, t.Pkg, t.Bench, n)
		if err != nil {
			return m, fmt.Errorf("%s at %dx: %w", t.Name, n, err)
		}
		if i == 0 {
			m.I1 = c
		} else {
			m.I2 = c
		}
	}
	var err error
	m.PerUnit, err = PerUnit(m.I1, m.I2, t.N1, t.N2, t.PerOp)
	return m, err
}

// PerUnit is the instructions per unit from two whole-process counts.
func PerUnit(i1, i2 int64, n1, n2, perOp int) (float64, error) {
	if i2 <= i1 {
		return 0, fmt.Errorf("%d instructions at %dx, %d at %dx: more iterations must execute more", i1, n1, i2, n2)
	}
	return float64(i2-i1) / float64(n2-n1) / float64(perOp), nil
}

// collected is callgrind's total: "==123== Collected : 52910138".
var collected = regexp.MustCompile(`(?m)^==\d+== Collected : (\d+)\s*$`)

// ParseCollected reads the instruction count from callgrind's stderr.
func ParseCollected(stderr []byte) (int64, error) {
	m := collected.FindSubmatch(stderr)
	if m == nil {
		return 0, errors.New("no \"Collected :\" line in callgrind's output")
	}
	return strconv.ParseInt(string(m[1]), 10, 64)
}

// Count runs the benchmark bench of exe n times (-test.benchtime nx, one
// CPU) in dir (its package's directory, as go test would) under callgrind
// and returns the instructions the process executed.
func Count(ctx context.Context, valgrind, exe, dir, bench string, n int) (int64, error) {
	cmd := exec.CommandContext(ctx, valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null",
		exe, "-test.run", "^$", "-test.bench", bench, "-test.benchtime", strconv.Itoa(n)+"x", "-test.cpu", "1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GODEBUG=asyncpreemptoff=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%v: %s%s", err, indent(stdout.Bytes()), indent(stderr.Bytes()))
	}
	if !bytes.Contains(stdout.Bytes(), []byte("Benchmark")) || bytes.Contains(stdout.Bytes(), []byte("--- FAIL")) {
		return 0, fmt.Errorf("the benchmark did not run: %s", indent(stdout.Bytes()))
	}
	return ParseCollected(stderr.Bytes())
}

func indent(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	return strings.ReplaceAll(s, "\n", "\n    ")
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "benchinstr:", err)
	os.Exit(1)
}
