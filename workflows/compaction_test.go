package workflows_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"reckon/activities"
	"reckon/workflows"
)

// fakeCompaction answers CompactRaw with a closed-through point that moves
// by an hour every third pass and, once, goes back (a progress view that
// has not caught up after a restart).
type fakeCompaction struct {
	mu     sync.Mutex // protects following fields
	passes int
	inputs []time.Time
}

func (f *fakeCompaction) CompactRaw(_ context.Context, in activities.CompactRawInput) (activities.CompactRawResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.passes++
	f.inputs = append(f.inputs, in.ClosedThrough)
	closed := day.Add(time.Duration(f.passes/3) * time.Hour)
	if f.passes == 7 {
		closed = day
	}
	return activities.CompactRawResult{ClosedThrough: closed, Basis: "stream progress", Waiting: "t/0: stream s purged through …",
		Hours: 3, ClosedHours: 1, Rows: 10, Dropped: 1, MaxOpenFiles: 5, MaxClosedFiles: 1}, nil
}

// TestCompactionPasses: the workflow runs a pass every Poll (sleeping, not
// spinning), hands each pass the previous closed-through point, never lets
// it go back, and describes what it does and waits for.
func TestCompactionPasses(t *testing.T) {
	env := truthEnv(t, newFakeTruth())
	env.RegisterWorkflowWithOptions(workflows.Compaction, workflow.RegisterOptions{Name: workflows.CompactionWorkflow})
	f := &fakeCompaction{}
	env.RegisterActivityWithOptions(f.CompactRaw, activity.RegisterOptions{Name: "CompactRaw"})
	var st workflows.CompactionState
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(workflows.CompactionQueryProgress)
		if err == nil {
			err = v.Get(&st)
		}
		if err != nil {
			t.Error(err)
		}
		env.CancelWorkflow()
	}, 10*time.Minute+time.Second)
	env.ExecuteWorkflow(workflows.CompactionWorkflow, workflows.CompactionState{Topic: "m8-suhu-kejadian", Poll: 30 * time.Second})
	var ce *temporal.CanceledError
	if err := env.GetWorkflowError(); !errors.As(err, &ce) {
		t.Fatalf("error = %v, want canceled", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.passes != 21 || st.Passes != 21 {
		t.Errorf("%d passes (state %d) in 10 minutes at a 30s poll, want 21", f.passes, st.Passes)
	}
	for i := 1; i < len(f.inputs); i++ {
		if f.inputs[i].Before(f.inputs[i-1]) {
			t.Fatalf("closed-through handed to the passes went back: %v", f.inputs)
		}
	}
	if want := day.Add(7 * time.Hour); !st.ClosedThrough.Equal(want) || st.Dropped != 21 || st.ClosedHours != 21 {
		t.Errorf("state %+v, want closed through %v", st, want)
	}
	if d := workflows.DescribeCompaction(st); !strings.Contains(d, "closed through 2026-11-07 07:00") || !strings.Contains(d, "waits for t/0") {
		t.Errorf("details %q", d)
	}
}
