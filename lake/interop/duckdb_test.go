package interop

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/lake"
)

func openDuckDB(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1) // SET statements hold per connection
	t.Cleanup(func() { db.Close() })
	return db
}

// buildLake archives a realistic small topic with reckon's own writer and
// the project's gate configuration: 3 partitions, 4 event hours, two
// batches per partition (so hours hold several files), redeliveries,
// records the gate rejects, one compacted hour, a stale temporary file and
// the progress files, plus a summaries file.
func buildLake(t *testing.T) (*lake.Lake, int) {
	t.Helper()
	cfg, err := config.Load("", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	gate, err := event.NewGate(cfg.Gate)
	if err != nil {
		t.Fatal(err)
	}
	l, err := lake.Open(lake.Options{Root: t.TempDir(), RowGroupRows: 2000})
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.NewRawWriter(lake.RawTable{Topic: topic, KeyPath: "data.id_perangkat", ValuePath: "data.suhu_c"}, gate)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const perPartition = 6000
	for p := int32(0); p < 3; p++ {
		var recs []lake.RawRecord
		var prev []byte
		for i := 0; i < perPartition; i++ {
			occ := start.Add(time.Duration(i)*3*time.Hour/perPartition + time.Duration(rng.IntN(1e6))*time.Microsecond + time.Duration(p)*time.Hour)
			arrival := occ.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
			key := fmt.Sprintf("sensor-%02d", rng.IntN(12))
			var v []byte
			switch {
			case i%97 == 5 && prev != nil:
				v = prev // a redelivery: same bytes, new offset
			case i%211 == 7:
				v = envelope(uuid(rng), occ, key, 3, 99) // suhu_c above max: rejected
			case i%307 == 11:
				v = []byte(`{"event_id":"not-a-uuid"}`)
			default:
				v = envelope(uuid(rng), occ, key, 1+rng.IntN(10), float64(rng.IntN(3200))/64-4)
			}
			prev = v
			recs = append(recs, lake.RawRecord{Offset: int64(i), Timestamp: arrival, Value: v})
		}
		for _, b := range [][]lake.RawRecord{recs[:perPartition/2], recs[perPartition/2:]} {
			if _, err := w.WriteBatch(t.Context(), p, b); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := l.WriteProgress(t.Context(), lake.Progress{Topic: topic, Partition: p, NextOffset: perPartition, ArchivedThrough: recs[len(recs)-1].Timestamp}); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := l.Compact(context.Background(), topic, start.Add(time.Hour)); err != nil || len(res.Written) == 0 {
		t.Fatalf("compact: %+v, %v", res, err)
	}
	hourDir := lake.RawHourDir(l.Root(), topic, start.Add(2*time.Hour))
	if err := os.WriteFile(filepath.Join(hourDir, "."+topic+"-0-1-2.parquet.123.tmp"), []byte("half-written"), 0o644); err != nil {
		t.Fatal(err)
	}
	panes := []event.Pane{{Stream: "suhu", Key: "sensor-01", WindowStart: start, WindowEnd: start.Add(time.Hour), Count: 2, Sum: 49, Min: 24, Max: 25, Version: 1, Timing: event.TimingOnTime, ComputedBy: event.ComputedByStream, Watermark: start.Add(time.Hour), EmittedAt: start.Add(time.Hour)}}
	if _, err := l.WritePanes(t.Context(), "suhu", "stream-panes", panes); err != nil {
		t.Fatal(err)
	}
	return l, 3 * perPartition
}

// TestDuckDBReadsLake: DuckDB reads the lake with no configuration, sees
// the intended types and hive columns, and computes the same hourly
// aggregates as reckon's reader.
func TestDuckDBReadsLake(t *testing.T) {
	l, records := buildLake(t)
	db := openDuckDB(t)
	raw := fmt.Sprintf("read_parquet('%s/raw/**/*.parquet', hive_partitioning=true)", l.Root())

	types := map[string]string{}
	rows, err := db.Query("DESCRIBE SELECT * FROM " + raw)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, typ string
		var null, key, def, extra sql.NullString
		if err := rows.Scan(&name, &typ, &null, &key, &def, &extra); err != nil {
			t.Fatal(err)
		}
		types[name] = typ
	}
	rows.Close()
	want := map[string]string{
		"event_id": "VARCHAR", "event_type": "VARCHAR", "occurred_at": "TIMESTAMP WITH TIME ZONE",
		"ingested_at": "TIMESTAMP WITH TIME ZONE", "key": "VARCHAR", "value": "DOUBLE", "data": "VARCHAR",
		"kafka_partition": "INTEGER", "kafka_offset": "BIGINT",
		// DuckDB autodetects zero-padded hours ("07") as VARCHAR, which
		// orders like the number: the README filters hours as strings;
		// hive_types={'event_hour': INTEGER} also works (checked below).
		"topic": "VARCHAR", "event_date": "DATE", "event_hour": "VARCHAR",
	}
	for c, w := range want {
		if types[c] != w {
			t.Errorf("column %s: DuckDB type %q, want %q", c, types[c], w)
		}
	}
	if len(types) != len(want) {
		t.Errorf("DuckDB sees columns %v", types)
	}

	var hourType string
	mustScan(t, db, "SELECT column_type FROM (DESCRIBE SELECT * FROM "+strings.TrimSuffix(raw, ")")+", hive_types={'event_hour': INTEGER})) WHERE column_name = 'event_hour'", &hourType)
	if hourType != "INTEGER" {
		t.Errorf("event_hour with hive_types: %q, want INTEGER", hourType)
	}

	// Every row is where its hive columns say, and each offset is once in
	// the compacted hour.
	var bad, dupOffsets, n, rejected int64
	mustScan(t, db, fmt.Sprintf(`SELECT count(*) FILTER (WHERE topic <> '%s' OR event_date <> CAST(occurred_at AT TIME ZONE 'UTC' AS DATE)
	        OR CAST(event_hour AS INTEGER) <> (epoch_us(occurred_at) // 3600000000) %% 24), count(*) FROM %s`, topic, raw), &bad, &n)
	if bad != 0 {
		t.Errorf("%d rows in the wrong hive partition", bad)
	}
	mustScan(t, db, fmt.Sprintf(`SELECT count(*) FROM (SELECT kafka_partition, kafka_offset FROM %s
	        WHERE event_hour = '01' GROUP BY ALL HAVING count(*) > 1)`, raw), &dupOffsets)
	if dupOffsets != 0 {
		t.Errorf("compacted hour holds %d offsets twice", dupOffsets)
	}
	// The compacted (closed) hour needs no DISTINCT ON: each event once,
	// its redeliveries in raw_dropped (docs/adr/0018-continuous-compaction.md).
	var hourRows, hourIDs, dropped int64
	mustScan(t, db, fmt.Sprintf(`SELECT count(*), count(DISTINCT event_id) FROM %s WHERE event_hour = '01'`, raw), &hourRows, &hourIDs)
	mustScan(t, db, fmt.Sprintf(`SELECT count(*) FROM read_parquet('%s/raw_dropped/**/*.parquet', hive_partitioning=true) WHERE event_hour = '01'`, l.Root()), &dropped)
	if hourRows != hourIDs || dropped == 0 {
		t.Errorf("compacted hour: %d rows, %d distinct events, %d redeliveries dropped", hourRows, hourIDs, dropped)
	}
	mustScan(t, db, fmt.Sprintf(`SELECT count(*) FROM read_parquet('%s/rejected/**/*.parquet', hive_partitioning=true) WHERE octet_length(raw) > 0 AND reason <> ''`, l.Root()), &rejected)
	if n+rejected+dropped < int64(records) || rejected == 0 {
		t.Errorf("raw %d + rejected %d + raw_dropped %d rows, %d records archived", n, rejected, dropped, records)
	}
	var panes int64
	var ws time.Time
	mustScan(t, db, fmt.Sprintf(`SELECT count(*), min(window_start) FROM read_parquet('%s/summaries/**/*.parquet', hive_partitioning=true) WHERE stream = 'suhu' AND window_date = DATE '2026-11-07'`, l.Root()), &panes, &ws)
	if panes != 1 || !ws.Equal(start) {
		t.Errorf("summaries: %d panes, window_start %v", panes, ws)
	}

	// Per key and hour, deduplicated by event_id: DuckDB == reckon.
	aggs, st, err := l.Aggregate(context.Background(), lake.Query{Topic: topic, From: start, To: start.Add(5 * time.Hour)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if st.Duplicates == 0 {
		t.Error("the lake has no redeliveries to deduplicate")
	}
	rows, err = db.Query(fmt.Sprintf(`SELECT key, epoch_us(occurred_at) // 3600000000 AS h, count(*), sum(value), min(value), max(value)
	        FROM (SELECT DISTINCT ON (event_id) key, occurred_at, value FROM %s) GROUP BY ALL ORDER BY key, h`, raw))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	i := 0
	for ; rows.Next(); i++ {
		var key string
		var h, count int64
		var sum, mn, mx float64
		if err := rows.Scan(&key, &h, &count, &sum, &mn, &mx); err != nil {
			t.Fatal(err)
		}
		if i >= len(aggs) {
			continue
		}
		a := aggs[i]
		if a.Key != key || a.WindowStart.UnixMicro() != h*3_600_000_000 || a.Count != count || math.Abs(a.Sum-sum) > 1e-9*math.Max(1, math.Abs(sum)) || a.Min != mn || a.Max != mx {
			t.Errorf("window %d: reckon %s %v %+v, DuckDB %s %d count %d sum %v min %v max %v", i, a.Key, a.WindowStart, a.Agg, key, h, count, sum, mn, mx)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if i != len(aggs) || i == 0 {
		t.Errorf("DuckDB has %d windows, reckon %d", i, len(aggs))
	}
}

func mustScan(t *testing.T, db *sql.DB, q string, dst ...any) {
	t.Helper()
	if err := db.QueryRow(q).Scan(dst...); err != nil {
		t.Fatalf("%s: %v", strings.Join(strings.Fields(q), " "), err)
	}
}
