package interop

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"reckon/activities"
	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/testing/testenv"
	"reckon/lake"
)

// The recompute-day lake: one UTC day of the payments stream (5-minute
// windows per user), dayRows() raw rows in 24 hourly files (a compacted
// day) of which every 100th is a redelivery of the row before it (same
// event, later offset and ingest time), and the stream's pane history in
// the summaries table: one pane per window with events, equal to the truth
// except every 97th, which misses one event (a too-late event the stream
// sent to the late topic).
const (
	dayTopic  = "payments-kejadian"
	dayStream = "payments"
	dayType   = "payment.checkout.completed"
	dayKeys   = 1000
	dayWindow = 5 * time.Minute
)

// dayRows is the size of the recompute-day lake: RECKON_BENCH_DAY_ROWS,
// default 1,000,000.
func dayRows() int {
	if v, err := strconv.Atoi(os.Getenv("RECKON_BENCH_DAY_ROWS")); err == nil && v > 0 {
		return v
	}
	return 1_000_000
}

// dayLake is the recompute-day lake, built once per process.
type dayLake struct {
	root  string
	rows  int64                  // raw rows, redeliveries included
	truth map[cellKey]*event.Agg // per user and window, each event once
}

type cellKey struct {
	key   string
	start int64 // window start, Unix µs
}

var (
	dayLakeBuilt bool
	dayLakeOnce  = sync.OnceValues(buildDayLake)
)

func getDayLake(b *testing.B) *dayLake {
	b.Helper()
	dayLakeBuilt = true
	d, err := dayLakeOnce()
	if err != nil {
		b.Fatal(err)
	}
	return d
}

func buildDayLake() (*dayLake, error) {
	dir, err := os.MkdirTemp("", "reckon-recompute-bench-")
	if err != nil {
		return nil, err
	}
	l, err := lake.Open(lake.Options{Root: dir})
	if err != nil {
		return nil, err
	}
	d := &dayLake{root: dir, truth: map[cellKey]*event.Agg{}}
	n := dayRows()
	rng := rand.New(rand.NewPCG(7, 11))
	names := make([]string, dayKeys)
	for i := range names {
		names[i] = fmt.Sprintf("user-%04d", i)
	}
	began := time.Now()
	off := int64(0)
	winUS := dayWindow.Microseconds()
	for h := 0; h < 24; h++ {
		per := n / 24
		if h < n%24 {
			per++
		}
		rows := make([]lake.RawRow, per)
		base := start.Add(time.Duration(h) * time.Hour).UnixMicro()
		for i := range rows {
			if i%100 == 99 { // a redelivery of the previous row
				r := rows[i-1]
				r.KafkaOffset, r.IngestedAt = off+int64(i), r.IngestedAt+2_000_000
				rows[i] = r
				continue
			}
			occ := base + int64(i)*3_600_000_000/int64(per)
			k := names[rng.IntN(dayKeys)]
			amount := float64(rng.IntN(10_000_000)) / 100
			rows[i] = lake.RawRow{
				EventID:     uuid(rng),
				EventType:   dayType,
				OccurredAt:  occ,
				IngestedAt:  occ + 150_000,
				Key:         k,
				Value:       amount,
				Data:        `{"user_id":"` + k + `","amount":` + strconv.FormatFloat(amount, 'f', -1, 64) + `,"currency":"IDR","channel":"web"}`,
				KafkaOffset: off + int64(i),
			}
			c := cellKey{k, occ - occ%winUS}
			a := d.truth[c]
			if a == nil {
				a = new(event.Agg)
				d.truth[c] = a
			}
			a.Add(amount)
		}
		if _, err := l.WriteRaw(context.Background(), dayTopic, 0, off, off+int64(per)-1, rows); err != nil {
			return nil, err
		}
		off += int64(per)
	}
	d.rows = off
	var panes []event.Pane
	for i, c := range slices.SortedFunc(maps.Keys(d.truth), cmpCell) {
		t := d.truth[c]
		ws := time.UnixMicro(c.start).UTC()
		p := event.Pane{
			Stream: dayStream, Key: c.key, WindowStart: ws, WindowEnd: ws.Add(dayWindow),
			Count: t.Count, Sum: t.Sum, Min: t.Min, Max: t.Max, Version: 1,
			Timing: event.TimingOnTime, ComputedBy: event.ComputedByStream,
			Watermark: ws.Add(dayWindow), EmittedAt: ws.Add(dayWindow + 5*time.Second),
		}
		if i%97 == 0 {
			p.Count-- // the stream missed one too-late event
		}
		panes = append(panes, p)
	}
	if _, err := l.WritePanes(context.Background(), dayStream, "stream-panes", panes); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "recompute-day lake: %d rows (1%% redeliveries), %d windows, in %s, written in %.1fs\n", d.rows, len(d.truth), dir, time.Since(began).Seconds())
	return d, nil
}

