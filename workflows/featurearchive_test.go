package workflows_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"reckon/activities"
	"reckon/workflows"
)

// fakeFeatures is a features partition whose end grows by grow offsets per
// FeatureArchiveEnd call until last. Its lake resumes at 30, where an
// earlier run left the unfinished step [30, 70): the first step from 30
// redoes that range, whatever the workflow asked.
type fakeFeatures struct {
	grow, last int64
	mu         sync.Mutex // protects following fields
	end        int64
	ranges     [][2]int64 // the ranges archived
	asked      [][2]int64 // the ranges the workflow asked for
}

func (f *fakeFeatures) FeatureCursor(context.Context, string, int32) (int64, error) { return 30, nil }

func (f *fakeFeatures) FeatureArchiveEnd(context.Context, string, int32) (activities.PaneEnd, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.end = min(f.end+f.grow, f.last)
	return activities.PaneEnd{End: f.end, ObservedAt: time.Unix(f.end, 0)}, nil
}

func (f *fakeFeatures) ArchiveFeatures(_ context.Context, in activities.ArchiveFeaturesInput) (activities.ArchiveFeaturesResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if in.To > in.End || in.From > in.To {
		return activities.ArchiveFeaturesResult{}, errors.New("range beyond the end")
	}
	f.asked = append(f.asked, [2]int64{in.From, in.To})
	to := in.To
	if in.From == 30 && in.To > in.From {
		to = 70 // the unfinished step of an earlier run
	}
	if to > in.From {
		f.ranges = append(f.ranges, [2]int64{in.From, to})
	}
	res := activities.ArchiveFeaturesResult{Next: to, Records: to - in.From, Features: to - in.From}
	if to >= in.End {
		res.ArchivedThrough = in.ObservedAt
	}
	return res, nil
}

func featureEnv(t *testing.T, f *fakeFeatures) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := truthEnv(t, newFakeTruth())
	env.RegisterWorkflowWithOptions(workflows.FeatureArchive, workflow.RegisterOptions{Name: workflows.FeatureArchiveWorkflow})
	for name, fn := range map[string]any{
		"FeatureCursor": f.FeatureCursor, "FeatureArchiveEnd": f.FeatureArchiveEnd, "ArchiveFeatures": f.ArchiveFeatures,
	} {
		env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
	return env
}

// TestFeatureArchiveTilesThePartition: the cursor resumes from the lake,
// each step's range is fixed from the end observed before it (at most
// MaxRecords), the cursor follows a step that redid an earlier run's
// range, the archived ranges tile the partition with no offset twice, and
// when caught up the workflow sleeps instead of spinning.
func TestFeatureArchiveTilesThePartition(t *testing.T) {
	f := &fakeFeatures{grow: 120, last: 500}
	env := featureEnv(t, f)
	var st workflows.FeatureArchiveState
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(workflows.FeatureArchiveQueryProgress)
		if err == nil {
			err = v.Get(&st)
		}
		if err != nil {
			t.Error(err)
		}
		env.CancelWorkflow()
	}, time.Minute)
	env.ExecuteWorkflow(workflows.FeatureArchiveWorkflow, workflows.FeatureArchiveState{
		Topic: "reckon-features", Partition: 0, Cursor: -1, MaxRecords: 100,
	})
	var ce *temporal.CanceledError
	if err := env.GetWorkflowError(); !errors.As(err, &ce) {
		t.Fatalf("error = %v, want canceled", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	next := int64(30)
	for _, r := range f.ranges {
		if r[0] != next || r[1]-r[0] > 100 {
			t.Fatalf("ranges %v do not tile from 30 in steps of at most 100", f.ranges)
		}
		next = r[1]
	}
	if next != 500 || st.Cursor != 500 || st.Features != 470 || !st.ArchivedThrough.Equal(time.Unix(500, 0)) {
		t.Fatalf("archived to %d, state %+v", next, st)
	}
	if f.asked[0] != [2]int64{30, 120} || f.asked[1][0] != 70 {
		t.Errorf("asked %v: the second step should start where the redone one ended", f.asked[:2])
	}
	// Caught up, it sleeps (2s idle) and writes progress at most once a
	// minute: a minute holds a handful of steps, not thousands.
	if n := len(f.asked); n > 20 {
		t.Errorf("%d steps in a minute of test time: spinning", n)
	}
}

// TestFeatureArchiveContinuesAsNew: when the server suggests it, the run
// ends with a continue-as-new that carries the cursor and the totals.
func TestFeatureArchiveContinuesAsNew(t *testing.T) {
	f := &fakeFeatures{grow: 50, last: 10_000}
	env := featureEnv(t, f)
	// The server suggests it once the run has done some steps.
	env.RegisterDelayedCallback(func() { env.SetContinueAsNewSuggested(true) }, time.Second)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Hour) // never reached when it works
	env.ExecuteWorkflow(workflows.FeatureArchiveWorkflow, workflows.FeatureArchiveState{
		Topic: "reckon-features", Partition: 2, Cursor: -1, MaxRecords: 7,
	})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("error = %v, want continue-as-new", err)
	}
	if can.WorkflowType.Name != workflows.FeatureArchiveWorkflow {
		t.Fatalf("continues as %s", can.WorkflowType.Name)
	}
	var st workflows.FeatureArchiveState
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &st); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	last := f.ranges[len(f.ranges)-1][1]
	if st.Cursor != last || st.Features != last-30 || st.Partition != 2 || st.Steps != int64(len(f.asked)) || st.Steps < 2 {
		t.Fatalf("carried %+v; archived to %d in %d steps", st, last, len(f.asked))
	}
}
