package activities

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"reckon/internal/config"
	"reckon/lake"
	"reckon/streaming/operator"
)

// TestFeatureFoldMatchesOperatorTruth: foldFeatures gives every event of
// its scope the count and sum operator.RollingTruth (the operator's own
// rollWindow) gives it over the scan's valid unique events, bit for bit:
// on rows made to hit every rule (redeliveries, an event_id reused at
// another time or key, ties of event time with other values, ids that
// are not canonical UUIDs, values that are not finite, other event
// types), for a whole range and for a targeted correction's spans
// [ws, we + rolling), with and without a value field.
func TestFeatureFoldMatchesOperatorTruth(t *testing.T) {
	lk, err := lake.Open(lake.Options{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	const topic = "feat-kejadian"
	st := config.Stream{Name: "feat", Topic: topic, EventTypes: []string{"feat.ev"}, KeyField: "k", ValueField: "v",
		Window: 5 * time.Minute, Rolling: 7 * time.Minute}
	day := time.Date(2026, 11, 7, 0, 0, 0, 0, time.UTC)
	span := 3 * time.Hour
	rng := rand.New(rand.NewPCG(7, 11))
	uuidOf := func(n int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", n, n*7919) }
	var rows []lake.RawRow
	for i := range 6_000 {
		occ := day.UnixMicro() + rng.Int64N(span.Microseconds())
		r := lake.RawRow{
			EventID: uuidOf(i), EventType: "feat.ev", OccurredAt: occ, IngestedAt: occ + rng.Int64N(60_000_000),
			Key: fmt.Sprintf("k%02d", rng.IntN(12)), Value: float64(rng.IntN(1_000_000)) / 100,
		}
		switch j := rng.IntN(100); {
		case j < 5 && i > 0: // a redelivery
			r = rows[rng.IntN(len(rows))]
			r.IngestedAt += 1_000_000
		case j < 8 && i > 0: // an earlier id at another time
			r.EventID = rows[rng.IntN(len(rows))].EventID
		case j < 10 && i > 0: // an earlier id with another key
			p := rows[len(rows)-1]
			r.EventID, r.OccurredAt = p.EventID, p.OccurredAt+rng.Int64N(60_000_000)
		case j < 16 && i > 0: // the same instant as an earlier event of the key, another value
			p := rows[rng.IntN(len(rows))]
			r.Key, r.OccurredAt = p.Key, p.OccurredAt
		case j < 17:
			r.EventID = strings.ToUpper(r.EventID)
		case j < 18:
			r.Value = math.NaN()
		case j < 19:
			r.Value = math.Inf(-1)
		case j < 20:
			r.EventType = "other.ev"
		}
		r.KafkaOffset = int64(i)
		rows = append(rows, r)
	}
	if _, err := lk.WriteRaw(t.Context(), topic, 0, 0, int64(len(rows)-1), rows); err != nil {
		t.Fatal(err)
	}

	from, to := day.Add(30*time.Minute), day.Add(2*time.Hour)
	targeted := RecomputeInput{Stream: st.Name, From: from, To: to, Windows: []WindowRef{
		{Key: "k03", Start: day.Add(40 * time.Minute)}, {Key: "k03", Start: day.Add(75 * time.Minute)},
		{Key: "k07", Start: day.Add(115 * time.Minute)},
	}}
	for _, field := range []string{"v", ""} {
		for name, in := range map[string]RecomputeInput{"range": {Stream: st.Name, From: from, To: to}, "targeted": targeted} {
			t.Run(name+"/value_field="+field, func(t *testing.T) {
				st := st
				st.ValueField = field
				scope := featureScopeOf(in, st.Window, st.Rolling)
				a := &BatchTruth{Lake: lk}
				got, err := a.foldFeatures(t.Context(), st, scope, day, "test")
				if err != nil {
					t.Fatal(err)
				}
				// The reference: the scan's valid records, each id once (the
				// first in scan order), per key in scan order.
				scanFrom := time.Unix(0, scope.from).Add(-st.Rolling).Add(time.Nanosecond).Truncate(time.Microsecond)
				byKey := map[string][]operator.Record{}
				seen := map[operator.EventID]bool{}
				var want []operator.Record // the scope's events
				_, err = lk.Scan(t.Context(), lake.Query{Topic: topic, From: scanFrom, To: time.Unix(0, scope.to),
					Keys: scope.keys(), EventTypes: st.EventTypes},
					lake.ColEventID|lake.ColKey|lake.ColValue|lake.ColOccurredAt,
					func(r *lake.RawRow) error {
						id, ok := operator.ParseEventID(r.EventID)
						v := r.Value
						if field == "" {
							v = 0
						}
						if !ok || math.IsNaN(v) || math.IsInf(v, 0) || seen[id] {
							return nil
						}
						seen[id] = true
						rec := operator.Record{ID: id, Key: r.Key, Value: v, EventTime: r.OccurredTime()}
						byKey[r.Key] = append(byKey[r.Key], rec)
						if scope.has(r.Key, rec.EventTime.UnixNano()) {
							want = append(want, rec)
						}
						return nil
					})
				if err != nil {
					t.Fatal(err)
				}
				if len(want) < 50 || len(got) != len(want) {
					t.Fatalf("%d truth rows, %d events in scope", len(got), len(want))
				}
				gotBy := map[string]lake.FeatureTruthRow{}
				for _, g := range got {
					if _, dup := gotBy[g.EventID]; dup {
						t.Fatalf("event %s twice", g.EventID)
					}
					gotBy[g.EventID] = g
				}
				ties := 0
				for _, w := range want {
					g, ok := gotBy[w.ID.String()]
					if !ok {
						t.Fatalf("event %s (%s at %s): no truth row", w.ID, w.Key, w.EventTime.Format(time.TimeOnly))
					}
					agg := operator.RollingTruth(st.Rolling, w.EventTime, byKey[w.Key])
					if g.Key != w.Key || g.EventTime != w.EventTime.UnixMicro() || g.Count != agg.Count ||
						math.Float64bits(g.Sum) != math.Float64bits(agg.Sum) || g.SizeNS != int64(st.Rolling) {
						t.Errorf("event %s: %s %d/%v, RollingTruth %s %d/%v", w.ID, g.Key, g.Count, g.Sum, w.Key, agg.Count, agg.Sum)
					}
					if g.Count > 1 {
						ties++
					}
				}
				if ties == 0 {
					t.Fatal("no event with another in its window: the test checks nothing")
				}
			})
		}
	}
}

// TestCompareServed: the served features (as curated into the
// feature_status table) are matched with their truth by event id (the
// first emitted of an event served twice), counted exact,
// differs or not served with the errors of those that differ, and a
// served feature of another rolling size is refused as a settings
// mismatch.
func TestCompareServed(t *testing.T) {
	lk, err := lake.Open(lake.Options{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	st := config.Stream{Name: "feat", Rolling: time.Minute, Window: time.Minute}
	at := time.Date(2026, 11, 7, 10, 0, 0, 0, time.UTC)
	truth := []lake.FeatureTruthRow{
		{Key: "a", EventID: "e1", EventTime: at.UnixMicro(), Count: 1, Sum: 10},
		{Key: "a", EventID: "e2", EventTime: at.Add(time.Second).UnixMicro(), Count: 3, Sum: 30.5},
		{Key: "b", EventID: "e3", EventTime: at.Add(2 * time.Second).UnixMicro(), Count: 2, Sum: 7},
	}
	served := []lake.FeatureRow{
		{Stream: "feat", Key: "a", EventID: "e1", EventTime: truth[0].EventTime, SizeNS: int64(time.Minute), Count: 1, Sum: 10, EmittedAt: 5},
		{Stream: "feat", Key: "a", EventID: "e2", EventTime: truth[1].EventTime, SizeNS: int64(time.Minute), Count: 1, Sum: 10, EmittedAt: 6},
		// e2 again, emitted later (a replay): the first emitted counts.
		{Stream: "feat", Key: "a", EventID: "e2", EventTime: truth[1].EventTime, SizeNS: int64(time.Minute), Count: 3, Sum: 30.5, EmittedAt: 9},
		// Served for an event the lake does not hold.
		{Stream: "feat", Key: "c", EventID: "e9", EventTime: truth[1].EventTime, SizeNS: int64(time.Minute), Count: 1, Sum: 1, EmittedAt: 7},
	}
	fs, err := lk.WriteFeatures(t.Context(), "f-0-0-3", served)
	if err != nil {
		t.Fatal(err)
	}
	// The comparison reads the curated table, as the features archive
	// curates each step's files.
	for _, f := range fs {
		if _, err := lk.Curate(t.Context(), []string{f.Path}); err != nil {
			t.Fatal(err)
		}
	}
	a := &BatchTruth{Lake: lk}
	scope := featureScope{from: at.UnixNano(), to: at.Add(time.Hour).UnixNano()}
	rep, err := a.compareServed(t.Context(), st, &scope, truth)
	if err != nil {
		t.Fatal(err)
	}
	want := FeatureReport{Checked: 3, Exact: 1, Differs: 1, NotServed: 1, ServedWithoutTruth: 1,
		CountErrMax: 2, CountErrMean: 1, SumErrMax: 20.5, SumErrMean: 10.25, CountErrTotal: 2, SumErrTotal: 20.5}
	if rep != want {
		t.Fatalf("report %+v\nwant   %+v", rep, want)
	}
	st.Rolling = 2 * time.Minute
	_, err = a.compareServed(t.Context(), st, &scope, truth)
	var ae interface{ Type() string }
	if !errors.As(err, &ae) || ae.Type() != ErrTypeTruthSettings {
		t.Fatalf("rolling changed: %v, want a %s error", err, ErrTypeTruthSettings)
	}
}
