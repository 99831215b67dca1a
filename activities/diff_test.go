package activities

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"reckon/internal/event"
)

// The diff of truth against published panes, on plain maps: no Kafka, no
// lake, no Temporal.

var (
	dw0 = time.Date(2026, 11, 7, 8, 0, 0, 0, time.UTC)
	dw1 = dw0.Add(5 * time.Minute)
	now = dw0.Add(48 * time.Hour)
	// tenth and fifth are variables: 0.1+0.2 in constants is exactly 0.3.
	tenth, fifth = 0.1, 0.2
)

// winKey identifies a window of one stream by its key and start: the
// tests' map key for what they put in a windowTable.
type winKey struct {
	key   string
	start int64 // unix nanoseconds
}

func wk(key string, start time.Time) winKey { return winKey{key, start.UnixNano()} }

func agg(count int64, sum, mn, mx float64) event.Agg {
	return event.Agg{Count: count, Sum: sum, Min: mn, Max: mx}
}

// pane is version v of a window's pane, computed by the stream or the batch.
func pane(by string, v int64, a event.Agg) event.Pane {
	return event.Pane{Stream: "payments", Count: a.Count, Sum: a.Sum, Min: a.Min, Max: a.Max, Version: v, ComputedBy: by}
}

// pubOf is the panes of one window published, in topic order.
func pubOf(ps ...event.Pane) []event.Pane { return ps }

// tableOf is the window table a recompute builds from these maps: the
// panes read in order, then the truth and beyond of the scan; selected,
// when non-nil, restricts it to those windows. The table indexes its
// windows densely (by key and window number) unless sparse, which
// leaves them all to its map.
func tableOf(sparse bool, selected []winKey, truth map[winKey]event.Agg, beyond map[winKey]int64, pub map[winKey][]event.Pane) *windowTable {
	t := newWindowTable(dw0.Add(-time.Hour), dw0.Add(time.Hour), 5*time.Minute)
	if sparse {
		t = newWindowTable(dw0, dw0, 0)
	}
	if selected != nil {
		var refs []WindowRef
		for _, k := range selected {
			refs = append(refs, WindowRef{Key: k.key, Start: time.Unix(0, k.start)})
		}
		t.restrict(refs)
	}
	for k, ps := range pub {
		for _, p := range ps {
			f := paneFig{version: p.Version, count: p.Count, sum: p.Sum, min: p.Min, max: p.Max}
			t.addPane(cellID{t.intern(k.key), k.start}, f, p.ComputedBy, p.Processed().UnixMicro())
		}
	}
	for k, a := range truth {
		if i := t.cell(cellID{t.intern(k.key), k.start}); i >= 0 {
			t.cells[i].truth = a
		}
	}
	for k, n := range beyond {
		if i := t.cell(cellID{t.intern(k.key), k.start}); i >= 0 {
			t.cells[i].beyond = n
		}
	}
	return t
}

// diffCounts are the report's counters a diff decides.
type diffCounts struct {
	Windows, StreamExact, Matched, AlreadyCorrected, Corrected, Missing, Events, Beyond int64
	Reasons                                                                             ReasonCounts
}

func countsOf(r TruthReport) diffCounts {
	return diffCounts{r.Windows, r.StreamExact, r.Matched, r.AlreadyCorrected, r.Corrected, r.Missing, r.Events, r.EventsBeyondLateness, r.Reasons}
}

// describe renders a correction or a truth row as "key@HH:MM vN count/sum: reason".
func describe(p event.Pane) string {
	return fmt.Sprintf("%s@%s v%d %d/%g: %s", p.Key, p.WindowStart.Format("15:04"), p.Version, p.Count, p.Sum, p.Reason)
}

