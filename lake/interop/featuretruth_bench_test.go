package interop

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"reckon/activities"
	"reckon/internal/config"
	"reckon/lake"
)

// The feature-day lake: one UTC day of the payments stream for
// featDayKeys users, dayRows() raw rows in 24 hourly files of which every
// 100th is a redelivery of the row before it. Amounts are whole rupiah,
// so every sum is exact in float64 and DuckDB's window sums (summed in
// its own order) must equal reckon's bit for bit.
const featDayKeys = 10_000

var featDayOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "reckon-feature-bench-")
	if err != nil {
		return "", err
	}
	l, err := lake.Open(lake.Options{Root: dir})
	if err != nil {
		return "", err
	}
	n := dayRows()
	rng := rand.New(rand.NewPCG(13, 17))
	off := int64(0)
	for h := 0; h < 24; h++ {
		per := n / 24
		if h < n%24 {
			per++
		}
		rows := make([]lake.RawRow, per)
		base := start.Add(time.Duration(h) * time.Hour).UnixMicro()
		for i := range rows {
			if i%100 == 99 {
				r := rows[i-1]
				r.KafkaOffset, r.IngestedAt = off+int64(i), r.IngestedAt+2_000_000
				rows[i] = r
				continue
			}
			// Random instants in the hour: users' events cluster, so many
			// rolling windows hold several.
			occ := base + rng.Int64N(3_600_000_000)
			k := fmt.Sprintf("user-%05d", rng.IntN(featDayKeys))
			amount := float64(1000 + rng.IntN(5_000_000))
			rows[i] = lake.RawRow{EventID: uuid(rng), EventType: dayType, OccurredAt: occ, IngestedAt: occ + 150_000,
				Key: k, Value: amount, Data: `{"user_id":"` + k + `","amount":` + strconv.FormatFloat(amount, 'f', -1, 64) + `}`,
				KafkaOffset: off + int64(i)}
		}
		if _, err := l.WriteRaw(context.Background(), dayTopic, 0, off, off+int64(per)-1, rows); err != nil {
			return "", err
		}
		off += int64(per)
	}
	return dir, nil
})

// peakRSS resets the process's peak resident set (Linux: clear_refs 5)
// and returns a function reporting how far it rose above the resident set
// at the reset, in bytes; 0 where /proc cannot say.
func peakRSS() func() float64 {
	rss := func(field string) float64 {
		f, err := os.Open("/proc/self/status")
		if err != nil {
			return 0
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				return kb * 1024
			}
		}
		return 0
	}
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return func() float64 { return 0 }
	}
	before := rss("VmRSS")
	return func() float64 { return max(rss("VmHWM")-before, 0) }
}

// duckFeatureSQL is the reference: each event once (the first archived
// copy), its key's count and sum over (event_time − 60 s, event_time] by
// a window function. RANGE frames are closed: 59.999999 s PRECEDING at
// the lake's microsecond resolution is the open start of reckon's
// rolling window.
func duckFeatureSQL(root string) string {
	return `WITH e AS (
  SELECT event_id, key, occurred_at, value FROM read_parquet('` + root + `/raw/**/*.parquet', hive_partitioning = true)
  WHERE event_type = '` + dayType + `'
  QUALIFY row_number() OVER (PARTITION BY event_id ORDER BY ingested_at, kafka_partition, kafka_offset) = 1
)
SELECT event_id, count(*) OVER w, sum(value) OVER w FROM e
WINDOW w AS (PARTITION BY key ORDER BY occurred_at
  RANGE BETWEEN INTERVAL 59999999 MICROSECONDS PRECEDING AND CURRENT ROW)`
}

// BenchmarkFeatureTruthDay computes the true rolling feature (60 s count
// and sum) of every event of one day of the payments stream (dayRows()
// rows, 1 % redeliveries, 10,000 users) as a recompute does
// (activities.FeatureTruthRows), side by side in the same run with
// DuckDB (SET threads = 1) computing the same with a window function over
// the same files. Before timing, the answers are checked equal event by
// event. Reported: events/s, events/cpu-s, and the peak resident memory
// each added (peak-rss-B).
func BenchmarkFeatureTruthDay(b *testing.B) {
	root, err := featDayOnce()
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := config.Load("", nil, []string{"lake.root=" + root})
	if err != nil {
		b.Fatal(err)
	}
	l, err := lake.Open(lake.Options{Root: root})
	if err != nil {
		b.Fatal(err)
	}
	a := &activities.BatchTruth{Cfg: cfg, Lake: l}
	pay, _ := cfg.StreamByName(dayStream)
	if pay.Rolling != time.Minute {
		b.Fatalf("payments rolling %v: the reference query is for 60 s", pay.Rolling)
	}
	day := start.Truncate(24 * time.Hour)
	in := activities.RecomputeInput{Stream: dayStream, From: day, To: day.Add(24 * time.Hour), Trigger: activities.TriggerManual}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("SET threads = 1"); err != nil {
		b.Fatal(err)
	}
	type fig struct {
		count int64
		sum   float64
	}
	duck := func(check map[string]fig) (int, error) {
		rows, err := db.Query(duckFeatureSQL(root))
		if err != nil {
			return 0, err
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			var id string
			var f fig
			if err := rows.Scan(&id, &f.count, &f.sum); err != nil {
				return n, err
			}
			if check != nil {
				check[id] = f
			}
			n++
		}
		return n, rows.Err()
	}

	// The answers, event by event, before any timing.
	got, err := activities.FeatureTruthRows(context.Background(), a, in)
	if err != nil {
		b.Fatal(err)
	}
	want := map[string]fig{}
	if _, err := duck(want); err != nil {
		b.Fatal(err)
	}
	several := 0
	for _, r := range got {
		w, ok := want[r.EventID]
		if !ok || w.count != r.Count || w.sum != r.Sum {
			b.Fatalf("event %s (%s): reckon %d/%v, duckdb %d/%v (found %v)", r.EventID, r.Key, r.Count, r.Sum, w.count, w.sum, ok)
		}
		if r.Count > 1 {
			several++
		}
	}
	if len(got) != len(want) || several == 0 {
		b.Fatalf("reckon %d events, duckdb %d; %d windows with more than one event", len(got), len(want), several)
	}
	events := float64(len(got))
	b.Logf("answers equal for %d events (%d windows with more than one event)", len(got), several)

	run := func(b *testing.B, f func() (int, error)) {
		// What the check run left behind goes back to the OS first, so the
		// peak counts this side's own memory.
		debug.FreeOSMemory()
		peak := peakRSS()
		cpu0 := cpuTime()
		b.ResetTimer()
		for range b.N {
			n, err := f()
			if err != nil {
				b.Fatal(err)
			}
			if float64(n) != events {
				b.Fatalf("%d events, want %v", n, events)
			}
		}
		b.StopTimer()
		b.ReportMetric(events*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		if cpu := (cpuTime() - cpu0).Seconds(); cpu > 0 {
			b.ReportMetric(events*float64(b.N)/cpu, "events/cpu-s")
		}
		b.ReportMetric(peak(), "peak-rss-B")
	}
	b.Run("reckon", func(b *testing.B) {
		run(b, func() (int, error) {
			rows, err := activities.FeatureTruthRows(context.Background(), a, in)
			return len(rows), err
		})
	})
	b.Run("duckdb", func(b *testing.B) {
		run(b, func() (int, error) { return duck(nil) })
	})
}
