package interop

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"reckon/internal/event"
	"reckon/lake"
)

// The process benchmark's lake: a day of the sensor topic, benchRows() raw
// rows of which every 100th is a redelivery of a recent event (same
// event_id, key and event time; a later offset and ingest time), archived
// as the archive workflows write it — each of 3 partitions (the key's
// partition) writes procFilesPerHour files per event hour, one per archive
// step, with consecutive offsets — then every hour compacted as closed by
// the real compaction (lake.CompactHour): files of up to 1 M rows, each
// event once, the redeliveries moved to raw_dropped/.
const (
	procParts        = 3
	procFilesPerHour = 20 // per partition: under the open-hour merge threshold (32)
	procKeys         = 50
)

// procLake is the compacted lake and what the generator knows about it.
type procLake struct {
	root        string
	rows        int64 // raw rows archived, redeliveries included
	redelivered int64
	archived    int   // archive files written
	compacted   int   // files after compaction
	maxFileRows int64 // rows of the largest compacted file
	// truth is per key and hour, each event once.
	truth map[cellKey]*event.Agg
}

var (
	procLakeBuilt bool
	procLakeOnce  = sync.OnceValues(buildProcLake)
	// procChecked: the answers were checked (once per process, not per
	// -count run).
	procChecked bool
)