func TestDiffWindows(t *testing.T) {
	const (
		stream = event.ComputedByStream
		batch  = event.ComputedByBatch
	)
	for _, tc := range []struct {
		name      string
		tolerance float64
		selected  []winKey // nil: every window
		truth     map[winKey]event.Agg
		beyond    map[winKey]int64
		pub       map[winKey][]event.Pane
		// want are the corrections, rows the truth rows, in key/window order.
		want, rows []string
		counts     diffCounts
	}{{
		name:   "no change",
		truth:  map[winKey]event.Agg{wk("u1", dw0): agg(2, 300, 100, 200)},
		pub:    map[winKey][]event.Pane{wk("u1", dw0): pubOf(pane(stream, 1, agg(2, 300, 100, 200)))},
		rows:   []string{"u1@08:00 v1 2/300: matched"},
		counts: diffCounts{Windows: 1, StreamExact: 1, Matched: 1, Events: 2},
	}, {
		name:   "changed count",
		truth:  map[winKey]event.Agg{wk("u1", dw0): agg(3, 350, 50, 200)},
		pub:    map[winKey][]event.Pane{wk("u1", dw0): pubOf(pane(stream, 1, agg(2, 300, 100, 200)))},
		want:   []string{"u1@08:00 v2 3/350: values differ (count 2→3, sum 300→350)"},
		rows:   []string{"u1@08:00 v2 3/350: corrected: values differ (count 2→3, sum 300→350)"},
		counts: diffCounts{Windows: 1, Corrected: 1, Events: 3, Reasons: ReasonCounts{Other: 1}},
	}, {
		name:   "a window the stream never published",
		truth:  map[winKey]event.Agg{wk("u3", dw1): agg(1, 50, 50, 50)},
		beyond: map[winKey]int64{wk("u3", dw1): 1},
		want:   []string{"u3@08:05 v1 1/50: missing: no pane was published for 1 events"},
		rows:   []string{"u3@08:05 v1 1/50: corrected: missing: no pane was published for 1 events"},
		counts: diffCounts{Windows: 1, Corrected: 1, Missing: 1, Events: 1, Beyond: 1, Reasons: ReasonCounts{Missing: 1}},
	}, {
		name:   "a window published but missing in the truth",
		pub:    map[winKey][]event.Pane{wk("u5", dw0): pubOf(pane(stream, 1, agg(1, 7, 7, 7)))},
		want:   []string{"u5@08:00 v2 0/0: retracted: no valid event of this window in the lake"},
		rows:   []string{"u5@08:00 v2 0/0: corrected: retracted: no valid event of this window in the lake"},
		counts: diffCounts{Windows: 1, Corrected: 1, Reasons: ReasonCounts{Retracted: 1}},
	}, {
		name:   "sums equal up to rounding",
		truth:  map[winKey]event.Agg{wk("u1", dw0): agg(2, tenth+fifth, tenth, fifth)},
		pub:    map[winKey][]event.Pane{wk("u1", dw0): pubOf(pane(stream, 1, agg(2, 0.3, 0.1, 0.2)))},
		rows:   []string{"u1@08:00 v1 2/0.30000000000000004: matched"},
		counts: diffCounts{Windows: 1, StreamExact: 1, Matched: 1, Events: 2},
	}, {
		name:   "sum beyond the default tolerance",
		truth:  map[winKey]event.Agg{wk("u1", dw0): agg(2, 300, 100, 200)},
		pub:    map[winKey][]event.Pane{wk("u1", dw0): pubOf(pane(stream, 1, agg(2, 300.001, 100, 200.001)))},
		want:   []string{"u1@08:00 v2 2/300: values differ (count 2→2, sum 300.001→300)"},
		rows:   []string{"u1@08:00 v2 2/300: corrected: values differ (count 2→2, sum 300.001→300)"},
		counts: diffCounts{Windows: 1, Corrected: 1, Events: 2, Reasons: ReasonCounts{Other: 1}},
	}, {
		name:      "sum within a wider tolerance",
		tolerance: 1e-3,
		truth:     map[winKey]event.Agg{wk("u1", dw0): agg(2, 300, 100, 200)},
		pub:       map[winKey][]event.Pane{wk("u1", dw0): pubOf(pane(stream, 1, agg(2, 300.1, 100, 200.1)))},
		rows:      []string{"u1@08:00 v1 2/300: matched"},
		counts:    diffCounts{Windows: 1, StreamExact: 1, Matched: 1, Events: 2},
	}, {
		name:   "same count and sum, another minimum",
		truth:  map[winKey]event.Agg{wk("u1", dw0): agg(2, 300, 100, 200)},
		pub:    map[winKey][]event.Pane{wk("u1", dw0): pubOf(pane(stream, 1, agg(2, 300, 50, 250)))},
		want:   []string{"u1@08:00 v2 2/300: values differ (count 2→2, sum 300→300)"},
		rows:   []string{"u1@08:00 v2 2/300: corrected: values differ (count 2→2, sum 300→300)"},
		counts: diffCounts{Windows: 1, Corrected: 1, Events: 2, Reasons: ReasonCounts{Other: 1}},
	}, {
		name:  "version numbering: latest by any producer, plus one",
		truth: map[winKey]event.Agg{wk("u1", dw0): agg(4, 40, 10, 10)},
		// The stream's v1 and v2, then an earlier correction v3; arrival
		// order does not matter.
		pub:  map[winKey][]event.Pane{wk("u1", dw0): pubOf(pane(batch, 3, agg(3, 30, 10, 10)), pane(stream, 1, agg(1, 10, 10, 10)), pane(stream, 2, agg(2, 20, 10, 10)))},
		want: []string{"u1@08:00 v4 4/40: values differ (count 3→4, sum 30→40)"},
		rows: []string{"u1@08:00 v4 4/40: corrected: values differ (count 3→4, sum 30→40)"},
		// The stream's own error is against its v2.
		counts: diffCounts{Windows: 1, Corrected: 1, Events: 4, Reasons: ReasonCounts{Other: 1}},
	}, {
		name:   "matched by an earlier correction",
		truth:  map[winKey]event.Agg{wk("u4", dw0): agg(2, 20, 10, 10)},
		pub:    map[winKey][]event.Pane{wk("u4", dw0): pubOf(pane(stream, 1, agg(3, 30, 10, 10)), pane(batch, 2, agg(2, 20, 10, 10)))},
		rows:   []string{"u4@08:00 v2 2/20: matched (earlier correction)"},
		counts: diffCounts{Windows: 1, Matched: 1, AlreadyCorrected: 1, Events: 2},
	}, {
		name: "reason counts",
		truth: map[winKey]event.Agg{
			wk("a", dw0): agg(2, 1200, 500, 700), // one event beyond lateness
			wk("b", dw0): agg(2, 20, 10, 10),     // a redelivery counted twice, and a late event
			wk("c", dw0): agg(2, 20, 10, 10),     // a redelivery counted twice
			wk("d", dw0): agg(1, 1, 1, 1),        // never published
		},
		beyond: map[winKey]int64{wk("a", dw0): 1, wk("b", dw0): 1, wk("d", dw0): 1},
		pub: map[winKey][]event.Pane{
			wk("a", dw0): pubOf(pane(stream, 1, agg(1, 500, 500, 500))),
			wk("b", dw0): pubOf(pane(stream, 1, agg(3, 30, 10, 10))),
			wk("c", dw0): pubOf(pane(stream, 1, agg(3, 30, 10, 10))),
			wk("e", dw0): pubOf(pane(stream, 1, agg(1, 9, 9, 9))), // no valid event
		},
		want: []string{
			"a@08:00 v2 2/1200: late events beyond lateness: 1",
			"b@08:00 v2 2/20: late events beyond lateness: 1; duplicates counted: 1",
			"c@08:00 v2 2/20: duplicates counted: 1",
			"d@08:00 v1 1/1: missing: no pane was published for 1 events",
			"e@08:00 v2 0/0: retracted: no valid event of this window in the lake",
		},
		counts: diffCounts{Windows: 5, Corrected: 5, Missing: 1, Events: 7, Beyond: 3,
			Reasons: ReasonCounts{BeyondLateness: 2, Duplicates: 2, Missing: 1, Retracted: 1}},
	}, {
		name:     "only the selected windows",
		selected: []winKey{wk("u1", dw1)},
		truth:    map[winKey]event.Agg{wk("u1", dw1): agg(1, 5, 5, 5)},
		pub: map[winKey][]event.Pane{
			wk("u1", dw1): pubOf(pane(stream, 1, agg(1, 5, 5, 5))),
			wk("u1", dw0): pubOf(pane(stream, 1, agg(9, 9, 1, 1))), // held by the stream: not ours
			wk("u2", dw1): pubOf(pane(stream, 1, agg(9, 9, 1, 1))),
		},
		rows:   []string{"u1@08:05 v1 1/5: matched"},
		counts: diffCounts{Windows: 1, StreamExact: 1, Matched: 1, Events: 1},
	}, {
		name: "key/window order",
		truth: map[winKey]event.Agg{
			wk("u2", dw0): agg(1, 2, 2, 2), wk("u1", dw1): agg(1, 1, 1, 1), wk("u1", dw0): agg(1, 3, 3, 3),
		},
		pub: map[winKey][]event.Pane{wk("u1", dw1): pubOf(pane(stream, 1, agg(1, 1, 1, 1)))},
		want: []string{
			"u1@08:00 v1 1/3: missing: no pane was published for 1 events",
			"u2@08:00 v1 1/2: missing: no pane was published for 1 events",
		},
		rows: []string{
			"u1@08:00 v1 1/3: corrected: missing: no pane was published for 1 events",
			"u1@08:05 v1 1/1: matched",
			"u2@08:00 v1 1/2: corrected: missing: no pane was published for 1 events",
		},
		counts: diffCounts{Windows: 3, StreamExact: 1, Matched: 1, Corrected: 2, Missing: 2, Events: 3, Reasons: ReasonCounts{Missing: 2}},
	}, {
		name:   "nothing at all",
		counts: diffCounts{},
	}} {
		for _, sparse := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/sparse=%v", tc.name, sparse), func(t *testing.T) {
				s := diffSettings{Stream: "payments", Window: 5 * time.Minute, Tolerance: tc.tolerance, Now: now}
				d := diffWindows(s, tableOf(sparse, tc.selected, tc.truth, tc.beyond, tc.pub))
				if got := countsOf(d.Report); got != tc.counts {
					t.Errorf("counts\n got %+v\nwant %+v", got, tc.counts)
				}
				var got []string
				for _, c := range d.Corrections {
					got = append(got, describe(c.pane))
					p := c.pane
					if p.Stream != "payments" || p.Timing != event.TimingCorrection || p.ComputedBy != event.ComputedByBatch ||
						!p.WindowEnd.Equal(p.WindowStart.Add(5*time.Minute)) || !p.EmittedAt.Equal(now) {
						t.Errorf("correction %+v", p)
					}
					if c.was.Version != p.Version-1 {
						t.Errorf("%s corrects v%d", describe(p), c.was.Version)
					}
					if r := d.TruthRows[c.truthRow].Pane(); !r.WindowStart.Equal(p.WindowStart) || r.Key != p.Key || r.Version != p.Version {
						t.Errorf("%s: truth row %s", describe(p), describe(r))
					}
				}
				if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
					t.Errorf("corrections\n got %q\nwant %q", got, tc.want)
				}
				if tc.rows != nil || len(d.TruthRows) != len(tc.want) {
					var rows []string
					for _, r := range d.TruthRows {
						rows = append(rows, describe(r.Pane()))
						if r.Timing != "truth" || r.ComputedBy != event.ComputedByBatch {
							t.Errorf("truth row %+v", r)
						}
					}
					if strings.Join(rows, "\n") != strings.Join(tc.rows, "\n") {
						t.Errorf("truth rows\n got %q\nwant %q", rows, tc.rows)
					}
				}
			})
		}
	}
}

