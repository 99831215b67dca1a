package interop

import (
	"strings"
	"testing"
	"time"
)

// analystQuery is the hourly DuckDB query with explicit deduplication, the
// form for hours not compacted yet (the README's, for closed hours, needs
// none: TestReadmeQueries). LAKE stands for the lake root.
const analystQuery = `
SET TimeZone = 'UTC';
SELECT key                                      AS id_perangkat,
       date_trunc('hour', occurred_at)          AS hour,
       count(*)                                 AS events,
       round(avg(value), 2)                     AS avg_suhu_c,
       min(value)                               AS min_suhu_c,
       max(value)                               AS max_suhu_c,
       max(CAST(data->>'lantai' AS INTEGER))    AS lantai
FROM (SELECT DISTINCT ON (event_id) *           -- each event once: redeliveries share event_id
      FROM read_parquet('LAKE/raw/**/*.parquet', hive_partitioning = true)
      WHERE topic = 'm8-suhu-kejadian' AND event_date = DATE '2026-11-07')
GROUP BY ALL
ORDER BY hour, id_perangkat;`

func TestAnalystQuery(t *testing.T) {
	l, _ := buildLake(t)
	db := openDuckDB(t)
	stmts := strings.SplitN(strings.ReplaceAll(analystQuery, "LAKE", l.Root()), ";", 2)
	if _, err := db.Exec(stmts[0]); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(stmts[1])
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var key string
		var hour time.Time
		var events, lantai int64
		var avg, mn, mx float64
		if err := rows.Scan(&key, &hour, &events, &avg, &mn, &mx, &lantai); err != nil {
			t.Fatal(err)
		}
		if hour.UTC().Minute() != 0 || events == 0 || lantai < 1 || lantai > 10 || mn > mx {
			t.Errorf("row %s %v %d %v %v %v %d", key, hour, events, avg, mn, mx, lantai)
		}
		n++
	}
	if err := rows.Err(); err != nil || n == 0 {
		t.Fatalf("%d rows, %v", n, err)
	}
}