func getProcLake(b *testing.B) *procLake {
	b.Helper()
	procLakeBuilt = true
	p, err := procLakeOnce()
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func buildProcLake() (*procLake, error) {
	dir, err := os.MkdirTemp("", "reckon-process-bench-")
	if err != nil {
		return nil, err
	}
	l, err := lake.Open(lake.Options{Root: dir})
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	p := &procLake{root: dir, truth: map[cellKey]*event.Agg{}}
	n := benchRows()
	rng := rand.New(rand.NewPCG(3, 5))
	names := make([]string, procKeys)
	for i := range names {
		names[i] = fmt.Sprintf("sensor-%02d", i)
	}
	var next [procParts]int64 // next offset per partition
	began := time.Now()
	var compactCPU time.Duration
	for h := 0; h < 24; h++ {
		per := n / 24
		if h < n%24 {
			per++
		}
		hour := start.Add(time.Duration(h) * time.Hour)
		base := hour.UnixMicro()
		rows := make([]lake.RawRow, per)
		var redelivered int64
		for i := range rows {
			arrived := base + int64(i)*3_600_000_000/int64(per) + 150_000
			if i%100 == 99 { // a redelivery of one of the last 300 records
				r := rows[i-1-rng.IntN(min(i, 300))]
				r.IngestedAt = arrived + 2_000_000
				rows[i] = r
				redelivered++
				continue
			}
			k := rng.IntN(procKeys)
			v := float64(rng.IntN(4000))/100 - 5
			rows[i] = lake.RawRow{
				EventID:        uuid(rng),
				EventType:      "sensor.suhu.terbaca",
				OccurredAt:     arrived - 150_000,
				IngestedAt:     arrived,
				Key:            names[k],
				Value:          v,
				Data:           `{"id_perangkat":"` + names[k] + `","lantai":` + strconv.Itoa(1+k%10) + `,"suhu_c":` + strconv.FormatFloat(v, 'f', -1, 64) + `}`,
				KafkaPartition: int32(k % procParts),
			}
			c := cellKey{names[k], base}
			a := p.truth[c]
			if a == nil {
				a = new(event.Agg)
				p.truth[c] = a
			}
			a.Add(v)
		}
		// The archive: each partition's records of the hour in arrival
		// order, procFilesPerHour steps.
		for part := int32(0); part < procParts; part++ {
			var recs []lake.RawRow
			for _, r := range rows {
				if r.KafkaPartition == part {
					r.KafkaOffset = next[part] + int64(len(recs))
					recs = append(recs, r)
				}
			}
			for f := 0; f < procFilesPerHour; f++ {
				lo, hi := f*len(recs)/procFilesPerHour, (f+1)*len(recs)/procFilesPerHour
				if lo == hi {
					continue
				}
				res, err := l.WriteRaw(ctx, topic, part, recs[lo].KafkaOffset, recs[hi-1].KafkaOffset, recs[lo:hi])
				if err != nil {
					return nil, err
				}
				p.archived += len(res.Files)
			}
			next[part] += int64(len(recs))
		}
		c0 := cpuTime()
		res, err := l.CompactHour(ctx, topic, hour, lake.CompactOptions{})
		compactCPU += cpuTime() - c0
		if err != nil {
			return nil, err
		}
		if res.Rows != int64(per)-redelivered || res.Dropped != redelivered || !res.Closed {
			return nil, fmt.Errorf("compacted hour %02d: %d rows, %d dropped; want %d, %d", h, res.Rows, res.Dropped, int64(per)-redelivered, redelivered)
		}
		for _, f := range res.Written {
			p.maxFileRows = max(p.maxFileRows, f.Rows)
		}
		p.compacted += len(res.Written)
		p.rows += int64(per)
		p.redelivered += redelivered
	}
	// What a reader of raw/ sees: compacted files only.
	left := 0
	err = filepath.WalkDir(filepath.Join(dir, lake.RawDir), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".parquet") {
			left++
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if left != p.compacted || p.maxFileRows > 1_000_000 {
		return nil, fmt.Errorf("raw/ holds %d files after compaction (%d written, largest %d rows)", left, p.compacted, p.maxFileRows)
	}
	fmt.Fprintf(os.Stderr, "process-benchmark lake: %d rows (%d redeliveries) in %d archive files, compacted (%.1f CPU-s) into %d files of ≤ %d rows, in %s, built in %.1fs\n",
		p.rows, p.redelivered, p.archived, compactCPU.Seconds(), p.compacted, p.maxFileRows, dir, time.Since(began).Seconds())
	return p, nil
}

// BenchmarkLakeQueryProcess runs the hourly aggregation of a compacted day
// as analysts run it, each engine in its own process on the same lake,
// each started by internal/launch, which measures its wall clock, CPU time
// (user + system) and peak RSS (rusage maxrss):
//
//   - duckdb: internal/duckquery, a program of database/sql and the
//     DuckDB driver only, opening DuckDB in memory with `SET threads = 1`
//     and running the README's hourly query as printed (raw table, no
//     DISTINCT ON: closed hours are compacted, each event once; no
//     hive_types);
//   - reckon: `reckon lake query --topic … --from … --to … --format csv`
//     (RECKON_BENCH_BIN, which `make bench` sets to bin/reckon; by default
//     `go build ./workers/reckon`), which deduplicates any hour whatever
//     its state.
//
// Before timing, both answers are checked against the generator's: per key
// and hour the count of distinct events, minimum and maximum, and the
// average (DuckDB's rounded to 2 decimals as the README asks). The check
// runs read every file once, so the timed runs find them in the page
// cache. Rows are RECKON_BENCH_ROWS (default 1,000,000; `make bench`
// 10,000,000). With -count, the runs alternate which engine goes first.
func BenchmarkLakeQueryProcess(b *testing.B) {
	p := getProcLake(b)
	t := getProcTools(b)
	q := readmeQueries(b, p.root)[0]
	if !strings.Contains(q, "/raw/**") || strings.Contains(strings.ToUpper(q), "DISTINCT ON") || strings.Contains(q, "hive_types") {
		b.Fatalf("the README's first query is no longer the plain hourly aggregation of raw/:\n%s", q)
	}
	engines := []struct {
		name  string
		argv  []string
		parse func([]byte) ([]hourAgg, error)
	}{
		{"duckdb", append([]string{t.duckquery}, statements(q)...), parseDuckQuery},
		{"reckon", []string{t.reckon, "lake", "query", "--lake", p.root, "--topic", topic,
			"--from", start.Format(time.DateOnly), "--to", start.Add(24 * time.Hour).Format(time.DateOnly), "--format", "csv"},
			parseReckonCSV},
	}
	env := childEnviron()
	if !procChecked {
		for _, e := range engines {
			run, err := runChild(t.launch, e.argv, env)
			if err != nil {
				b.Fatal(err)
			}
			got, err := e.parse(run.out)
			if err == nil {
				err = p.check(got, e.name == "duckdb")
			}
			if err != nil {
				b.Fatalf("%s's answer: %v", e.name, err)
			}
		}
		procChecked = true
	}
	if procRuns++; procRuns%2 == 0 {
		engines[0], engines[1] = engines[1], engines[0]
	}
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			var wall, cpu time.Duration
			var rss, floor int64
			for i := 0; i < b.N; i++ {
				run, err := runChild(t.launch, e.argv, env)
				if err != nil {
					b.Fatal(err)
				}
				if k := bytes.Count(run.out, []byte("\n")); k < len(p.truth) {
					b.Fatalf("%d lines of output, want %d windows", k, len(p.truth))
				}
				wall += time.Duration(run.WallNS)
				cpu += time.Duration(run.CPUNS)
				rss, floor = max(rss, run.MaxRSSKiB), max(floor, run.FloorKiB)
			}
			if rss <= floor {
				b.Fatalf("peak RSS %d KiB is the launcher's own (%d KiB): the child's is not measured", rss, floor)
			}
			n := float64(b.N)
			b.ReportMetric(wall.Seconds()/n, "wall-s")
			b.ReportMetric(cpu.Seconds()/n, "cpu-s")
			b.ReportMetric(float64(rss)*1024/1e6, "maxrss-MB")
			b.ReportMetric(float64(p.rows), "rows")
			b.ReportMetric(float64(p.compacted), "files")
		})
	}
}

