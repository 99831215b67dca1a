package activities_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"reckon/activities"
	"reckon/internal/event"
	"reckon/lake"
)

// archiveAndCurate runs one pane archive step on each summaries partition
// and curates the files it wrote, as the PaneArchive workflow does.
func archiveAndCurate(t *testing.T, f *truthFixture) {
	t.Helper()
	for p := int32(0); p < 2; p++ {
		from, err := run[int64](t, f.a, f.a.PaneCursor, summaries, p)
		if err != nil {
			t.Fatal(err)
		}
		end, err := run[activities.PaneEnd](t, f.a, f.a.PaneArchiveEnd, summaries, p)
		if err != nil {
			t.Fatal(err)
		}
		res, err := run[activities.ArchivePanesResult](t, f.a, f.a.ArchivePanes, activities.ArchivePanesInput{Topic: summaries, Partition: p, From: from, To: end.End, End: end.End, ObservedAt: end.ObservedAt})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Files) > 0 {
			if _, err := run[lake.CurateResult](t, f.a, f.a.CurateWindows, activities.CurateInput{Files: res.Files}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestCuratedTablesAgreeWithTheSummariesTopic: after stream panes, a
// recompute's corrections and truth rows (curated right after publishing,
// before the pane archive has the corrections) and the archive steps that
// follow, the windows table holds exactly the latest version of every
// window on the summaries topic with the status its definition gives, and
// the corrections table every correction on the topic beside the version
// it replaced; a rebuild of the day gives the same tables.
func TestCuratedTablesAgreeWithTheSummariesTopic(t *testing.T) {
	if testing.Short() {
		t.Skip("kfake")
	}
	f := newTruthFixture(t)
	scenario(t, f)
	archiveAndCurate(t, f)
	res, err := run[activities.RecomputeResult](t, f.a, f.a.RecomputeWindows, recomputeInput(activities.TriggerReconcile))
	if err != nil {
		t.Fatal(err)
	}
	if res.Report.Corrected != 4 || len(res.Files) == 0 {
		t.Fatalf("recompute %+v files %v", res.Report, res.Files)
	}
	if _, err := run[lake.CurateResult](t, f.a, f.a.CurateWindows, activities.CurateInput{Files: res.Files}); err != nil {
		t.Fatal(err)
	}
	// A window the batch never checked, published after the recompute.
	f.produce(t, f.pane("u6", t0.Add(40*time.Minute), 1, 9, 9, 9, 1, event.TimingOnTime, t0.Add(46*time.Minute)))
	archiveAndCurate(t, f)

	check := func(what string) {
		t.Helper()
		wantW, wantC := topicTables(t, f)
		got, err := f.lk.ReadWindows(t.Context(), "payments", t0.Truncate(24*time.Hour), t0.Truncate(24*time.Hour).Add(24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		gotW := map[string]string{}
		for _, w := range got {
			gotW[w.Key+"|"+w.Pane().WindowStart.Format("15:04")] = describeWindow(w.Pane(), w.Status, w.UpdatedAt)
		}
		if !maps.Equal(gotW, wantW) {
			t.Errorf("%s: windows table\n got %v\nwant %v", what, gotW, wantW)
		}
		cs, err := f.lk.ReadCorrections(t.Context(), "payments", t0.Truncate(24*time.Hour), t0.Truncate(24*time.Hour).Add(24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		var gotC []string
		for _, c := range cs {
			s := fmt.Sprintf("%s %d v%d %q %d/%g/%g/%g at %d", c.Key, c.WindowStart, c.Version, c.Reason, c.Count, c.Sum, c.Min, c.Max, c.EmittedAt)
			if c.PrevVersion != nil {
				s += fmt.Sprintf(" was v%d %d/%g/%g/%g by %s", *c.PrevVersion, *c.PrevCount, *c.PrevSum, *c.PrevMin, *c.PrevMax, *c.PrevComputedBy)
			}
			gotC = append(gotC, s)
		}
		slices.Sort(gotC)
		if !slices.Equal(gotC, wantC) {
			t.Errorf("%s: corrections table\n got %q\nwant %q", what, gotC, wantC)
		}
	}
	check("curated step by step")
	wantW, _ := topicTables(t, f)
	if wantW["u1|08:00"] == "" || wantW["u6|08:40"] == "" {
		t.Fatalf("scenario changed: %v", wantW)
	}
	for k, status := range map[string]string{"u1|08:00": lake.StatusFinal, "u2|08:00": lake.StatusCorrected, "u3|08:05": lake.StatusCorrected, "u6|08:40": lake.StatusProvisional} {
		if w := wantW[k]; w[len(w)-len(status):] != status {
			t.Errorf("%s is %s, want %s", k, w, status)
		}
	}
	if _, err := f.lk.RebuildCurated(t.Context(), "payments", t0); err != nil {
		t.Fatal(err)
	}
	check("rebuilt")
}

func describeWindow(p event.Pane, status string, updatedAt int64) string {
	if updatedAt != p.EmittedAt.UnixMicro() {
		status += fmt.Sprintf(" (updated_at %d is not emitted_at)", updatedAt)
	}
	return fmt.Sprintf("v%d %d/%g/%g/%g %s %s %s %q at %s %s", p.Version, p.Count, p.Sum, p.Min, p.Max, p.Timing, p.ComputedBy,
		p.WindowEnd.Format("15:04"), p.Reason, p.EmittedAt.Format(time.RFC3339Nano), status)
}

// topicTables builds the windows and corrections tables from every pane
// committed on the summaries topic and the truth table's windows, straight
// from their definitions (docs/lake.md).
func topicTables(t *testing.T, f *truthFixture) (map[string]string, []string) {
	t.Helper()
	byWin := map[string][]event.Pane{}
	for _, p := range f.published(t) {
		k := p.Key + "|" + p.WindowStart.Format("15:04")
		byWin[k] = append(byWin[k], p)
	}
	truth, err := f.lk.ReadTruth(t.Context(), "payments", t0.Truncate(24*time.Hour), t0.Truncate(24*time.Hour).Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	checked := map[string]bool{}
	for _, r := range truth {
		checked[r.Key+"|"+r.WindowStart.Format("15:04")] = true
	}
	windows := map[string]string{}
	var corrections []string
	for k, vs := range byWin {
		slices.SortFunc(vs, func(a, b event.Pane) int {
			if a.Version != b.Version {
				return int(a.Version - b.Version)
			}
			return a.EmittedAt.Compare(b.EmittedAt)
		})
		l := vs[len(vs)-1]
		status := lake.StatusProvisional
		switch {
		case l.ComputedBy == event.ComputedByBatch:
			status = lake.StatusCorrected
		case checked[k]:
			status = lake.StatusFinal
		}
		windows[k] = describeWindow(l, status, l.EmittedAt.UnixMicro())
		for i, c := range vs {
			if c.ComputedBy != event.ComputedByBatch {
				continue
			}
			s := fmt.Sprintf("%s %d v%d %q %d/%g/%g/%g at %d", c.Key, c.WindowStart.UnixMicro(), c.Version, c.Reason, c.Count, c.Sum, c.Min, c.Max, c.EmittedAt.UnixMicro())
			if i > 0 {
				p := vs[i-1]
				s += fmt.Sprintf(" was v%d %d/%g/%g/%g by %s", p.Version, p.Count, p.Sum, p.Min, p.Max, p.ComputedBy)
			}
			corrections = append(corrections, s)
		}
	}
	slices.Sort(corrections)
	return windows, corrections
}
