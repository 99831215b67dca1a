package benchreport

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Run is one `make bench` run as read from its raw output: the text of
// several `go test -bench` invocations (with or without -v, any packages)
// plus the marker lines the Makefile writes around them.
type Run struct {
	// Start and End come from the start and end markers; zero if absent.
	Start, End time.Time
	// LoadBefore and LoadAfter are the 1, 5 and 15 minute load averages
	// at the markers, as /proc/loadavg prints them.
	LoadBefore, LoadAfter string
	// CPU is the first "cpu:" line go test printed.
	CPU string
	// Steps are the commands run, in order.
	Steps []Step
	// Benchmarks in order of first appearance.
	Benchmarks []*Benchmark
	// Packages in order of first appearance.
	Packages []*Package

	bench map[string]*Benchmark
	pkgs  map[string]*Package
}

// Step is one command of the run.
type Step struct {
	Command string
	Start   time.Time
	// Duration lasts until the next marker; zero if unknown.
	Duration time.Duration
	// Problems are output lines of the step that are no benchmark result
	// and say something went wrong outside any package's tests (the go
	// command's own errors, a shell error).
	Problems []string
}

// Benchmark is every result line of one benchmark.
type Benchmark struct {
	// Pkg is the import path of its package.
	Pkg string
	// Name is the full name, e.g. "BenchmarkHourly/duckdb", without the
	// -GOMAXPROCS suffix.
	Name string
	// Procs is the GOMAXPROCS suffix of the last result (1 when none).
	Procs   int
	Samples []Sample
	// Failed or Skipped, with the messages the benchmark logged.
	Failed, Skipped bool
	Output          []string
}

// ID is the benchmark's identity in a run: package path and name.
func (b *Benchmark) ID() string { return b.Pkg + "." + b.Name }

// Sample is one result line.
type Sample struct {
	// N is the number of iterations.
	N int64
	// Values by unit: "ns/op", "B/op", or any b.ReportMetric unit.
	Values map[string]float64
	// Units in the order the line gave them.
	Units []string
	// Step is the index in Run.Steps of the command that printed it; -1
	// before any step marker.
	Step int
}

// Package is one package's outcome.
type Package struct {
	Path   string
	Failed bool
	// Status is the go test summary line ("ok  \treckon/lake\t3.2s",
	// "FAIL\treckon/x [build failed]").
	Status string
	// Output explains a failure: build errors, a panic and its first
	// lines, or the messages of failed benchmarks.
	Output []string
}

// Benchmark returns the benchmark with the given ID (package path + "." +
// name), or nil.
func (r *Run) Benchmark(id string) *Benchmark { return r.bench[id] }

// Package returns the package with the given import path, or nil.
func (r *Run) Package(path string) *Package { return r.pkgs[path] }

// Marker lines the Makefile writes into the raw output.
const (
	markerPrefix = "reckon-bench: "
	markerStart  = "start"
	markerRun    = "run"
	markerEnd    = "end"
)

var (
	// "# reckon/lake [reckon/lake.test]": build errors follow.
	buildHeader = regexp.MustCompile(`^# (\S+)`)
	// "FAIL\treckon/x\t1.2s", "FAIL\treckon/x [build failed]", "ok  \treckon/x\t1.2s".
	summaryLine = regexp.MustCompile(`^(ok|FAIL)\s+(\S+)(\s.*)?$`)
	// "--- FAIL: BenchmarkX/sub (0.00s)" at any indentation.
	resultHeader = regexp.MustCompile(`^\s*--- (FAIL|SKIP): (Benchmark\S*)`)
	procsSuffix  = regexp.MustCompile(`-(\d+)$`)
)

// maxOutput bounds the lines kept per benchmark or package.
const maxOutput = 12

// Parse reads the raw output of a run. It never fails on unknown lines;
// it errors only when r does.
func Parse(r io.Reader) (*Run, error) {
	p := parser{run: &Run{bench: map[string]*Benchmark{}, pkgs: map[string]*Package{}}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		p.line(strings.TrimRight(sc.Text(), "\r"))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("benchreport: read raw output: %w", err)
	}
	p.endStep(p.run.End)
	return p.run, nil
}

