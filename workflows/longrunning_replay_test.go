package workflows_test

import (
	"os"
	"path/filepath"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"reckon/workflows"
)

// TestLongRunningHistoriesReplay replays recorded histories of the
// workflows that never end — Archive, PaneArchive, FeatureArchive, LateWatch, Compaction — with
// today's code. Their runs are open during every deploy and the new code
// replays them: a change to their command sequence (another activity, a
// timer, a reordered step) would break every partition's run, and fails
// here first. Each workflow has two recorded runs, each ending in
// continue-as-new: the first from a fresh start, the second started by
// continue-as-new with the carried state. The test also checks that the
// recordings hold what they must (several steps that read records, idle
// periods, the late watcher's signalled items), so a thin re-recording
// fails too. Re-record after an intended change (guarded with
// workflow.GetVersion for the running ones):
//
//	go test ./workers -run TestRecordLongRunningHistories -args -record-long-running
func TestLongRunningHistoriesReplay(t *testing.T) {
	for _, c := range []struct {
		file      string
		continued bool   // started by continue-as-new
		first     string // the activity only a fresh start runs, if any
		cycle     string // the activity every iteration runs
		work      string // the activity that reads records (may be cycle)
		field     string // a result field of work that some call has > 0
		idles     bool   // caught up, the workflow sleeps on a timer
		after     string // an activity that follows work when it read records, if any
	}{
		{"archive_history.json", false, "LoadCursor", "ArchiveRange", "ArchiveRange", "Rows", true, ""},
		{"archive_continued_history.json", true, "", "ArchiveRange", "ArchiveRange", "Rows", true, ""},
		{"pane_archive_history.json", false, "PaneCursor", "PaneArchiveEnd", "ArchivePanes", "Panes", true, "CurateWindows"},
		{"pane_archive_continued_history.json", true, "", "PaneArchiveEnd", "ArchivePanes", "Panes", true, "CurateWindows"},
		// Recorded before the curation step (workflow.GetVersion "curate-windows").
		{"pane_archive_precurate_history.json", false, "PaneCursor", "PaneArchiveEnd", "ArchivePanes", "Panes", true, ""},
		{"pane_archive_continued_precurate_history.json", true, "", "PaneArchiveEnd", "ArchivePanes", "Panes", true, ""},
		{"feature_archive_history.json", false, "FeatureCursor", "FeatureArchiveEnd", "ArchiveFeatures", "Features", true, ""},
		{"feature_archive_continued_history.json", true, "", "FeatureArchiveEnd", "ArchiveFeatures", "Features", true, ""},
		{"late_watch_history.json", false, "", "ReadLate", "ReadLate", "Items", false, ""},
		{"late_watch_continued_history.json", true, "", "ReadLate", "ReadLate", "Items", false, ""},
		{"compaction_history.json", false, "", "CompactRaw", "CompactRaw", "Rows", true, ""},
		{"compaction_continued_history.json", true, "", "CompactRaw", "CompactRaw", "Rows", true, ""},
	} {
		t.Run(c.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", c.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			hist, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s := summarize(t, hist)
			if s.continued != c.continued || s.last != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW {
				t.Errorf("recording: started by continue-as-new %v (want %v), last event %s (want continue-as-new)", s.continued, c.continued, s.last)
			}
			if c.first != "" && len(s.results[c.first]) != 1 {
				t.Errorf("recording: %d %s activities, want 1 at the start", len(s.results[c.first]), c.first)
			}
			busy := 0
			for _, r := range s.results[c.work] {
				if n, _ := r[c.field].(float64); n > 0 {
					busy++
				}
			}
			if len(s.results[c.cycle]) < 3 || busy == 0 {
				t.Errorf("recording: %d iterations (%s), %d %s with %s > 0; want several iterations and records read", len(s.results[c.cycle]), c.cycle, busy, c.work, c.field)
			}
			if c.idles && s.timers == 0 {
				t.Error("recording: no idle sleep (timer)")
			}
			if c.after != "" && len(s.results[c.after]) == 0 {
				t.Errorf("recording: no %s activity", c.after)
			}

			r := workflows.NewTestReplayer(t)
			r.RegisterWorkflowWithOptions(workflows.Archive, workflow.RegisterOptions{Name: "Archive"})
			r.RegisterWorkflowWithOptions(workflows.PaneArchive, workflow.RegisterOptions{Name: workflows.PaneArchiveWorkflow})
			r.RegisterWorkflowWithOptions(workflows.LateWatch, workflow.RegisterOptions{Name: workflows.LateWatchWorkflow})
			r.RegisterWorkflowWithOptions(workflows.FeatureArchive, workflow.RegisterOptions{Name: workflows.FeatureArchiveWorkflow})
			r.RegisterWorkflowWithOptions(workflows.Compaction, workflow.RegisterOptions{Name: workflows.CompactionWorkflow})
			if err := r.ReplayWorkflowHistory(nil, hist); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// historySummary is what a recorded run did.
type historySummary struct {
	continued bool                        // started by continue-as-new
	last      enumspb.EventType           // its last event
	results   map[string][]map[string]any // activity type → completed results, decoded
	timers    int
}

func summarize(t *testing.T, h *historypb.History) historySummary {
	t.Helper()
	s := historySummary{results: map[string][]map[string]any{}}
	scheduled := map[int64]string{}
	dc := converter.GetDefaultDataConverter()
	for _, e := range h.GetEvents() {
		s.last = e.GetEventType()
		switch {
		case e.GetWorkflowExecutionStartedEventAttributes() != nil:
			s.continued = e.GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId() != ""
		case e.GetActivityTaskScheduledEventAttributes() != nil:
			scheduled[e.GetEventId()] = e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
		case e.GetActivityTaskCompletedEventAttributes() != nil:
			a := e.GetActivityTaskCompletedEventAttributes()
			var r map[string]any
			if err := dc.FromPayloads(a.GetResult(), &r); err != nil {
				r = nil // a scalar result (a cursor): counted, not inspected
			}
			name := scheduled[a.GetScheduledEventId()]
			s.results[name] = append(s.results[name], r)
		case e.GetTimerStartedEventAttributes() != nil:
			s.timers++
		}
	}
	return s
}