// TestDiffWindowsStreamErrors: the price of speed compares the stream's
// own latest pane (none: 0) with the truth, whatever corrected it since.
func TestDiffWindowsStreamErrors(t *testing.T) {
	truth := map[winKey]event.Agg{
		wk("a", dw0): agg(3, 350, 50, 200), // stream 2/300: off by 1 and 50
		wk("b", dw0): agg(1, 50, 50, 50),   // never published: off by 1 and 50
		wk("c", dw0): agg(2, 20, 10, 10),   // stream 4/40, corrected to 2/20 since: off by 2 and 20
		wk("d", dw0): agg(1, 1, 1, 1),      // exact
	}
	pub := map[winKey][]event.Pane{
		wk("a", dw0): pubOf(pane(event.ComputedByStream, 1, agg(2, 300, 100, 200))),
		wk("c", dw0): pubOf(pane(event.ComputedByStream, 1, agg(4, 40, 10, 10)), pane(event.ComputedByBatch, 2, agg(2, 20, 10, 10))),
		wk("d", dw0): pubOf(pane(event.ComputedByStream, 1, agg(1, 1, 1, 1))),
	}
	r := diffWindows(diffSettings{Stream: "payments", Window: 5 * time.Minute, Now: now}, tableOf(false, nil, truth, nil, pub)).Report
	if r.CountErrMax != 2 || r.CountErrTotal != 4 || r.CountErrMean != 1 || r.SumErrMax != 50 || r.SumErrTotal != 120 || r.SumErrMean != 30 {
		t.Fatalf("errors %+v", r)
	}
	if r.StreamExact != 1 || r.Matched != 2 || r.AlreadyCorrected != 1 || r.Corrected != 2 || r.Missing != 1 {
		t.Fatalf("counts %+v", r)
	}
}