// procRuns counts BenchmarkLakeQueryProcess's runs (-count), to alternate
// which engine goes first.
var procRuns int

// hourAgg is one line of an engine's answer; Avg is what it printed.
type hourAgg struct {
	cellKey
	Count         int64
	Avg, Min, Max float64
}

// check compares an engine's answer with the generator's, window by
// window; rounded says the averages are rounded to 2 decimals.
func (p *procLake) check(got []hourAgg, rounded bool) error {
	if len(got) != len(p.truth) {
		return fmt.Errorf("%d windows, want %d", len(got), len(p.truth))
	}
	seen := map[cellKey]bool{}
	for _, g := range got {
		t := p.truth[g.cellKey]
		if t == nil || seen[g.cellKey] {
			return fmt.Errorf("window %s %s: unexpected or repeated", g.key, time.UnixMicro(g.start).UTC().Format(time.RFC3339))
		}
		seen[g.cellKey] = true
		avg := t.Sum / float64(t.Count)
		tol := 1e-9 * math.Max(1, math.Abs(avg))
		if rounded {
			tol = 0.005 + 1e-9
		}
		if g.Count != t.Count || g.Min != t.Min || g.Max != t.Max || math.Abs(g.Avg-avg) > tol {
			return fmt.Errorf("window %s %s: got count %d avg %g min %g max %g; generated %d events, avg %g min %g max %g",
				g.key, time.UnixMicro(g.start).UTC().Format(time.RFC3339), g.Count, g.Avg, g.Min, g.Max, t.Count, avg, t.Min, t.Max)
		}
	}
	return nil
}

// childRun is what a child process took, as internal/launch measured
// it, and what it printed.
type childRun struct {
	WallNS    int64 `json:"wall_ns"`
	CPUNS     int64 `json:"cpu_ns"`
	MaxRSSKiB int64 `json:"max_rss_kib"`
	FloorKiB  int64 `json:"floor_kib"` // the launcher's own peak RSS
	out       []byte
}

// runChild runs argv with env under the launcher.
func runChild(launcher string, argv, env []string) (childRun, error) {
	m, err := os.CreateTemp("", "process-bench-*.json")
	if err != nil {
		return childRun{}, err
	}
	m.Close()
	defer os.Remove(m.Name())
	c := exec.Command(launcher, append([]string{"-out", m.Name(), "--"}, argv...)...)
	c.Env, c.Dir = env, os.TempDir()
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		return childRun{}, fmt.Errorf("%s: %w: %s", filepath.Base(argv[0]), err, strings.TrimSpace(errb.String()))
	}
	b, err := os.ReadFile(m.Name())
	if err != nil {
		return childRun{}, err
	}
	var run childRun
	if err := json.Unmarshal(b, &run); err != nil {
		return childRun{}, fmt.Errorf("launch wrote %q: %w", b, err)
	}
	run.out = out.Bytes()
	return run, nil
}

