package benchreport

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.md")

// testdata/trial.txt is the raw output of a real `make bench` at tiny
// scale (BENCH_N=10000 BENCH_ROWS=100000 BENCH_DAY_ROWS=100000
// ZREPORT_KEYS=50) on a loaded machine: every benchmark of the suite, one
// StreamLatency run failed, a benchmark the suite does not name
// (AggregateHourlyS3). testdata/small.txt is assembled from real output
// to hold every way a benchmark can go missing: a build failure, a go
// command error before any package ran, a failed sub-benchmark without
// -v, a timeout panic, a skip, and a result line split by the
// benchmark's own output. trial.txt also holds, as two steps of their own
// (marker times fitted into the run's), the real output of
// BenchmarkLakeQueryProcess (RECKON_BENCH_ROWS=100000),
// BenchmarkCompactPace (speed 10) and BenchmarkTimeToFinal (the full
// `make bench` of 2026-12-04) from later runs, and four calibration
// points (tools/calibrate, 200x, at the places `make bench` measures them)
// and a whole `go run ./tools/benchinstr` (callgrind, load ~38) from
// 2026-12-07.

func parseFile(t *testing.T, name string) *Run {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var testMachine = Machine{CPU: "AMD EPYC", Cores: 2, MemBytes: 24 << 30, OS: "Debian GNU/Linux 12 (bookworm), Linux 6.1", Go: "go1.26.8"}

func render(t *testing.T, r *Run) (string, Result) {
	t.Helper()
	var b bytes.Buffer
	res, err := Render(&b, r, Options{Command: "make bench", Raw: ".reckon/bench/raw.txt", Notes: "docs/benchmarks-notes.md", Machine: testMachine})
	if err != nil {
		t.Fatal(err)
	}
	return b.String(), res
}

func TestParse(t *testing.T) {
	r := parseFile(t, "small.txt")
	if want := time.Date(2026, 11, 29, 18, 20, 14, 0, time.UTC); !r.Start.Equal(want) || r.LoadBefore != "1.50 1.20 0.90" || r.LoadAfter != "2.10 1.40 1.00" {
		t.Errorf("start %v load %q → %q", r.Start, r.LoadBefore, r.LoadAfter)
	}
	if r.CPU != "Oxide Virtual Turin-like Processor" {
		t.Errorf("cpu %q", r.CPU)
	}
	if len(r.Steps) != 6 || r.Steps[0].Duration != 4*time.Second || r.Steps[5].Duration != 5*time.Second {
		t.Fatalf("steps %+v", r.Steps)
	}
	if p := r.Steps[2].Problems; len(p) == 0 || !strings.HasPrefix(p[0], "go: updates to go.mod needed") {
		t.Errorf("interop step problems %q", p)
	}

	gate := r.Benchmark("reckon/internal/event.BenchmarkGateCheck")
	if gate == nil || len(gate.Samples) != 2 || gate.Samples[1].Values["cpu-ns/op"] != 1153 || gate.Samples[0].N != 10000 {
		t.Fatalf("GateCheck %+v", gate)
	}
	if want := []string{"ns/op", "MB/s", "cpu-ns/op", "B/op", "allocs/op"}; !slices.Equal(gate.Samples[0].Units, want) {
		t.Errorf("units %q", gate.Samples[0].Units)
	}

	if pk := r.Package("reckon/streaming"); pk == nil || !pk.Failed || !strings.Contains(pk.Status, "[build failed]") ||
		len(pk.Output) == 0 || !strings.Contains(pk.Output[0], "undefined: benchEnv") {
		t.Errorf("streaming package %+v", pk)
	}
	if w := r.Benchmark("reckon/lake.BenchmarkWriteRaw/zstd=1"); w == nil || len(w.Samples) != 1 || w.Samples[0].Values["rows/cpu-s"] != 1290000 || w.Failed {
		t.Errorf("split result line: %+v", w)
	}
	if w := r.Benchmark("reckon/lake.BenchmarkWriteRaw/zstd=2"); w == nil || !w.Failed || len(w.Output) != 1 || w.Output[0] != "bench_test.go:27: lake: write: disk full" {
		t.Errorf("failed sub-benchmark: %+v", w)
	}
	if a := r.Benchmark("reckon/lake.BenchmarkArchiveBatch"); a == nil || len(a.Samples) != 1 || a.Procs != 1 {
		t.Errorf("ArchiveBatch %+v", a)
	}
	if z := r.Benchmark("reckon/workers.BenchmarkZReportThroughput"); z == nil || !z.Failed || !slices.Contains(z.Output, "panic: test timed out after 1m0s") {
		t.Errorf("timeout: %+v", z)
	}
	if s := r.Benchmark("reckon/workers.BenchmarkTimeToTruth"); s == nil || !s.Skipped || len(s.Output) != 1 || !strings.Contains(s.Output[0], "no temporal CLI") {
		t.Errorf("skip: %+v", s)
	}
}

// TestParseVerboseCount: with -v and -count, later runs are not announced
// again; a failed run's message still reaches its benchmark.
func TestParseVerboseCount(t *testing.T) {
	r := parseFile(t, "trial.txt")
	b := r.Benchmark("reckon/streaming.BenchmarkStreamLatency")
	if b == nil || !b.Failed || len(b.Samples) != 1 || b.Procs != 2 || len(b.Output) == 0 || !strings.Contains(b.Output[len(b.Output)-1], "features seen") {
		t.Fatalf("%+v", b)
	}
	if e := r.Benchmark("reckon/streaming.BenchmarkStreamEndToEnd"); e == nil || e.Failed || len(e.Samples) != 2 {
		t.Errorf("%+v", e)
	}
}

// TestRenderDidNotRun: every benchmark the suite names that has no result
// shows, with its reason, in its row, in the goals table and in the list.
func TestRenderDidNotRun(t *testing.T) {
	out, res := render(t, parseFile(t, "small.txt"))
	for _, want := range []string{
		"| **events/s, end to end** | did not run: FAIL reckon/streaming [build failed]: streaming/bench_test.go:30:2: undefined: benchEnv |",
		"- `lake/interop.BenchmarkHourly/reckon`: did not run: package reckon/lake/interop is not in the output; its command printed: go: updates to go.mod needed; to update it: / go mod tidy",
		"| **reckon (with dedup) vs DuckDB without dedup** | did not run: package reckon/lake/interop is not in the output; its command printed: go: updates to go.mod nee… |",
		"| **write rows, zstd level 1 (the default)** | 1.29 M rows/CPU-s |",
		"| write rows, zstd level 2 | failed: bench_test.go:27: lake: write: disk full |",
		"| **parts/s accepted, backlog** | failed: panic: test timed out after 1m0s |",
		"| p50 | skipped: truth_bench_test.go:10: no temporal CLI at /x/bin/temporal: run 'make temporal' or 'make test' |",
		"| Stream end to end through kfake, exactly-once effect on: ≥ 300,000 events/s | did not run: FAIL reckon/streaming [build failed]",
		"| Archive write, one core: ≥ 1,000,000 rows/s/core | 1.29 M rows/CPU-s | parquet-go defaults 1.4 M rows/s (docs/benchmarks-notes.md) | **met** |",
		"- `streaming/operator.BenchmarkOperatorHotPath/decode+gate+dedup=1M+window`: did not run: package reckon/streaming/operator is not in the output",
		"load average** (1, 5, 15 min): 1.50 1.20 0.90 before, 2.10 1.40 1.00 after",
		"took 1m 36s",
		"  - printed: `go: updates to go.mod needed; to update it:`",
	} {
		if !strings.Contains(strings.ToLower(out), strings.ToLower(want)) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(out, "BenchmarkWriteRaw`") || strings.Contains(out, "| `lake.BenchmarkWriteRaw` |") {
		t.Errorf("a parent benchmark is listed on its own:\n%s", out)
	}
	var joined = strings.Join(res.DidNotRun, "\n")
	for _, want := range []string{"streaming.BenchmarkStreamEndToEnd", "lake/interop.BenchmarkHourly/reckon", "workers.BenchmarkTimeToTruth", "lake.BenchmarkWriteRaw/zstd=2"} {
		if !strings.Contains(joined, want) {
			t.Errorf("DidNotRun lacks %s:\n%s", want, joined)
		}
	}
}

// TestSuiteNamesResolve: every figure the suite names exists, with its
// metric, in a real run of the whole suite — a renamed benchmark or a
// typo in suite.go fails here, not in the next report. (After renaming a
// benchmark, recapture testdata/trial.txt with the quick trial in the
// Makefile's bench comment.)
func TestSuiteNamesResolve(t *testing.T) {
	r := parseFile(t, "trial.txt")
	for _, s := range Suite {
		for _, row := range s.Rows {
			figs := []Figure{row.Reckon}
			if row.Ref.Figure != nil {
				figs = append(figs, *row.Ref.Figure)
			}
			for _, f := range figs {
				b := r.Benchmark(f.Bench)
				if b == nil || len(b.Samples) == 0 {
					t.Errorf("%s / %s: %s not in the run", s.Title, row.Case, f.Bench)
					continue
				}
				if _, ok := b.Samples[0].Values[f.Metric]; !ok && f.Metric != MetricN {
					t.Errorf("%s / %s: %s has no %q (has %q)", s.Title, row.Case, f.Bench, f.Metric, b.Samples[0].Units)
				}
			}
		}
	}
}

func TestRenderGolden(t *testing.T) {
	out, res := render(t, parseFile(t, "trial.txt"))
	if len(res.DidNotRun) != 1 || !strings.Contains(res.DidNotRun[0], "BenchmarkStreamLatency: failed in a run") {
		t.Errorf("DidNotRun %q", res.DidNotRun)
	}
	golden := filepath.Join("testdata", "trial.golden.md")
	if *update {
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("report differs from %s (go test -update to accept):\n%s", golden, out)
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		unit string
		v    []float64
		want string
	}{
		{"cpu-events/s", []float64{431_000, 532_400}, "431–532 K events/CPU-s"},
		{"cpu-events/s", []float64{1_370_000, 2_070_000}, "1.37–2.07 M events/CPU-s"},
		{"events/s", []float64{155_000}, "155 K events/s"},
		{"cpu-ns/op", []float64{569, 1153}, "569–1,153 CPU-ns"},
		{"ns/op", []float64{318.4, 318.2}, "318 ns"},
		{"ns/op", []float64{1.46e9, 1.58e9}, "1.46–1.58 s"},
		{"ns/op", []float64{15.6e6, 31.1e6}, "15.6–31.1 ms"},
		{"p99-ms", []float64{853.7}, "854 ms"},
		{"p50-s", []float64{3.924}, "3.92 s"},
		{"bytes/event", []float64{51.3}, "51.3 B/event"},
		{"bytes", []float64{18_350_000}, "17.5 MiB"},
		{MetricN, []float64{10000}, "10,000"},
		{"windows", []float64{288000}, "288,000 windows"},
		{"allocs/op", []float64{1}, "1 allocs/op"},
		{"heap-MiB", []float64{473.2}, "473 MiB"},
		{"maxrss-MB", []float64{42.52, 1234}, "42.5–1,234 MB"},
		{"open-files", []float64{46}, "46"},
		{"speed", []float64{10}, "10 × real time"},
		{"rows/cpu-s", nil, "—"},
	} {
		if got := fmtRange(c.unit, c.v); got != c.want {
			t.Errorf("fmtRange(%s, %v) = %q, want %q", c.unit, c.v, got, c.want)
		}
	}
	if m := median([]float64{3, 1, 2, 10}); m != 2.5 {
		t.Errorf("median %v", m)
	}
	if s, ok := speedRatio("rows/cpu-s", 6e6, 2e6); !ok || s != 3 {
		t.Errorf("rate speed %v", s)
	}
	if s, ok := speedRatio("ns/op", 1e6, 2e6); !ok || s != 2 {
		t.Errorf("time speed %v", s)
	}
	if _, ok := speedRatio("bytes/event", 1, 2); ok {
		t.Error("bytes are no speed")
	}
}

// TestVerdictRatioAtMost: a count against its bound of the same run.
func TestVerdictRatioAtMost(t *testing.T) {
	raw := "pkg: reckon/x\nBenchmarkPace \t 1\t 5.000 closed-files\t 3.000 closed-bound\t 3.000 open-files\t 64.00 open-bound\nok  \treckon/x\t1.0s\n"
	r, err := Parse(strings.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	rr := &renderer{run: r, used: map[string]bool{}}
	for _, c := range []struct{ metric, bound, want string }{
		{"closed-files", "closed-bound", "**not met** (1.67× the bound)"},
		{"open-files", "open-bound", "**met** (0.05× the bound)"},
	} {
		row := Row{Reckon: fig("reckon/x", "BenchmarkPace", c.metric), Ref: ref("reckon/x", "BenchmarkPace", c.bound), Goal: &Goal{Kind: RatioAtMost, Value: 1}}
		if got := rr.verdict(row); got != c.want {
			t.Errorf("%s: %q, want %q", c.metric, got, c.want)
		}
	}
}
