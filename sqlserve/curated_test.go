//go:build duckdb_arrow

package sqlserve

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"

	"reckon/internal/event"
	"reckon/lake"
)

// publication is one row published to a pane table: a pane (or a
// correction) on the summaries topic, or a truth row a recompute wrote.
type publication struct {
	pane  event.Pane
	truth bool
}

// curatedHistory is a random history of one stream's windows around
// midnight of t0 (two window dates, several hours), in publication
// order, and the number of rows its windows and corrections tables hold.
type curatedHistory struct {
	pubs                 []publication
	windows, corrections int
}

// genHistory publishes, per window: 0–3 stream panes (a version sometimes
// published twice, the copy later), then a check by the batch: nothing to
// correct (a truth row), or one or two corrections (each after its truth
// row, a correction sometimes published twice; reason "missing" when the
// window had no pane), or no check; sometimes a late stream pane after
// the corrections. A truth row can check a window with no version.
func genHistory(rng *rand.Rand, stream string) curatedHistory {
	var h curatedHistory
	emitted := t0.Add(-2 * time.Hour)
	for _, key := range []string{"k1", "k2", "k3", "k4"} {
		for _, off := range []time.Duration{-10 * time.Minute, -5 * time.Minute, 0, 5 * time.Minute, 90 * time.Minute, 23*time.Hour + 55*time.Minute} {
			ws := t0.Add(off)
			v := int64(0)
			versions := map[int64]bool{}
			publish := func(by string, timing event.Timing, reason string, again bool) {
				v++
				emitted = emitted.Add(time.Duration(1+rng.IntN(5)) * time.Second)
				n := int64(rng.IntN(9))
				p := event.Pane{Stream: stream, Key: key, WindowStart: ws, WindowEnd: ws.Add(5 * time.Minute), Count: n, Sum: float64(n) * 1.25,
					Min: -1, Max: float64(n), Version: v, Timing: timing, ComputedBy: by, EmittedAt: emitted, Reason: reason}
				if by == event.ComputedByStream {
					p.Watermark = p.WindowEnd
				}
				h.pubs = append(h.pubs, publication{pane: p})
				if again { // the same version published again, later
					emitted = emitted.Add(time.Second)
					p.EmittedAt = emitted
					h.pubs = append(h.pubs, publication{pane: p})
				}
				if by == event.ComputedByBatch {
					h.corrections++
				}
				versions[v] = true
			}
			check := func(reason string) {
				emitted = emitted.Add(time.Second)
				h.pubs = append(h.pubs, publication{truth: true, pane: event.Pane{Stream: stream, Key: key, WindowStart: ws,
					WindowEnd: ws.Add(5 * time.Minute), Version: v, Timing: "truth", ComputedBy: event.ComputedByBatch, EmittedAt: emitted, Reason: reason}})
			}
			for range rng.IntN(4) {
				publish(event.ComputedByStream, event.TimingOnTime, "", rng.IntN(4) == 0)
			}
			switch rng.IntN(4) {
			case 0:
				check("matched")
			case 1, 2:
				for range 1 + rng.IntN(2) {
					reason := "late events"
					if v == 0 {
						reason = "missing"
					}
					check("corrected: " + reason)
					publish(event.ComputedByBatch, event.TimingCorrection, reason, rng.IntN(3) == 0)
				}
			}
			if v > 0 && rng.IntN(5) == 0 {
				publish(event.ComputedByStream, event.TimingLate, "", false)
			}
			if len(versions) > 0 {
				h.windows++
			}
		}
	}
	return h
}

// writeHistory archives pubs as the pane archive and the recomputes do,
// in steps of a few rows cutting the history anywhere (each window's
// versions stay in publication order; truth rows are written with a
// step, sometimes a later one) and returns each step's files.
func writeHistory(t *testing.T, l *lake.Lake, rng *rand.Rand, stream string, pubs []publication) [][]string {
	t.Helper()
	var steps [][]string
	var pendingTruth []event.Pane
	for lo, n := 0, 0; lo < len(pubs); n++ {
		hi := min(len(pubs), lo+1+rng.IntN(8))
		var panes []event.Pane
		for _, p := range pubs[lo:hi] {
			if p.truth {
				pendingTruth = append(pendingTruth, p.pane)
			} else {
				panes = append(panes, p.pane)
			}
		}
		lo = hi
		var paths []string
		if len(panes) > 0 {
			fs, err := l.WritePanes(t.Context(), stream, fmt.Sprintf("step-%03d", n), panes)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fs {
				paths = append(paths, f.Path)
			}
		}
		if len(pendingTruth) > 0 && (lo == len(pubs) || rng.IntN(2) == 0) {
			fs, err := l.WriteTruth(t.Context(), stream, fmt.Sprintf("truth-%03d", n), pendingTruth)
			if err != nil {
				t.Fatal(err)
			}
			pendingTruth = nil
			for _, f := range fs {
				paths = append(paths, f.Path)
			}
		}
		steps = append(steps, paths)
	}
	return steps
}

