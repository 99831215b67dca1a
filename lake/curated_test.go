package lake

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"reckon/internal/event"
)

// curatedOracle computes the windows and corrections tables straight from
// their definitions (docs/lake.md) over every published version and the
// windows the truth table holds a row for.
func curatedOracle(published []event.Pane, checked map[curatedKey]bool) (map[curatedKey]WindowRow, map[correctionKey]CorrectionRow) {
	byWin := map[curatedKey][]SummaryRow{}
	for _, p := range published {
		r := SummaryRowOf(p)
		k := curatedKey{r.Key, r.WindowStart}
		byWin[k] = append(byWin[k], r)
	}
	ws := map[curatedKey]WindowRow{}
	cs := map[correctionKey]CorrectionRow{}
	for k, vs := range byWin {
		slices.SortFunc(vs, compareVersions)
		l := vs[len(vs)-1]
		status := StatusProvisional
		if l.ComputedBy == event.ComputedByBatch {
			status = StatusCorrected
		} else if checked[k] {
			status = StatusFinal
		}
		ws[k] = WindowRow{SummaryRow: l, Status: status, UpdatedAt: l.EmittedAt}
		for i, v := range vs {
			if v.ComputedBy != event.ComputedByBatch {
				continue
			}
			c := CorrectionRow{Stream: v.Stream, Key: v.Key, WindowStart: v.WindowStart, WindowEnd: v.WindowEnd, Version: v.Version,
				Reason: v.Reason, EmittedAt: v.EmittedAt, Count: v.Count, Sum: v.Sum, Min: v.Min, Max: v.Max}
			if i > 0 {
				p := vs[i-1]
				c.PrevVersion, c.PrevCount, c.PrevSum, c.PrevMin, c.PrevMax = &p.Version, &p.Count, &p.Sum, &p.Min, &p.Max
				c.PrevComputedBy, c.PrevEmittedAt = &p.ComputedBy, &p.EmittedAt
			}
			cs[correctionKey{k, v.Version}] = c
		}
	}
	return ws, cs
}

func describeCorrection(c CorrectionRow) string {
	s := fmt.Sprintf("%s %d v%d %q n=%d", c.Key, c.WindowStart, c.Version, c.Reason, c.Count)
	if c.PrevVersion != nil {
		s += fmt.Sprintf(" prev v%d n=%d by %s at %d", *c.PrevVersion, *c.PrevCount, *c.PrevComputedBy, *c.PrevEmittedAt)
	}
	return s
}

// checkCurated compares the lake's windows and corrections tables of a
// stream with the oracle.
func checkCurated(t *testing.T, l *Lake, stream string, from, to time.Time, published []event.Pane, checked map[curatedKey]bool) {
	t.Helper()
	wantW, wantC := curatedOracle(published, checked)
	gotW, err := l.ReadWindows(t.Context(), stream, from, to)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[curatedKey]bool{}
	for _, w := range gotW {
		k := curatedKey{w.Key, w.WindowStart}
		if seen[k] {
			t.Errorf("window %v twice", k)
		}
		seen[k] = true
		if want, ok := wantW[k]; !ok || want != w {
			t.Errorf("window %v:\n got %+v\nwant %+v", k, w, want)
		}
	}
	if len(seen) != len(wantW) {
		t.Errorf("%d windows, want %d", len(seen), len(wantW))
	}
	gotC, err := l.ReadCorrections(t.Context(), stream, from, to)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range gotC {
		k := correctionKey{curatedKey{c.Key, c.WindowStart}, c.Version}
		if want, ok := wantC[k]; !ok || describeCorrection(want) != describeCorrection(c) || want.Sum != c.Sum || want.EmittedAt != c.EmittedAt {
			t.Errorf("correction:\n got %s\nwant %s", describeCorrection(c), describeCorrection(want))
		}
	}
	if len(gotC) != len(wantC) {
		t.Errorf("%d corrections, want %d", len(gotC), len(wantC))
	}
}

// TestCurateIncrementallyEqualsDefinition: windows and corrections
// curated step by step from the files the pane archive and recomputes
// write (versions in publication order, truth rows before or after the
// panes they check, retried steps) equal the tables' definitions, and so
// does a rebuild of each day from the whole history.
func TestCurateIncrementallyEqualsDefinition(t *testing.T) { forEachStore(t, testCurateIncrementally) }

