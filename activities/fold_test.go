package activities

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/lake"
	"reckon/streaming/operator"
)

// TestFoldMatchesOperatorTruth: foldLake, which folds the lake's rows
// into the window table directly, gives every window the aggregate that
// operator.Truth gives it (the operator's own window code, unbounded), bit
// for bit, and counts the events beyond the stream's panes as the scan
// sees them, on rows made to hit every rule: redeliveries, an event_id
// reused with another time or key (inside and across chunks), ids that
// are not canonical UUIDs, values that are not finite, and windows of 7
// minutes, whose 63-minute chunks cut across the lake's hours; and with
// hopping windows (7 minutes every minute, docs/adr/0041), whose chunks
// scan 6 minutes past their last window start, events after the range's
// end included.
func TestFoldMatchesOperatorTruth(t *testing.T) {
	lk, err := lake.Open(lake.Options{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	const topic = "fold-kejadian"
	st := config.Stream{Name: "fold", Topic: topic, EventTypes: []string{"fold.ev"}, KeyField: "k", ValueField: "v", Window: 7 * time.Minute}
	// Aligned to the epoch, as checkRange wants.
	from := time.Unix(0, floorNanos(time.Date(2026, 11, 7, 0, 0, 0, 0, time.UTC).UnixNano(), int64(st.Window))).UTC()
	to := from.Add(7 * time.Minute * 60) // 7 hours
	rng := rand.New(rand.NewPCG(3, 5))
	// Published panes: every third window of some keys has a stream
	// pane emitted at a random instant within it.
	emitted := map[winKey]int64{}
	win := int64(st.Window)
	for s := from.UnixNano(); s < to.UnixNano(); s += win {
		for k := range 30 {
			if (s/win+int64(k))%3 != 0 {
				continue
			}
			key := fmt.Sprintf("k%02d", k)
			e := s/1000 + rng.Int64N(win/1000)
			emitted[winKey{key, s}] = e
		}
	}
	var rows []lake.RawRow
	uuidOf := func(n int) string {
		return fmt.Sprintf("%08x-0000-4000-8000-%012x", n, n*7919)
	}
	for i := range 20_000 {
		// Some events after the range's end: only hopping windows that
		// start inside it hold them.
		occ := from.UnixMicro() + rng.Int64N(to.Add(10*time.Minute).Sub(from).Microseconds())
		r := lake.RawRow{
			EventID: uuidOf(i), EventType: "fold.ev", OccurredAt: occ, IngestedAt: occ + rng.Int64N(600_000_000),
			Key: fmt.Sprintf("k%02d", rng.IntN(30)), Value: float64(rng.IntN(1_000_000)) / 100,
		}
		switch j := rng.IntN(100); {
		case j < 5 && i > 0: // a redelivery of an earlier event
			r = rows[rng.IntN(len(rows))]
			r.IngestedAt += 1_000_000
		case j < 8 && i > 0: // an earlier id at another time (maybe another chunk)
			r.EventID = rows[rng.IntN(len(rows))].EventID
		case j < 10 && i > 0: // an earlier id with another key, close in time
			p := rows[len(rows)-1]
			r.EventID, r.OccurredAt = p.EventID, p.OccurredAt+rng.Int64N(60_000_000)
		case j < 11:
			r.EventID = strings.ToUpper(r.EventID) // not canonical
		case j < 12:
			r.Value = math.NaN()
		case j < 13:
			r.Value = math.Inf(1)
		case j < 14:
			r.EventType = "other.ev"
		case j < 20: // ingested at the very microsecond its pane was emitted
			if e, ok := emitted[winKey{r.Key, floorNanos(occ*1000, win)}]; ok {
				r.IngestedAt = e
			}
		}
		r.KafkaOffset = int64(i)
		rows = append(rows, r)
	}
	if _, err := lk.WriteRaw(t.Context(), topic, 0, 0, int64(len(rows)-1), rows); err != nil {
		t.Fatal(err)
	}

	// A stream without a value field counts every event with value 0.
	for _, c := range []struct {
		field string
		hop   time.Duration
	}{{"v", 0}, {"", 0}, {"v", time.Minute}} {
		t.Run(fmt.Sprintf("value_field=%s,hop=%v", c.field, c.hop), func(t *testing.T) {
			st := st
			st.ValueField, st.Hop = c.field, c.hop
			span := st.Window - st.Step()
			tab := newWindowTable(from, to, st.Step())
			for k, e := range emitted {
				tab.addPane(cellID{tab.intern(k.key), k.start}, paneFig{version: 1}, event.ComputedByStream, e)
			}
			a := &BatchTruth{Lake: lk}
			if err := a.foldLake(t.Context(), st, from, to, nil, tab); err != nil {
				t.Fatal(err)
			}

			// The reference: operator.Truth over each chunk's scan, as the
			// recompute did before foldLake, and the beyond counts of that
			// scan. A chunk holds the windows starting in [cf, ct) and
			// scans the events they cover, [cf, ct + span).
			want := map[winKey]event.Agg{}
			beyond := map[winKey]int64{}
			step := 63 * time.Minute
			for cf := from; cf.Before(to); cf = cf.Add(step) {
				ct := cf.Add(step)
				if ct.After(to) {
					ct = to
				}
				in := func(start int64) bool { return start >= cf.UnixNano() && start < ct.UnixNano() }
				var scanErr error
				seq := iter.Seq[operator.Record](func(yield func(operator.Record) bool) {
					_, scanErr = lk.Scan(t.Context(), lake.Query{Topic: topic, From: cf, To: ct.Add(span), EventTypes: st.EventTypes},
						lake.ColEventID|lake.ColKey|lake.ColValue|lake.ColOccurredAt|lake.ColIngestedAt,
						func(r *lake.RawRow) error {
							id, ok := operator.ParseEventID(r.EventID)
							if !ok {
								return nil
							}
							occ := r.OccurredTime().UnixNano()
							for s := floorNanos(occ, int64(st.Step())); s > occ-win; s -= int64(st.Step()) {
								k := winKey{r.Key, s}
								if e, ok := emitted[k]; in(s) && (!ok || r.IngestedAt > e) {
									beyond[k]++
								}
							}
							v := r.Value
							if st.ValueField == "" {
								v = 0
							}
							if !yield(operator.Record{ID: id, Key: r.Key, Value: v, EventTime: r.OccurredTime(), Arrival: r.IngestedTime()}) {
								return errors.New("stop")
							}
							return nil
						})
				})
				ws, err := operator.HoppingTruth(st.Window, st.Hop, seq)
				if scanErr != nil {
					t.Fatal(scanErr)
				}
				if err != nil && !errors.Is(err, operator.ErrRecord) {
					t.Fatal(err)
				}
				for _, w := range ws {
					if in(w.Start.UnixNano()) {
						want[winKey{w.Key, w.Start.UnixNano()}] = w.Agg
					}
				}
			}

			got := map[winKey]event.Agg{}
			for _, c := range tab.cells {
				k := winKey{tab.keys[c.key], c.start}
				if c.truth.Count > 0 {
					got[k] = c.truth
				}
				if c.beyond != beyond[k] {
					t.Errorf("%s@%s: beyond %d, want %d", k.key, time.Unix(0, k.start).UTC().Format("15:04"), c.beyond, beyond[k])
				}
			}
			if len(got) != len(want) || len(want) < 1000 {
				t.Fatalf("%d windows, operator.Truth %d", len(got), len(want))
			}
			for k, w := range want {
				if g := got[k]; g != w {
					t.Errorf("%s@%s: %+v, operator.Truth %+v", k.key, time.Unix(0, k.start).UTC().Format("15:04"), g, w)
				}
			}

		})
	}
}

// TestWindowTableIndex: every window gets one cell and find returns it,
// whether the dense index holds it (aligned, in range) or the map does
// (before or after the range, not aligned, at the ends of int64).
func TestWindowTableIndex(t *testing.T) {
	from := time.Date(1969, 12, 31, 22, 0, 0, 0, time.UTC) // the base is negative
	win := 5 * time.Minute
	tab := newWindowTable(from, from.Add(4*time.Hour), win)
	starts := []int64{from.UnixNano(), from.Add(win).UnixNano(), from.Add(4*time.Hour - win).UnixNano(),
		from.Add(4 * time.Hour).UnixNano(), from.Add(-win).UnixNano(), from.UnixNano() + 1,
		math.MinInt64, math.MaxInt64, math.MaxInt64 - int64(win) + 1}
	seen := map[int32]bool{}
	for _, key := range []string{"a", "b"} {
		for _, s := range starts {
			i := tab.cell(cellID{tab.intern(key), s})
			if seen[i] || tab.cells[i].start != s || tab.keys[tab.cells[i].key] != key {
				t.Fatalf("%s@%d: cell %d (%+v)", key, s, i, tab.cells[i].cellID)
			}
			seen[i] = true
			if j := tab.find(key, s); j != i {
				t.Fatalf("%s@%d: find %d, cell %d", key, s, j, i)
			}
			if j := tab.cell(cellID{tab.intern(key), s}); j != i {
				t.Fatalf("%s@%d: cell again %d, first %d", key, s, j, i)
			}
		}
	}
	if tab.find("c", starts[0]) != -1 || tab.find("a", starts[0]+2) != -1 {
		t.Fatal("found a window never added")
	}
}
