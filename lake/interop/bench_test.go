package interop

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"reckon/internal/event"
	"reckon/lake"
)

// benchRows is the size of the benchmark lake: RECKON_BENCH_ROWS, default
// 1,000,000 (`make bench` sets BENCH_ROWS, 5,000,000; the ADR 0003 figures
// used 10,000,000).
func benchRows() int {
	if v, err := strconv.Atoi(os.Getenv("RECKON_BENCH_ROWS")); err == nil && v > 0 {
		return v
	}
	return 1_000_000
}

// benchLake writes benchRows rows over 24 hours, 50 keys, one file per hour
// (a compacted day), once per process.
var benchLake = sync.OnceValues(func() (*lake.Lake, error) {
	dir, err := os.MkdirTemp("", "reckon-interop-bench-")
	if err != nil {
		return nil, err
	}
	l, err := lake.Open(lake.Options{Root: dir})
	if err != nil {
		return nil, err
	}
	n := benchRows()
	rng := rand.New(rand.NewPCG(42, 1))
	off, bytes := int64(0), int64(0)
	began := time.Now()
	for h := 0; h < 24; h++ {
		per := n / 24
		if h < n%24 {
			per++
		}
		rows := hourRows(rng, h, per, 50, off)
		res, err := l.WriteRaw(context.Background(), topic, 0, off, off+int64(per)-1, rows)
		if err != nil {
			return nil, err
		}
		for _, f := range res.Files {
			bytes += f.Bytes
		}
		off += int64(per)
	}
	fmt.Fprintf(os.Stderr, "benchmark lake: %d rows, %.1f bytes/event, in %s, written in %.1fs\n", n, float64(bytes)/float64(n), dir, time.Since(began).Seconds())
	return l, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if l, err := benchLakeIfBuilt(); err == nil && l != nil {
		os.RemoveAll(l.Root())
	}
	if procLakeBuilt {
		if p, err := procLakeOnce(); err == nil {
			os.RemoveAll(p.root)
		}
	}
	if procToolsBuilt {
		if t, _ := procToolsOnce(); t != nil {
			os.RemoveAll(t.dir)
		}
	}
	if dayLakeBuilt {
		if d, err := dayLakeOnce(); err == nil {
			os.RemoveAll(d.root)
		}
	}
	os.Exit(code)
}

var benchBuilt bool

func benchLakeIfBuilt() (*lake.Lake, error) {
	if !benchBuilt {
		return nil, nil
	}
	return benchLake()
}

func getBenchLake(b *testing.B) *lake.Lake {
	b.Helper()
	benchBuilt = true
	l, err := benchLake()
	if err != nil {
		b.Fatal(err)
	}
	return l
}

var day = lake.Query{Topic: topic, From: start, To: start.Add(24 * time.Hour)}

// BenchmarkHourly compares, on the same files in the same run, the hourly
// count/sum/min/max per key over a day: reckon's reader (parquet-go, dedup
// by event_id), the same query on arrow-go's pqarrow, and DuckDB with one
// thread, without and with DISTINCT ON (event_id).
func BenchmarkHourly(b *testing.B) {
	l := getBenchLake(b)
	n := float64(benchRows())
	var cpu0 time.Duration
	report := func(b *testing.B) {
		b.ReportMetric(n*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		if cpu := (cpuTime() - cpu0).Seconds(); cpu > 0 {
			b.ReportMetric(n*float64(b.N)/cpu, "rows/cpu-s")
		}
	}
	b.Run("reckon", func(b *testing.B) {
		cpu0 = cpuTime()
		for i := 0; i < b.N; i++ {
			aggs, st, err := l.Aggregate(context.Background(), day, time.Hour)
			if err != nil || len(aggs) != 24*50 || st.Rows != int64(n) {
				b.Fatal(len(aggs), st, err)
			}
		}
		report(b)
	})
	b.Run("arrow", func(b *testing.B) {
		files := rawFiles(b, l)
		b.ResetTimer()
		cpu0 = cpuTime()
		for i := 0; i < b.N; i++ {
			aggs, err := arrowAggregate(files, time.Hour)
			if err != nil || len(aggs) != 24*50 {
				b.Fatal(len(aggs), err)
			}
		}
		report(b)
	})
	db, err := sql.Open("duckdb", "")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // SET threads applies to the connection
	if _, err := db.Exec("SET threads = 1"); err != nil {
		b.Fatal(err)
	}
	raw := fmt.Sprintf("read_parquet('%s/raw/**/*.parquet', hive_partitioning=true)", l.Root())
	for _, c := range []struct{ name, from string }{
		{"duckdb", raw},
		{"duckdb-dedup", "(SELECT DISTINCT ON (event_id) key, occurred_at, value FROM " + raw + ")"},
	} {
		q := `SELECT key, epoch_us(occurred_at) // 3600000000 AS h, count(*), sum(value), min(value), max(value) FROM ` + c.from + ` GROUP BY ALL ORDER BY key, h`
		b.Run(c.name, func(b *testing.B) {
			cpu0 = cpuTime()
			for i := 0; i < b.N; i++ {
				rows, err := db.Query(q)
				if err != nil {
					b.Fatal(err)
				}
				k := 0
				for rows.Next() {
					k++
				}
				rows.Close()
				if k != 24*50 {
					b.Fatal(k)
				}
			}
			report(b)
		})
	}
}

// TestArrowReaderAgrees keeps the arrow contender honest: same answers as
// reckon's reader.
func TestArrowReaderAgrees(t *testing.T) {
	l, _ := buildLake(t)
	if _, err := l.Compact(context.Background(), topic, start); err != nil {
		t.Fatal(err)
	}
	files := rawFiles(t, l)
	// The arrow contender dedups adjacent rows per file only: compare on
	// hours holding one file per partition.
	want, _, err := l.Aggregate(context.Background(), lake.Query{Topic: topic, From: start, To: start.Add(2 * time.Hour)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var hourFiles []string
	for _, f := range files {
		if bytes.Contains([]byte(f), []byte("event_hour=00")) || bytes.Contains([]byte(f), []byte("event_hour=01")) {
			hourFiles = append(hourFiles, f)
		}
	}
	got, err := arrowAggregate(hourFiles, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("arrow %d windows, reckon %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Key != want[i].Key || !got[i].WindowStart.Equal(want[i].WindowStart) || got[i].Count != want[i].Count || got[i].Min != want[i].Min || got[i].Max != want[i].Max {
			t.Errorf("window %d: arrow %+v, reckon %+v", i, got[i], want[i])
		}
	}
}

func rawFiles(tb testing.TB, l *lake.Lake) []string {
	tb.Helper()
	var files []string
	filepath.WalkDir(filepath.Join(l.Root(), lake.RawDir), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(p) == ".parquet" && d.Name()[0] != '.' {
			files = append(files, p)
		}
		return nil
	})
	slices.Sort(files)
	return files
}

// arrowAggregate is the reader written on arrow-go's pqarrow as tightly as
// its API allows: key read as a dictionary, typed arrays, 64k-row record
// batches; adjacent event_id dedup within each file (the lake's sort
// order), hourly event.Agg per key.
func arrowAggregate(files []string, window time.Duration) ([]lake.WindowAgg, error) {
	winUS := int64(window / time.Microsecond)
	type cell struct {
		key string
		win int64
	}
	aggs := map[cell]*event.Agg{}
	ctx := context.Background()
	for _, path := range files {
		pr, err := file.OpenParquetFile(path, false)
		if err != nil {
			return nil, err
		}
		sc := pr.MetaData().Schema
		cols := []int{sc.ColumnIndexByName("key"), sc.ColumnIndexByName("occurred_at"), sc.ColumnIndexByName("event_id"), sc.ColumnIndexByName("value")}
		props := pqarrow.ArrowReadProperties{BatchSize: 64 << 10}
		props.SetReadDict(cols[0], true)
		fr, err := pqarrow.NewFileReader(pr, props, memory.DefaultAllocator)
		if err != nil {
			pr.Close()
			return nil, err
		}
		rr, err := fr.GetRecordReader(ctx, cols, nil)
		if err != nil {
			pr.Close()
			return nil, err
		}
		prevKey, prevOcc, prevID := "", int64(-1), []byte(nil)
		for rr.Next() {
			rec := rr.RecordBatch()
			keys := rec.Column(0).(*array.Dictionary)
			dict := keys.Dictionary().(*array.String)
			occ := rec.Column(1).(*array.Timestamp).Values()
			ids := rec.Column(2).(*array.String)
			vals := rec.Column(3).(*array.Float64).Float64Values()
			names := make([]string, dict.Len())
			for j := range names {
				names[j] = dict.Value(j)
			}
			var cur *event.Agg
			curCell := cell{win: -1}
			for i := 0; i < int(rec.NumRows()); i++ {
				k, o, id := names[keys.GetValueIndex(i)], int64(occ[i]), ids.Value(i)
				if k == prevKey && o == prevOcc && string(prevID) == id {
					continue
				}
				prevKey, prevOcc, prevID = k, o, append(prevID[:0], id...)
				c := cell{k, o / winUS}
				if c != curCell {
					if cur = aggs[c]; cur == nil {
						cur = new(event.Agg)
						aggs[c] = cur
					}
					curCell = c
				}
				cur.Add(vals[i])
			}
		}
		err = rr.Err()
		rr.Release()
		pr.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	out := make([]lake.WindowAgg, 0, len(aggs))
	for c, a := range aggs {
		s := time.UnixMicro(c.win * winUS).UTC()
		out = append(out, lake.WindowAgg{Key: c.key, WindowStart: s, WindowEnd: s.Add(window), Agg: *a})
	}
	slices.SortFunc(out, func(a, b lake.WindowAgg) int {
		if a.Key != b.Key {
			if a.Key < b.Key {
				return -1
			}
			return 1
		}
		return a.WindowStart.Compare(b.WindowStart)
	})
	return out, nil
}

// cpuTime is the CPU time (user + system, every thread, DuckDB's included)
// the process has used: on the shared, often loaded 2-core machines, rows
// per CPU-second is the steadier comparison.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
