package workers

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"reckon/activities"
	"reckon/lake"
	"reckon/lake/storage"
	"reckon/lake/storage/errorfs"
)

// TestPermanentLakeErrorFailsTheWorkflowAtOnce: on the batch worker (its
// options as the wiring builds them, on a real Temporal server), an
// activity whose lake refuses access for good fails once, with a
// non-retryable LakeAccess error that names the file and the cause in the
// workflow's failure (what the UI shows), although its retry policy would
// retry forever; a transient fault of the same activity is retried and
// gets through (docs/adr/0022-lake-fault-injection.md).
func TestPermanentLakeErrorFailsTheWorkflowAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := dialTestTemporal(t, ctx, nil)
	root := t.TempDir()
	open := func(k errorfs.FaultKind) *lake.Lake {
		l, err := lake.Open(lake.Options{Root: root, Wrap: (&errorfs.Faults{Seed: 1, Rules: []errorfs.FaultRule{{Op: storage.OpReadFile, Kind: k, Rate: 1}}}).Wrap})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	denied, flaky := open(errorfs.FaultDenied), open(errorfs.FaultError)

	const queue = "lake-errors"
	var calls atomic.Int64
	readProgress := func(ctx context.Context, which string) error {
		calls.Add(1)
		l := denied
		if which == "flaky" {
			l = flaky
			if activity.GetInfo(ctx).Attempt >= 3 {
				return nil // the fault cleared
			}
		}
		_, err := l.ReadProgress(ctx, "payments-kejadian", 0)
		if errors.Is(err, lake.ErrNoProgress) {
			return nil
		}
		return err
	}
	wf := func(ctx workflow.Context, which string) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: 10 * time.Second,
			RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 50 * time.Millisecond, MaximumInterval: 100 * time.Millisecond},
		})
		return workflow.ExecuteActivity(ctx, "ReadProgress", which).Get(ctx, nil)
	}
	w := startBatchTestWorker(t, c, queue, "ReadProgress", readProgress, "LakeErrors", wf)
	defer w.Stop()

	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "lake-errors-denied", TaskQueue: queue}, "LakeErrors", "denied")
	if err != nil {
		t.Fatal(err)
	}
	err = run.Get(ctx, nil)
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != activities.ErrTypeLakeAccess || !ae.NonRetryable() {
		t.Fatalf("workflow with access denied: %v; want a non-retryable %s failure", err, activities.ErrTypeLakeAccess)
	}
	if msg := err.Error(); !strings.Contains(msg, "permission denied") || !strings.Contains(msg, "_progress/topic=payments-kejadian/partition=0.json") {
		t.Errorf("failure %q does not name the cause and the file", msg)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the activity ran %d times, want once", n)
	}

	calls.Store(0)
	run, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "lake-errors-flaky", TaskQueue: queue}, "LakeErrors", "flaky")
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatalf("workflow with a transient fault: %v", err)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("the activity with a transient fault ran %d times, want 3 (retried)", n)
	}
}