func testCurateIncrementally(t *testing.T, opts Options) {
	l := mustOpen(t, opts)
	rng := rand.New(rand.NewPCG(15, 19))
	day := time.Date(2026, 11, 7, 0, 0, 0, 0, time.UTC)
	const stream = "payments"
	// Windows near midnight and inside the day, a few keys.
	var wins []time.Time
	for _, off := range []time.Duration{-10 * time.Minute, -5 * time.Minute, 0, 5 * time.Minute, 2 * time.Hour, 23*time.Hour + 55*time.Minute} {
		wins = append(wins, day.Add(off))
	}
	type step struct {
		panes []event.Pane
		truth []event.Pane
	}
	var steps []step
	var published []event.Pane
	checked := map[curatedKey]bool{}
	emitted := day.Add(-time.Hour)
	for _, key := range []string{"u1", "u2", "u3", "u4"} {
		for _, w := range wins {
			var cur step
			nStream := rng.IntN(4) // 0: the window only ever gets a correction
			v := int64(0)
			pane := func(by string, timing event.Timing, reason string) event.Pane {
				v++
				emitted = emitted.Add(time.Duration(1+rng.IntN(5)) * time.Second)
				n := int64(rng.IntN(9))
				return event.Pane{Stream: stream, Key: key, WindowStart: w, WindowEnd: w.Add(5 * time.Minute), Count: n, Sum: float64(n) * 1.5,
					Min: 1, Max: float64(n), Version: v, Timing: timing, ComputedBy: by, EmittedAt: emitted, Reason: reason}
			}
			for range nStream {
				cur.panes = append(cur.panes, pane(event.ComputedByStream, event.TimingOnTime, ""))
			}
			truthRow := func() event.Pane {
				return event.Pane{Stream: stream, Key: key, WindowStart: w, WindowEnd: w.Add(5 * time.Minute), Version: v, Timing: "truth", ComputedBy: event.ComputedByBatch, EmittedAt: emitted, Reason: "matched"}
			}
			switch rng.IntN(4) {
			case 0: // checked, nothing to correct (if it has a pane)
				cur.truth = append(cur.truth, truthRow())
			case 1, 2: // corrected, once or twice
				for range 1 + rng.IntN(2) {
					reason := "values differ"
					if v == 0 {
						reason = "missing"
					}
					cur.truth = append(cur.truth, truthRow())
					cur.panes = append(cur.panes, pane(event.ComputedByBatch, event.TimingCorrection, reason))
				}
			}
			if len(cur.panes) == 0 && len(cur.truth) > 0 {
				// A truth row whose window never got a version: no row.
				cur.truth = cur.truth[:0]
			}
			if len(cur.truth) > 0 {
				checked[curatedKey{key, w.UnixMicro()}] = true
			}
			published = append(published, cur.panes...)
			steps = append(steps, cur)
		}
	}
	// Archive in steps cutting the history anywhere (publication order
	// per window kept); truth rows curated before or after their panes.
	var allPanes, allTruth []event.Pane
	for _, s := range steps {
		allPanes = append(allPanes, s.panes...)
		allTruth = append(allTruth, s.truth...)
	}
	var pendingTruth []event.Pane
	n := 0
	for lo := 0; lo < len(allPanes); {
		hi := min(len(allPanes), lo+1+rng.IntN(7))
		n++
		files, err := l.WritePanes(t.Context(), stream, fmt.Sprintf("step-%03d", n), allPanes[lo:hi])
		if err != nil {
			t.Fatal(err)
		}
		var paths []string
		for _, f := range files {
			paths = append(paths, f.Path)
		}
		// Truth rows of the panes so far, some early: a recompute that read
		// a version from the topic's unarchived tail.
		for len(allTruth) > 0 && rng.IntN(3) > 0 {
			pendingTruth = append(pendingTruth, allTruth[0])
			allTruth = allTruth[1:]
		}
		if len(pendingTruth) > 0 && rng.IntN(2) == 0 {
			tf, err := l.WriteTruth(t.Context(), stream, fmt.Sprintf("truth-%03d", n), pendingTruth)
			if err != nil {
				t.Fatal(err)
			}
			pendingTruth = nil
			for _, f := range tf {
				paths = append(paths, f.Path)
			}
		}
		rng.Shuffle(len(paths), func(i, j int) { paths[i], paths[j] = paths[j], paths[i] })
		if _, err := l.Curate(t.Context(), paths); err != nil {
			t.Fatal(err)
		}
		if rng.IntN(4) == 0 { // a retried step
			if _, err := l.Curate(t.Context(), paths); err != nil {
				t.Fatal(err)
			}
		}
		lo = hi
	}
	rest := append(pendingTruth, allTruth...)
	if len(rest) > 0 {
		tf, err := l.WriteTruth(t.Context(), stream, "truth-last", rest)
		if err != nil {
			t.Fatal(err)
		}
		var paths []string
		for _, f := range tf {
			paths = append(paths, f.Path)
		}
		if _, err := l.Curate(t.Context(), paths); err != nil {
			t.Fatal(err)
		}
	}
	from, to := day.Add(-24*time.Hour), day.Add(24*time.Hour)
	checkCurated(t, l, stream, from, to, published, checked)
	statuses := map[string]int{}
	ws, _ := l.ReadWindows(t.Context(), stream, from, to)
	for _, w := range ws {
		statuses[w.Status]++
	}
	if statuses[StatusProvisional] == 0 || statuses[StatusFinal] == 0 || statuses[StatusCorrected] == 0 {
		t.Errorf("statuses %v: the history should make every status", statuses)
	}

	// `reckon lake ls` lists the curated tables.
	inv, err := l.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wantW, wantC := curatedOracle(published, checked)
	rows := map[string]int64{}
	for _, ti := range inv.Tables {
		if ti.Name == stream {
			rows[ti.Table] = ti.Rows
		}
	}
	if rows[WindowsDir] != int64(len(wantW)) || rows[CorrectionsDir] != int64(len(wantC)) || rows[TruthDir] == 0 {
		t.Errorf("ls rows %v, want %d windows and %d corrections", rows, len(wantW), len(wantC))
	}

	for _, d := range []time.Time{day.Add(-24 * time.Hour), day} {
		if _, err := l.RebuildCurated(t.Context(), stream, d); err != nil {
			t.Fatal(err)
		}
	}
	checkCurated(t, l, stream, from, to, published, checked)
}

