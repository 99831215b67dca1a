package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"reckon/internal/config"
	"reckon/internal/temporalconn"
	"reckon/internal/testing/testenv"
	"reckon/internal/testing/testlog"
)

// TestWorkerStopIsNotAnActivityError: stopping the batch worker while an
// activity long-polls (as ReadLate does) logs no error; the attempt is
// reported as a benign failure and the next worker retries it.
func TestWorkerStopIsNotAnActivityError(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var logs testlog.Buffer // archive_kill_test.go
	c := dialTestTemporal(t, ctx, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))

	const queue = "quiet-stop"
	started := make(chan struct{}, 1)
	longPoll := func(ctx context.Context) error {
		if activity.GetInfo(ctx).Attempt > 1 {
			return nil // the next worker's retry: nothing to wait for
		}
		started <- struct{}{}
		<-ctx.Done()
		return fmt.Errorf("truth: read late/0: %w", ctx.Err())
	}
	watch := func(ctx workflow.Context) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: time.Minute,
			RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond},
		})
		return workflow.ExecuteActivity(ctx, "LongPoll").Get(ctx, nil)
	}
	newWorker := func() worker.Worker {
		return startBatchTestWorker(t, c, queue, "LongPoll", longPoll, "QuietStopWatch", watch)
	}

	w := newWorker()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "quiet-stop", TaskQueue: queue}, "QuietStopWatch")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the activity never started")
	}
	w.Stop()

	// The stopped worker reports the attempt's failure; the server holds it
	// as the pending activity's last failure.
	var why string
	ok, _ := pollUntil(2*time.Minute, func() (bool, string) {
		d, err := c.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
		if err != nil || len(d.PendingActivities) != 1 {
			why = fmt.Sprintf("describe: %v", err)
			return false, why
		}
		f := d.PendingActivities[0].GetLastFailure()
		why = fmt.Sprintf("last failure %v", f)
		return f != nil, why
	})
	if !ok {
		t.Fatalf("no failure reported after the stop: %s", why)
	}
	d, err := c.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
	if err != nil {
		t.Fatal(err)
	}
	f := d.PendingActivities[0].GetLastFailure()
	if info := f.GetApplicationFailureInfo(); info.GetType() != errTypeWorkerStopping || info.GetCategory() != enumspb.APPLICATION_ERROR_CATEGORY_BENIGN || info.GetNonRetryable() {
		t.Errorf("last failure %v: want a retryable, benign %s", f, errTypeWorkerStopping)
	}
	out := logs.String()
	if strings.Contains(out, "level=ERROR") || !strings.Contains(out, `msg="Activity error."`) {
		t.Errorf("want the stop's activity failure at debug level only, got:\n%s", out)
	}

	w2 := newWorker()
	defer w2.Stop()
	if err := run.Get(ctx, nil); err != nil {
		t.Fatalf("the next worker's retry: %v", err)
	}
}

// TestStoppingError: only a worker shutdown turns an error benign, and an
// application error keeps its type.
func TestStoppingError(t *testing.T) {
	plain := fmt.Errorf("truth: read late/0: %w", context.Canceled)
	stopped, stop := context.WithCancelCause(context.Background())
	stop(worker.ErrWorkerShutdown)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	app := temporal.NewNonRetryableApplicationError("cursor beyond end", "Cursor", nil)

	if got := stoppingError(context.Background(), plain); got != plain {
		t.Errorf("live ctx: %v", got)
	}
	if got := stoppingError(cancelled, plain); got != plain {
		t.Errorf("cancelled (not by the worker): %v", got)
	}
	if got := stoppingError(stopped, app); got != app {
		t.Errorf("application error at shutdown: %v", got)
	}
	if stoppingError(stopped, nil) != nil {
		t.Error("nil error at shutdown is not nil")
	}
	got := stoppingError(stopped, plain)
	ae, ok := errors.AsType[*temporal.ApplicationError](got)
	if !ok || ae.Type() != errTypeWorkerStopping || ae.Category() != temporal.ApplicationErrorCategoryBenign || ae.NonRetryable() || !errors.Is(got, context.Canceled) {
		t.Errorf("at shutdown: %v", got)
	}
}

// dialTestTemporal starts a Temporal dev server and dials it as the
// workers do (temporalconn.Dial), logging to log (nil: the SDK's default
// logger); the client closes at cleanup.
func dialTestTemporal(t *testing.T, ctx context.Context, log *slog.Logger) client.Client {
	t.Helper()
	_, hostport := testenv.Temporal(t)
	c, err := temporalconn.Dial(ctx, config.Temporal{Address: hostport, Namespace: "default"}, log, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// startBatchTestWorker starts a worker on queue with the batch worker's
// options (batchWorkerOptions: its interceptors), running one activity and
// one workflow registered under the given names. The caller stops it.
func startBatchTestWorker(t *testing.T, c client.Client, queue, activityName string, act any, workflowName string, wf any) worker.Worker {
	t.Helper()
	w := worker.New(c, queue, batchWorkerOptions())
	w.RegisterActivityWithOptions(act, activity.RegisterOptions{Name: activityName})
	w.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: workflowName})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	return w
}