type parser struct {
	run *Run
	pkg string // the package whose output this is ("pkg:" line)
	// announced is the last benchmark name (as printed) without a
	// result (-v announces every benchmark; without -v a result line can
	// be split by output the benchmark wrote while running).
	announced string
	// current is the benchmark running: the last one announced or with a
	// result (with -count, later runs are not announced again).
	current string
	// logged holds indented lines since current's last announcement or
	// result: in -v output a failed run's messages come before its
	// "--- FAIL" line.
	logged []string
	// attach receives the indented lines after a "--- FAIL/SKIP" header.
	attach *Benchmark
	// buildPkg is the package of a "# pkg" build error header.
	buildPkg string
	buildErr map[string][]string
	step     *Step
	// problemGoesOn: indented lines continue the step problem before them.
	problemGoesOn bool
}

func (p *parser) line(s string) {
	if rest, ok := strings.CutPrefix(s, markerPrefix); ok {
		p.marker(rest)
		return
	}
	indented := strings.HasPrefix(s, "    ") || strings.HasPrefix(s, "\t")
	if p.problemGoesOn && indented && p.pkg == "" {
		p.problem(strings.TrimSpace(s))
		return
	}
	p.problemGoesOn = false
	if p.attach != nil && indented {
		p.attach.Output = appendBounded(p.attach.Output, strings.TrimSpace(s))
		return
	}
	p.attach = nil
	if p.buildPkg != "" && s != "" && !summaryLine.MatchString(s) && !strings.HasPrefix(s, "Benchmark") {
		p.buildErr[p.buildPkg] = appendBounded(p.buildErr[p.buildPkg], s)
		return
	}
	p.buildPkg = ""
	if p.announced != "" {
		if sm, ok := parseSample(strings.TrimSpace(s)); ok { // the rest of a split result line
			p.addSample(p.pkg, p.announced, sm)
			return
		}
	}
	switch {
	case s == "":
	case strings.HasPrefix(s, "pkg: "):
		p.pkg = strings.TrimSpace(strings.TrimPrefix(s, "pkg: "))
		p.pkgOf(p.pkg)
	case strings.HasPrefix(s, "cpu: "):
		if p.run.CPU == "" {
			p.run.CPU = strings.TrimSpace(strings.TrimPrefix(s, "cpu: "))
		}
	case strings.HasPrefix(s, "goos: "), strings.HasPrefix(s, "goarch: "),
		s == "PASS", s == "FAIL", strings.HasPrefix(s, "exit status "), strings.HasPrefix(s, "=== "):
	case resultHeader.MatchString(s):
		m := resultHeader.FindStringSubmatch(s)
		b := p.benchOf(p.pkg, m[2])
		if m[1] == "FAIL" {
			b.Failed = true
		} else {
			b.Skipped = true
		}
		if trimProcs(m[2]) == trimProcs(p.current) {
			for _, l := range p.logged {
				b.Output = appendBounded(b.Output, l)
			}
		}
		p.logged = nil
		p.attach = b
	case strings.HasPrefix(s, "Benchmark"):
		p.benchLine(s)
	case indented:
		if p.current != "" {
			p.logged = appendLast(p.logged, strings.TrimSpace(s))
		}
	case buildHeader.MatchString(s):
		p.buildPkg = buildHeader.FindStringSubmatch(s)[1]
		if p.buildErr == nil {
			p.buildErr = map[string][]string{}
		}
	case summaryLine.MatchString(s):
		m := summaryLine.FindStringSubmatch(s)
		pk := p.pkgOf(m[2])
		pk.Status = s
		if m[1] == "FAIL" {
			pk.Failed = true
			for _, l := range p.buildErr[m[2]] {
				pk.Output = appendBounded(pk.Output, l)
			}
		}
		p.pkg, p.announced, p.current, p.logged = "", "", "", nil
	case strings.HasPrefix(s, "panic: "), strings.HasPrefix(s, "fatal error: "):
		if p.pkg != "" {
			pk := p.pkgOf(p.pkg)
			pk.Output = appendBounded(pk.Output, s)
			if p.current != "" {
				b := p.benchOf(p.pkg, p.current)
				b.Failed = true
				b.Output = appendBounded(b.Output, s)
			}
		} else {
			p.problem(s)
		}
	default:
		if p.pkg == "" && looksLikeProblem(s) {
			p.problem(s)
		}
	}
}