func cmpCell(a, b cellKey) int {
	if c := cmp.Compare(a.key, b.key); c != 0 {
		return c
	}
	return cmp.Compare(a.start, b.start)
}

// BenchmarkRecomputeDay measures recomputing one day of a stream from the
// lake, side by side with DuckDB on the same files in the same run:
//
//   - reckon: the Recompute workflow's activity, BatchTruth.RecomputeWindows,
//     for the whole day of the payments stream (5-minute windows, 1,000
//     users), run in Temporal's test activity environment (no server)
//     against an in-process kfake broker. It reads the published panes
//     (the lake's pane history and the summaries topic), scans the raw
//     files and folds every row through the stream operator's own window
//     code with event_id dedup (operator.Truth), compares every window with
//     its latest pane and writes the truth table. The corrections were
//     published by a check run before the clock starts, so the timed runs
//     find every window matched: the daily reconciliation's steady state.
//   - duckdb: one thread, the same grouping with DISTINCT ON (event_id)
//     over the same files: count, sum, min, max per user and window.
//
// Before timing, the truth table the check run wrote is compared with
// DuckDB's answer and with the generator's, window by window. Rows are
// RECKON_BENCH_DAY_ROWS (default 1,000,000).
func BenchmarkRecomputeDay(b *testing.B) {
	d := getDayLake(b)
	n := float64(d.rows)
	var cpu0 time.Duration
	report := func(b *testing.B) {
		b.ReportMetric(n*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		if cpu := (cpuTime() - cpu0).Seconds(); cpu > 0 {
			b.ReportMetric(n*float64(b.N)/cpu, "rows/cpu-s")
		}
		b.ReportMetric(float64(len(d.truth)), "windows")
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // SET threads applies to the connection
	if _, err := db.Exec("SET threads = 1"); err != nil {
		b.Fatal(err)
	}
	day := start.Truncate(24 * time.Hour)
	in := activities.RecomputeInput{Stream: dayStream, From: day, To: day.Add(24 * time.Hour), Trigger: activities.TriggerManual}
	a, env := recomputeEnv(b, d.root)
	recompute := func() (activities.RecomputeResult, error) {
		var res activities.RecomputeResult
		v, err := env.ExecuteActivity(a.RecomputeWindows, in)
		if err == nil {
			err = v.Get(&res)
		}
		return res, err
	}

	// The check run: publish the corrections, write the truth table, and
	// compare it with DuckDB's and the generator's answers.
	res, err := recompute()
	if err != nil {
		b.Fatal(err)
	}
	if want := int64((len(d.truth) + 96) / 97); res.Report.Corrected != want || res.Report.Windows != int64(len(d.truth)) {
		b.Fatalf("check run: %d windows, %d corrected; want %d, %d", res.Report.Windows, res.Report.Corrected, len(d.truth), want)
	}
	got, err := a.Lake.ReadTruth(b.Context(), dayStream, in.From, in.To)
	if err != nil {
		b.Fatal(err)
	}
	duck, err := duckRecompute(db, d.root, in.From, in.To)
	if err != nil {
		b.Fatal(err)
	}
	if err := sameTruth(got, duck, d.truth); err != nil {
		b.Fatal(err)
	}

	b.Run("reckon", func(b *testing.B) {
		cpu0 = cpuTime()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			res, err := recompute()
			if err != nil || res.Report.Matched != int64(len(d.truth)) || res.Report.Corrected != 0 {
				b.Fatalf("%+v, %v", res.Report, err)
			}
		}
		report(b)
	})
	b.Run("duckdb", func(b *testing.B) {
		cpu0 = cpuTime()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			aggs, err := duckRecompute(db, d.root, in.From, in.To)
			if err != nil || len(aggs) != len(d.truth) {
				b.Fatal(len(aggs), err)
			}
		}
		report(b)
	})
}