// symmetricDiff returns the rows of a that b lacks and of b that a lacks,
// counting duplicates (EXCEPT ALL both ways), as text.
func symmetricDiff(t *testing.T, c *flightsql.Client, a, b string) []string {
	t.Helper()
	tab := mustRead(t, c, fmt.Sprintf(`SELECT * FROM (SELECT 'only in the view' AS side, * FROM (SELECT * FROM (%s) EXCEPT ALL SELECT * FROM (%s)))
UNION ALL SELECT * FROM (SELECT 'only in the definition' AS side, * FROM (SELECT * FROM (%s) EXCEPT ALL SELECT * FROM (%s)))
ORDER BY ALL LIMIT 20`, a, b, b, a))
	var out []string
	for _, r := range tab.rows {
		out = append(out, strings.Join(r, " | "))
	}
	return out
}

// TestCuratedViewsEqualHistory: the windows and corrections views read
// the curated tables (docs/adr/0019-curated-tables.md) and, on a lake
// curated step by step (lake.Curate) and one rebuilt (lake.RebuildCurated),
// hold exactly what their definitions compute from the history
// (windowsHistorySQL, correctionsHistorySQL); windows_as_of(now()), which
// computes from the history, equals windows. Before any curation the
// views are empty (no windows/ or corrections/ file yet), and a stream
// whose history predates curation is missing from them until
// `reckon lake curate` (RebuildCurated) rebuilds its days.
func TestCuratedViewsEqualHistory(t *testing.T) {
	root := t.TempDir()
	l, err := lake.Open(lake.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(17, 19))
	curated, legacy := genHistory(rng, "payments"), genHistory(rng, "legacy")
	steps := writeHistory(t, l, rng, "payments", curated.pubs)
	writeHistory(t, l, rng, "legacy", legacy.pubs)

	c := newClient(t, startServer(t, openEngine(t, root), ServeOptions{}))
	count := func(q string) int {
		t.Helper()
		n, err := strconv.Atoi(mustRead(t, c, q).rows[0][0])
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	windowsDef, correctionsDef := windowsHistorySQL("true"), correctionsHistorySQL
	wantW, wantC := curated.windows+legacy.windows, curated.corrections+legacy.corrections
	if n := count("SELECT count(*) FROM (" + windowsDef + ")"); n != wantW {
		t.Fatalf("windows definition: %d rows, want %d", n, wantW)
	}
	if n := count("SELECT count(*) FROM (" + correctionsDef + ")"); n != wantC {
		t.Fatalf("corrections definition: %d rows, want %d", n, wantC)
	}
	// Nothing curated yet: the curated tables have no file.
	if n := count("SELECT (SELECT count(*) FROM windows) + (SELECT count(*) FROM corrections)"); n != 0 {
		t.Errorf("before any curation: windows and corrections hold %d rows, want none", n)
	}

	// The pane archive curates each step's files; "legacy" was written
	// before curation existed.
	for _, paths := range steps {
		if _, err := l.Curate(t.Context(), paths); err != nil {
			t.Fatal(err)
		}
	}
	if n := count("SELECT count(*) FROM windows WHERE stream = 'legacy'"); n != 0 {
		t.Errorf("windows of a stream never curated: %d rows, want none (until reckon lake curate)", n)
	}
	if n := count("SELECT count(*) FROM windows_as_of(now()) WHERE stream = 'legacy'"); n != legacy.windows {
		t.Errorf("windows_as_of(now()) of a stream never curated: %d rows, want %d from the history", n, legacy.windows)
	}
	for _, day := range []time.Time{t0.Add(-24 * time.Hour), t0} {
		if _, err := l.RebuildCurated(t.Context(), "legacy", day); err != nil {
			t.Fatal(err)
		}
	}

	if n := count("SELECT count(*) FROM windows"); n != wantW {
		t.Errorf("windows: %d rows, want %d", n, wantW)
	}
	if n := count("SELECT count(*) FROM corrections"); n != wantC {
		t.Errorf("corrections: %d rows, want %d", n, wantC)
	}
	for _, q := range []struct{ name, view, def string }{
		{"windows", "SELECT * FROM windows", windowsDef},
		{"corrections", "SELECT * FROM corrections", correctionsDef},
		{"windows_as_of(now())", "SELECT * FROM windows", "SELECT * FROM windows_as_of(now())"},
	} {
		if d := symmetricDiff(t, c, q.view, q.def); len(d) > 0 {
			t.Errorf("%s differs from its definition:\n%s", q.name, strings.Join(d, "\n"))
		}
	}
	// The history exercises every status, missing windows, corrections of
	// corrections and versions published twice.
	got := mustRead(t, c, `SELECT
	    (SELECT string_agg(DISTINCT status, ',' ORDER BY status) FROM windows),
	    (SELECT count(*) FROM corrections WHERE prev_version IS NULL),
	    (SELECT count(*) FROM corrections WHERE prev_computed_by = 'batch')`).rows[0]
	if got[0] != "corrected,final,provisional" || got[1] == "0" || got[2] == "0" {
		t.Errorf("the history lacks a case: statuses %s, %s missing, %s corrections of corrections", got[0], got[1], got[2])
	}
	if n := count(`SELECT count(DISTINCT computed_by) FROM (SELECT computed_by FROM panes GROUP BY stream, key, window_start, version, computed_by HAVING count(*) > 1)`); n != 2 {
		t.Errorf("versions published twice: by %d publishers, want stream and batch", n)
	}
}