// benchLine handles a line starting with a benchmark name: a result, an
// announcement (name alone), a non-verbose failure ("name\t--- FAIL: …")
// or a name followed by output the benchmark wrote while running.
func (p *parser) benchLine(s string) {
	name, rest, _ := strings.Cut(s, "\t")
	name = strings.TrimSpace(name)
	if i := strings.IndexAny(name, " "); i >= 0 {
		name, rest = name[:i], name[i:]+"\t"+rest
	}
	rest = strings.TrimSpace(rest)
	if strings.HasPrefix(rest, "--- FAIL") || strings.HasPrefix(rest, "--- SKIP") {
		p.announced, p.current = name, name
		p.line(rest)
		return
	}
	if sm, ok := parseSample(rest); ok {
		p.addSample(p.pkg, name, sm)
		return
	}
	p.announced, p.current, p.logged = name, name, nil
	p.benchOf(p.pkg, name) // announced: it exists even if no result follows
}

// parseSample parses "N  v unit  v unit …".
func parseSample(s string) (Sample, bool) {
	f := strings.Fields(s)
	if len(f) < 3 || len(f)%2 == 0 {
		return Sample{}, false
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || n <= 0 {
		return Sample{}, false
	}
	sm := Sample{N: n, Values: map[string]float64{}}
	for i := 1; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return Sample{}, false
		}
		sm.Values[f[i+1]] = v
		sm.Units = append(sm.Units, f[i+1])
	}
	return sm, true
}

func (p *parser) addSample(pkg, name string, sm Sample) {
	p.current, p.announced, p.logged = name, "", nil
	sm.Step = -1
	if p.step != nil {
		sm.Step = len(p.run.Steps) - 1
	}
	b := p.benchOf(pkg, name)
	b.Samples = append(b.Samples, sm)
	if m := procsSuffix.FindStringSubmatch(name); m != nil {
		b.Procs, _ = strconv.Atoi(m[1])
	}
}

// trimProcs drops the -GOMAXPROCS suffix go test adds when it is not 1.
func trimProcs(name string) string {
	return procsSuffix.ReplaceAllString(name, "")
}

func (p *parser) benchOf(pkg, name string) *Benchmark {
	name = trimProcs(name)
	id := pkg + "." + name
	b := p.run.bench[id]
	if b == nil {
		b = &Benchmark{Pkg: pkg, Name: name, Procs: 1}
		p.run.bench[id] = b
		p.run.Benchmarks = append(p.run.Benchmarks, b)
	}
	return b
}

func (p *parser) pkgOf(path string) *Package {
	pk := p.run.pkgs[path]
	if pk == nil {
		pk = &Package{Path: path}
		p.run.pkgs[path] = pk
		p.run.Packages = append(p.run.Packages, pk)
	}
	return pk
}

func (p *parser) marker(rest string) {
	kind, rest, _ := strings.Cut(rest, " ")
	at, rest, _ := strings.Cut(rest, " ")
	t, _ := time.Parse(time.RFC3339, at)
	load := func() string {
		l, ok := strings.CutPrefix(rest, "load ")
		if !ok {
			return ""
		}
		return strings.Join(strings.Fields(l)[:min(3, len(strings.Fields(l)))], " ")
	}
	switch kind {
	case markerStart:
		p.run.Start, p.run.LoadBefore = t, load()
	case markerRun:
		p.endStep(t)
		p.run.Steps = append(p.run.Steps, Step{Command: rest, Start: t})
		p.step = &p.run.Steps[len(p.run.Steps)-1]
	case markerEnd:
		p.endStep(t)
		p.run.End, p.run.LoadAfter = t, load()
	}
	p.pkg, p.announced, p.current, p.logged, p.buildPkg = "", "", "", nil, ""
}

func (p *parser) endStep(at time.Time) {
	if p.step != nil && !at.IsZero() && !p.step.Start.IsZero() {
		p.step.Duration = at.Sub(p.step.Start)
	}
	p.step = nil
}

func (p *parser) problem(s string) {
	if p.step != nil {
		p.step.Problems = appendBounded(p.step.Problems, s)
		p.problemGoesOn = true
	}
}

// looksLikeProblem: output outside any package that says something went
// wrong (the go command, the shell, make).
func looksLikeProblem(s string) bool {
	for _, pre := range []string{"go: ", "make: ", "sh: ", "bash: ", "cd: ", "FAIL", "no Go files", "cannot find"} {
		if strings.HasPrefix(s, pre) {
			return true
		}
	}
	return strings.Contains(s, ": not found") || strings.Contains(s, "No such file")
}

func appendBounded(out []string, s string) []string {
	if len(out) >= maxOutput {
		return out
	}
	return append(out, s)
}

// appendLast keeps the last maxOutput lines: a failure's message is
// usually the last thing a benchmark logged.
func appendLast(out []string, s string) []string {
	if len(out) >= maxOutput {
		out = append(out[:0], out[1:]...)
	}
	return append(out, s)
}