// recomputeEnv is the Truth activities on the lake at root and a fresh
// kfake broker, in a test activity environment.
func recomputeEnv(b *testing.B, root string) (*activities.BatchTruth, *testsuite.TestActivityEnvironment) {
	b.Helper()
	cfg, err := config.Load("", nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	_, brokers := testenv.Kafka(b, 1, "", cfg.Topics.Summaries)
	cfg, err = config.Load("", nil, []string{"kafka.brokers=" + brokers[0], "lake.root=" + root})
	if err != nil {
		b.Fatal(err)
	}
	l, err := lake.Open(lake.Options{Root: root})
	if err != nil {
		b.Fatal(err)
	}
	a := &activities.BatchTruth{Cfg: cfg, Lake: l}
	var s testsuite.WorkflowTestSuite
	s.SetLogger(tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := s.NewTestActivityEnvironment()
	env.SetTestTimeout(10 * time.Minute)
	env.RegisterActivity(a)
	return a, env
}

// windowAgg is one row of DuckDB's answer.
type windowAgg struct {
	cellKey
	event.Agg
}

// duckRecompute is the reference: the day's windows from the raw files,
// each event_id once.
func duckRecompute(db *sql.DB, root string, from, to time.Time) ([]windowAgg, error) {
	q := fmt.Sprintf(`SELECT key, epoch_us(occurred_at) // %[1]d * %[1]d AS w, count(*), sum(value), min(value), max(value)
FROM (SELECT DISTINCT ON (event_id) key, occurred_at, value
      FROM read_parquet('%[2]s/raw/topic=%[3]s/**/*.parquet', hive_partitioning=true)
      WHERE event_type = '%[4]s' AND occurred_at >= make_timestamptz(%[5]d) AND occurred_at < make_timestamptz(%[6]d))
GROUP BY ALL ORDER BY key, w`, dayWindow.Microseconds(), root, dayTopic, dayType, from.UnixMicro(), to.UnixMicro())
	rows, err := db.Query(q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []windowAgg
	for rows.Next() {
		var w windowAgg
		if err := rows.Scan(&w.key, &w.start, &w.Count, &w.Sum, &w.Min, &w.Max); err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// sameTruth checks reckon's truth rows against DuckDB's answer and the
// generator's: the same windows with the same count, min and max, and sums
// equal up to float rounding (the addition order differs).
func sameTruth(reckon []event.Pane, duck []windowAgg, gen map[cellKey]*event.Agg) error {
	if len(reckon) != len(gen) || len(duck) != len(gen) {
		return fmt.Errorf("windows: reckon %d, duckdb %d, generator %d", len(reckon), len(duck), len(gen))
	}
	byCell := map[cellKey]event.Agg{}
	for _, p := range reckon {
		byCell[cellKey{p.Key, p.WindowStart.UnixMicro()}] = event.Agg{Count: p.Count, Sum: p.Sum, Min: p.Min, Max: p.Max}
	}
	same := func(x, y event.Agg) bool {
		return x.Count == y.Count && x.Min == y.Min && x.Max == y.Max &&
			math.Abs(x.Sum-y.Sum) <= 1e-9*math.Max(1, math.Abs(y.Sum))
	}
	for _, w := range duck {
		r, ok := byCell[w.cellKey]
		g := gen[w.cellKey]
		if !ok || g == nil || !same(r, w.Agg) || !same(r, *g) {
			return fmt.Errorf("window %s %s: reckon %+v, duckdb %+v, generator %+v", w.key, time.UnixMicro(w.start).UTC().Format(time.RFC3339), r, w.Agg, g)
		}
	}
	return nil
}
