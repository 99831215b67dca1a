//go:build duckdb_arrow

package sqlserve

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"reckon/lake"
)

// TestCuratedFeaturesEqualHistory: the features view reads the curated
// feature_status table (docs/adr/0038-feature-truth.md) and, whether the
// served features and the truths were curated file by file in any order
// (lake.Curate, as the features archive and the recomputes do) or rebuilt
// (lake.RebuildFeatureStatus), holds exactly what featuresHistorySQL
// computes from the history (served_features, feature_truth);
// features_as_of(now()) equals it too. The history holds events served
// twice, truths recomputed with other figures at later instants, events
// never served and served events without a truth yet, around midnight.
func TestCuratedFeaturesEqualHistory(t *testing.T) {
	root := t.TempDir()
	l, err := lake.Open(lake.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(23, 29))
	const size = int64(60 * time.Second)
	var served []lake.FeatureRow
	var truths []lake.FeatureTruthRow
	emitted := t0.Add(-2 * time.Hour).UnixMicro()
	for i := range 600 {
		id := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
		et := t0.Add(-90 * time.Minute).Add(time.Duration(rng.Int64N(int64(3 * time.Hour)))).UnixMicro()
		key := fmt.Sprintf("u%d", rng.IntN(8))
		count, sum := 1+rng.Int64N(5), float64(rng.IntN(100_000))/100
		kind := rng.IntN(10)
		if kind != 0 { // served (kind 0: never served)
			for range 1 + rng.IntN(2) { // some events twice (a redelivery the dedup forgot)
				emitted += rng.Int64N(2_000_000)
				served = append(served, lake.FeatureRow{Stream: "payments", Key: key, EventID: id, EventTime: et, SizeNS: size,
					Count: count, Sum: sum, EmittedAt: emitted, KafkaPartition: int32(rng.IntN(2)), KafkaOffset: int64(len(served))})
				count += rng.Int64N(2)
			}
		}
		if kind != 1 { // a truth (kind 1: pending), sometimes recomputed
			for n := range 1 + rng.IntN(3) {
				tc, ts := count, sum
				if rng.IntN(3) == 0 {
					tc, ts = count+1+rng.Int64N(3), sum+float64(rng.IntN(1000))
				}
				truths = append(truths, lake.FeatureTruthRow{Stream: "payments", Key: key, EventID: id, EventTime: et, SizeNS: size,
					Count: tc, Sum: ts, ComputedAt: t0.Add(time.Duration(n+rng.IntN(3)) * time.Hour).UnixMicro(), Trigger: "finalize"})
			}
		}
	}
	rng.Shuffle(len(served), func(i, j int) { served[i], served[j] = served[j], served[i] })
	rng.Shuffle(len(truths), func(i, j int) { truths[i], truths[j] = truths[j], truths[i] })
	// Files of a few rows each, curated one by one in a random order.
	var files [][]string
	for lo, n := 0, 0; lo < len(served); n++ {
		hi := min(len(served), lo+1+rng.IntN(60))
		fs, err := l.WriteFeatures(t.Context(), fmt.Sprintf("reckon-features-0-%d-%d", n, n), served[lo:hi])
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			files = append(files, []string{f.Path})
		}
		lo = hi
	}
	for lo, n := 0, 0; lo < len(truths); n++ {
		hi := min(len(truths), lo+1+rng.IntN(60))
		fs, err := l.WriteFeatureTruth(t.Context(), "payments", fmt.Sprintf("truth-%03d", n), truths[lo:hi], false)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			files = append(files, []string{f.Path})
		}
		lo = hi
	}
	rng.Shuffle(len(files), func(i, j int) { files[i], files[j] = files[j], files[i] })

	c := newClient(t, startServer(t, openEngine(t, root), ServeOptions{}))
	count := func(q string) int {
		t.Helper()
		n, err := strconv.Atoi(mustRead(t, c, q).rows[0][0])
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	def := featuresHistorySQL("true")
	events := count("SELECT count(DISTINCT event_id) FROM (SELECT event_id FROM served_features UNION ALL SELECT event_id FROM feature_truth)")
	if n := count("SELECT count(*) FROM (" + def + ")"); n != events || events != 600 {
		t.Fatalf("features definition: %d rows, %d events, want 600", n, events)
	}
	if n := count("SELECT count(*) FROM features"); n != 0 {
		t.Fatalf("before any curation: features holds %d rows", n)
	}
	for _, f := range files {
		if _, err := l.Curate(t.Context(), f); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		for _, q := range []struct{ name, view, def string }{
			{"features", "SELECT * FROM features", def},
			{"features_as_of(now())", "SELECT * FROM features", "SELECT * FROM features_as_of(now())"},
		} {
			if d := symmetricDiff(t, c, q.view, q.def); len(d) > 0 {
				t.Errorf("%s: %s differs from its definition:\n%s", when, q.name, strings.Join(d, "\n"))
			}
		}
	}
	check("curated file by file")
	// Every status, and both dates.
	got := mustRead(t, c, `SELECT string_agg(DISTINCT status, ',' ORDER BY status),
	    count(DISTINCT event_time::DATE) FROM features`).rows[0]
	if got[0] != "differs,exact,not_served,pending" || got[1] != "2" {
		t.Errorf("the history lacks a case: statuses %s, %s dates", got[0], got[1])
	}
	// Half-way knowledge: features_as_of(T) sees the truths computed by T only.
	if n := count("SELECT count(*) FROM features_as_of(TIMESTAMP '" + t0.Format("2006-01-02 15:04") + "') WHERE status = 'pending'"); n <= count("SELECT count(*) FROM features WHERE status = 'pending'") {
		t.Errorf("features_as_of(%s): %d pending, no more than now", t0.Format(time.RFC3339), n)
	}
	for _, day := range []time.Time{t0.Add(-24 * time.Hour), t0} {
		if _, err := l.RebuildFeatureStatus(t.Context(), "payments", day); err != nil {
			t.Fatal(err)
		}
	}
	check("rebuilt")
}