// childEnviron is this process's environment without RECKON_* variables:
// reckon's configuration refuses unknown ones (RECKON_BENCH_ROWS).
func childEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RECKON_") && !strings.HasPrefix(kv, "INTEROP_BENCH_") {
			env = append(env, kv)
		}
	}
	return env
}

// procTools are the programs the process benchmark runs, built once per
// process into dir.
type procTools struct {
	dir                       string
	launch, duckquery, reckon string
}

var (
	procToolsBuilt bool
	procToolsOnce  = sync.OnceValues(func() (*procTools, error) {
		dir, err := os.MkdirTemp("", "reckon-process-bench-bin-")
		if err != nil {
			return nil, err
		}
		t := &procTools{dir: dir, reckon: os.Getenv("RECKON_BENCH_BIN")}
		if t.launch, err = goBuild(".", "./internal/launch", dir); err != nil {
			return t, err
		}
		if t.duckquery, err = goBuild(".", "./internal/duckquery", dir); err != nil {
			return t, err
		}
		if t.reckon == "" {
			t.reckon, err = goBuild("../..", "./workers/reckon", dir)
		}
		return t, err
	})
)

// getProcTools builds internal/launch, internal/duckquery and, unless
// RECKON_BENCH_BIN names it (`make bench`: bin/reckon), reckon.
func getProcTools(b *testing.B) *procTools {
	b.Helper()
	procToolsBuilt = true
	t, err := procToolsOnce()
	if err != nil {
		b.Fatal(err)
	}
	return t
}

// goBuild builds the main package pkg of the module at modDir into dir.
func goBuild(modDir, pkg, dir string) (string, error) {
	bin := filepath.Join(dir, filepath.Base(pkg))
	c := exec.Command("go", "build", "-o", bin, pkg)
	c.Dir = modDir
	if out, err := c.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// parseDuckQuery reads internal/duckquery's output of the README's
// query: key, hour (Unix µs), events, rounded average, minimum, maximum.
func parseDuckQuery(out []byte) ([]hourAgg, error) {
	var aggs []hourAgg
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
		if len(f) != 6 {
			return nil, fmt.Errorf("duckquery printed %q", line)
		}
		a := hourAgg{cellKey: cellKey{key: f[0]}}
		var errs [5]error
		a.start, errs[0] = strconv.ParseInt(f[1], 10, 64)
		a.Count, errs[1] = strconv.ParseInt(f[2], 10, 64)
		a.Avg, errs[2] = strconv.ParseFloat(f[3], 64)
		a.Min, errs[3] = strconv.ParseFloat(f[4], 64)
		a.Max, errs[4] = strconv.ParseFloat(f[5], 64)
		if err := errors.Join(errs[:]...); err != nil {
			return nil, fmt.Errorf("duckquery printed %q: %w", line, err)
		}
		aggs = append(aggs, a)
	}
	return aggs, nil
}

// parseReckonCSV reads `reckon lake query --format csv`: key,
// window_start, window_end, count, sum, avg, min, max.
func parseReckonCSV(out []byte) ([]hourAgg, error) {
	r := csv.NewReader(bytes.NewReader(out))
	head, err := r.Read()
	if err != nil {
		return nil, err
	}
	if strings.Join(head, ",") != "key,window_start,window_end,count,sum,avg,min,max" {
		return nil, fmt.Errorf("reckon lake query printed the header %q", head)
	}
	var aggs []hourAgg
	for {
		f, err := r.Read()
		if err == io.EOF {
			return aggs, nil
		}
		if err != nil {
			return nil, err
		}
		a := hourAgg{cellKey: cellKey{key: f[0]}}
		ws, err0 := time.Parse(time.RFC3339, f[1])
		var errs [4]error
		a.Count, errs[0] = strconv.ParseInt(f[3], 10, 64)
		a.Avg, errs[1] = strconv.ParseFloat(f[5], 64)
		a.Min, errs[2] = strconv.ParseFloat(f[6], 64)
		a.Max, errs[3] = strconv.ParseFloat(f[7], 64)
		if err := errors.Join(append(errs[:], err0)...); err != nil {
			return nil, fmt.Errorf("reckon lake query printed %q: %w", f, err)
		}
		a.start = ws.UnixMicro()
		aggs = append(aggs, a)
	}
}
