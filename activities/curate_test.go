package activities_test

import (
	"strings"
	"testing"
	"time"

	"reckon/activities"
	"reckon/internal/event"
	"reckon/lake"
	"reckon/verify/curatedcheck"
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

	day := t0.Truncate(24 * time.Hour)
	truth, err := f.lk.ReadTruth(t.Context(), "payments", day, day.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		ws, err := f.lk.ReadWindows(t.Context(), "payments", day, day.Add(24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		cs, err := f.lk.ReadCorrections(t.Context(), "payments", day, day.Add(24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if d := curatedcheck.Diff(ws, cs, f.published(t), truth); len(d) > 0 {
			t.Errorf("%s: the curated tables differ from their definitions:\n%s", what, strings.Join(d, "\n"))
		}
	}
	check("curated step by step")
	wantW, _ := curatedcheck.Tables(f.published(t), truth)
	status := map[string]string{}
	for _, w := range wantW {
		status[w.Key+"|"+w.Pane().WindowStart.Format("15:04")] = w.Status
	}
	for k, want := range map[string]string{"u1|08:00": lake.StatusFinal, "u2|08:00": lake.StatusCorrected, "u3|08:05": lake.StatusCorrected, "u6|08:40": lake.StatusProvisional} {
		if status[k] != want {
			t.Errorf("scenario changed: %s is %q, want %s (%v)", k, status[k], want, status)
		}
	}
	if _, err := f.lk.RebuildCurated(t.Context(), "payments", t0); err != nil {
		t.Fatal(err)
	}
	check("rebuilt")
}
