//go:build duckdb_arrow

package sqlserve

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"reckon/internal/testing/s3test"
	"reckon/lake"
)

// benchRows is the size of the benchmark lake: RECKON_BENCH_ROWS, default
// 1,000,000 (`make bench` passes BENCH_ROWS).
func benchRows() int {
	if v, err := strconv.Atoi(os.Getenv("RECKON_BENCH_ROWS")); err == nil && v > 0 {
		return v
	}
	return 1_000_000
}

// benchLake writes benchRows sensor events over 24 hours, 50 keys, one
// file per hour (a compacted day), once per process; removed by
// TestMain.
var benchLake = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "reckon-sql-bench-")
	if err != nil {
		return "", err
	}
	l, err := lake.Open(lake.Options{Root: dir})
	if err != nil {
		return dir, err
	}
	n := benchRows()
	rng := rand.New(rand.NewPCG(42, 1))
	off := int64(0)
	for h := 0; h < 24; h++ {
		per := n / 24
		if h < n%24 {
			per++
		}
		rows := make([]lake.RawRow, per)
		base := t0.Add(time.Duration(h) * time.Hour).UnixMicro()
		for i := range rows {
			occ := base + int64(i)*3_600_000_000/int64(per)
			k := rng.IntN(50)
			v := float64(rng.IntN(4000))/100 - 5
			key := fmt.Sprintf("sensor-%02d", k)
			rows[i] = lake.RawRow{
				EventID:   fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", rng.Uint32(), rng.IntN(1<<16), rng.IntN(1<<12), rng.IntN(1<<12), rng.Int64N(1<<48)),
				EventType: "sensor.suhu.terbaca", OccurredAt: occ, IngestedAt: occ + 150_000, Key: key, Value: v,
				Data:        `{"id_perangkat":"` + key + `","lantai":` + strconv.Itoa(1+k%10) + `,"suhu_c":` + strconv.FormatFloat(v, 'f', -1, 64) + `}`,
				KafkaOffset: off + int64(i),
			}
		}
		if _, err := l.WriteRaw(context.Background(), testTopic, 0, off, off+int64(per)-1, rows); err != nil {
			return dir, err
		}
		off += int64(per)
	}
	return dir, nil
})

var benchBuilt bool

func TestMain(m *testing.M) {
	code := m.Run()
	s3test.Stop()
	if benchBuilt {
		if dir, _ := benchLake(); dir != "" {
			os.RemoveAll(dir)
		}
	}
	os.Exit(code)
}

// hourlyQuery is the hourly count/sum/min/max per key over the
// deduplicated events, the query BenchmarkHourly (lake/interop) times.
const hourlyQuery = `SELECT key, time_bucket(INTERVAL 1 HOUR, occurred_at) AS h, count(*), sum(value), min(value), max(value)
FROM events GROUP BY ALL ORDER BY key, h`

// BenchmarkFlightSQL times, on the same files in the same run, each query
// in DuckDB in process (the engine's Arrow reader, no network) and through
// the Flight SQL endpoint on loopback with arrow-go's client receiving
// every batch: the difference is what the endpoint adds. The two run
// back to back in each iteration, in alternating order across runs, so
// both see the same machine load (this machine is shared and noisy).
// Metrics: duckdb-s and flightsql-s per query, rows/s through Flight SQL
// and duckdb-rows/s in process (input rows), arrow-MB/s received.
func BenchmarkFlightSQL(b *testing.B) {
	benchBuilt = true
	root, err := benchLake()
	if err != nil {
		b.Fatal(err)
	}
	n := float64(benchRows())
	eng := openEngine(b, root, func(o *Options) { o.Threads, o.MemoryLimit = 0, "4GB" })
	c := newClient(b, startServer(b, eng, ServeOptions{}))
	ctx := context.Background()
	// Warm DuckDB's parquet metadata cache and the page cache once, so the
	// first contender timed does not pay for both.
	if rdr, err := eng.Query(ctx, hourlyQuery); err != nil {
		b.Fatal(err)
	} else {
		countRows(rdr)
		rdr.Release()
	}
	inProcess := func(q string, want int) {
		rdr, err := eng.Query(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		got := countRows(rdr)
		err = rdr.Err()
		rdr.Release()
		if err != nil || got != want {
			b.Fatalf("in process: %d rows, %v; want %d", got, err, want)
		}
	}
	throughFlight := func(q string, want int) (bytes int64) {
		info, err := c.Execute(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		rdr, err := c.DoGet(ctx, info.Endpoint[0].Ticket)
		if err != nil {
			b.Fatal(err)
		}
		got := 0
		for rdr.Next() {
			rec := rdr.RecordBatch()
			got += int(rec.NumRows())
			for _, col := range rec.Columns() {
				bytes += arrayBytes(col.Data())
			}
		}
		err = rdr.Err()
		rdr.Release()
		if err != nil || got != want {
			b.Fatalf("through Flight SQL: %d rows, %v; want %d", got, err, want)
		}
		return bytes
	}
	for _, q := range []struct {
		name, sql string
		rows      int // result rows
	}{
		{"hourly", hourlyQuery, 24 * 50},
		{"events", "SELECT * FROM events", int(n)},
	} {
		b.Run(q.name, func(b *testing.B) {
			var local, remote time.Duration
			var bytes int64
			for i := 0; i < b.N; i++ {
				benchFlip = !benchFlip
				for _, flightFirst := range []bool{benchFlip, !benchFlip} {
					began := time.Now()
					if flightFirst {
						bytes += throughFlight(q.sql, q.rows)
						remote += time.Since(began)
					} else {
						inProcess(q.sql, q.rows)
						local += time.Since(began)
					}
				}
			}
			runs := float64(b.N)
			b.ReportMetric(local.Seconds()/runs, "duckdb-s")
			b.ReportMetric(remote.Seconds()/runs, "flightsql-s")
			b.ReportMetric(n*runs/remote.Seconds(), "rows/s")
			b.ReportMetric(n*runs/local.Seconds(), "duckdb-rows/s")
			b.ReportMetric(float64(bytes)/1e6/remote.Seconds(), "arrow-MB/s")
		})
	}
}

// benchFlip alternates which contender runs first, run after run.
var benchFlip bool

func countRows(rdr array.RecordReader) int {
	n := 0
	for rdr.Next() {
		n += int(rdr.RecordBatch().NumRows())
	}
	return n
}
