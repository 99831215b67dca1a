package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"reckon/activities"
	"reckon/workflows"
)

// fakePanes is a summaries partition whose end grows by 120 offsets per
// PaneArchiveEnd call until 500.
type fakePanes struct {
	mu     sync.Mutex // protects following fields
	end    int64
	ranges [][2]int64
}

func (f *fakePanes) PaneCursor(context.Context, string, int32) (int64, error) { return 30, nil }

func (f *fakePanes) PaneArchiveEnd(context.Context, string, int32) (activities.PaneEnd, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.end = min(f.end+120, 500)
	return activities.PaneEnd{End: f.end, ObservedAt: time.Unix(f.end, 0)}, nil
}

func (f *fakePanes) ArchivePanes(_ context.Context, in activities.ArchivePanesInput) (activities.ArchivePanesResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if in.To > in.End {
		return activities.ArchivePanesResult{}, errors.New("range beyond the end")
	}
	f.ranges = append(f.ranges, [2]int64{in.From, in.To})
	res := activities.ArchivePanesResult{Next: in.To, Records: in.To - in.From, Panes: in.To - in.From, ArchivedThrough: in.ObservedAt}
	if in.To > in.From {
		res.Files = []string{fmt.Sprintf("summaries/stream=s/window_date=2026-11-07/t-0-%d-%d.parquet", in.From, in.To-1)}
	}
	return res, nil
}

// TestPaneArchiveCutsFixedRanges: the cursor resumes from the lake, each
// step's range is fixed from the end observed before it (at most
// MaxRecords), consecutive ranges tile the partition, and when caught up
// the workflow sleeps instead of spinning.
func TestPaneArchiveCutsFixedRanges(t *testing.T) {
	f := newFakeTruth()
	env := truthEnv(t, f)
	p := &fakePanes{}
	for name, fn := range map[string]any{"PaneCursor": p.PaneCursor, "PaneArchiveEnd": p.PaneArchiveEnd, "ArchivePanes": p.ArchivePanes} {
		env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
	var st workflows.PaneArchiveState
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(workflows.PaneArchiveQueryProgress)
		if err == nil {
			err = v.Get(&st)
		}
		if err != nil {
			t.Error(err)
		}
		env.CancelWorkflow()
	}, time.Minute)
	env.ExecuteWorkflow(workflows.PaneArchiveWorkflow, workflows.PaneArchiveState{Topic: "m8-suhu-rangkuman", Partition: 0, Cursor: -1, MaxRecords: 100})
	var ce *temporal.CanceledError
	if err := env.GetWorkflowError(); !errors.As(err, &ce) {
		t.Fatalf("error = %v, want canceled", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	next := int64(30)
	for _, r := range p.ranges {
		if r[0] != next || r[1]-r[0] > 100 {
			t.Fatalf("ranges %v do not tile from 30 in steps of at most 100", p.ranges)
		}
		next = r[1]
	}
	if next != 500 || st.Cursor != 500 || st.Panes != 470 {
		t.Fatalf("archived to %d, state %+v", next, st)
	}
	// Every step that wrote files curated exactly them, in order.
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.curated) != len(p.ranges) {
		t.Fatalf("%d curations for %d steps", len(f.curated), len(p.ranges))
	}
	for i, r := range p.ranges {
		if want := fmt.Sprintf("summaries/stream=s/window_date=2026-11-07/t-0-%d-%d.parquet", r[0], r[1]-1); len(f.curated[i]) != 1 || f.curated[i][0] != want {
			t.Errorf("step %d curated %v, want [%s]", i, f.curated[i], want)
		}
	}
}
