package sqlserve

import "reckon/internal/metrics"

// reasonVanished is the reason label of a retry after a vanished file.
const reasonVanished = "vanished_file"

// engineMetrics are the endpoint's figures on /metrics (deploy/README.md
// "What to alert on"). A series of each exists from the start, at 0.
type engineMetrics struct {
	retries, gaveUp *metrics.Vec
}

func newEngineMetrics(r *metrics.Registry) engineMetrics {
	if r == nil {
		r = metrics.NewRegistry()
	}
	m := engineMetrics{
		retries: r.Counter("reckon_sql_query_retries_total", "SQL queries run again after a failed attempt, by reason: "+
			"vanished_file, a lake file the query listed was deleted by a compaction before it was opened "+
			"(docs/adr/0031-sql-retry-on-vanished-files.md).", "reason"),
		gaveUp: r.Counter("reckon_sql_query_gave_up_total", "SQL queries failed after their retries, by reason "+
			"(as reckon_sql_query_retries_total); the client got the error.", "reason"),
	}
	m.retries.With(reasonVanished)
	m.gaveUp.With(reasonVanished)
	return m
}