// TestCurateIgnoresOtherFiles: paths outside summaries/ and truth/ are
// not curated.
func TestCurateIgnoresOtherFiles(t *testing.T) {
	l := mustOpen(t, Options{Root: t.TempDir()})
	res, err := l.Curate(t.Context(), []string{"raw/topic=t/event_date=2026-11-07/event_hour=08/t-0-0-1.parquet", "windows/stream=s/window_date=2026-11-07/windows-00.parquet", "summaries/x"})
	if err != nil || len(res.Files) != 0 {
		t.Fatalf("%+v %v", res, err)
	}
}

// TestRebuildCuratedReplacesEverything: a rebuild starts from nothing, so
// windows and corrections the history no longer holds disappear (their
// hour files are emptied, not left behind).
func TestRebuildCuratedReplacesEverything(t *testing.T) {
	root := t.TempDir()
	l := mustOpen(t, Options{Root: root})
	ws := time.Date(2026, 11, 7, 8, 0, 0, 0, time.UTC)
	pane := func(key string, v int64, by string) event.Pane {
		return event.Pane{Stream: "s", Key: key, WindowStart: ws, WindowEnd: ws.Add(time.Minute), Count: v, Version: v, ComputedBy: by, EmittedAt: ws.Add(time.Duration(v) * time.Minute)}
	}
	fs, err := l.WritePanes(t.Context(), "s", "old", []event.Pane{pane("a", 1, event.ComputedByStream), pane("a", 2, event.ComputedByBatch)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Curate(t.Context(), []string{fs[0].Path}); err != nil {
		t.Fatal(err)
	}
	if cs, err := l.ReadCorrections(t.Context(), "s", ws, ws.Add(time.Hour)); err != nil || len(cs) != 1 {
		t.Fatalf("corrections %d, %v", len(cs), err)
	}
	if err := os.Remove(filepath.Join(root, filepath.FromSlash(fs[0].Path))); err != nil {
		t.Fatal(err)
	}
	if _, err := l.WritePanes(t.Context(), "s", "new", []event.Pane{pane("b", 1, event.ComputedByStream)}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.RebuildCurated(t.Context(), "s", ws); err != nil {
		t.Fatal(err)
	}
	w, err := l.ReadWindows(t.Context(), "s", ws, ws.Add(time.Hour))
	if err != nil || len(w) != 1 || w[0].Key != "b" || w[0].Status != StatusProvisional {
		t.Errorf("windows %+v, %v", w, err)
	}
	if cs, err := l.ReadCorrections(t.Context(), "s", ws, ws.Add(time.Hour)); err != nil || len(cs) != 0 {
		t.Errorf("corrections %+v, %v", cs, err)
	}
}
