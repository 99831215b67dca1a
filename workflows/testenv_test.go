package workflows

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestDeadlockTimeout is the deadlock detector's bound in the tests'
// workflow environments. The SDK's default, one second of wall clock
// without the workflow yielding, fired at load 22 ("Potential deadlock
// detected") on workflows that only computed slowly. Production workers
// keep the default: a flagged task is retried there.
const TestDeadlockTimeout = time.Minute

// NewTestEnv is s.NewTestWorkflowEnvironment with the deadlock detector at
// TestDeadlockTimeout; every workflow test of the package starts from it.
func NewTestEnv(s *testsuite.WorkflowTestSuite) *testsuite.TestWorkflowEnvironment {
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: TestDeadlockTimeout})
	return env
}

// NewTestReplayer is a workflow replayer without the deadlock detector
// (the replayer takes no bound, only this switch): a replay test checks
// determinism, and a loaded machine must not fail it by its pace.
func NewTestReplayer(t testing.TB) worker.WorkflowReplayer {
	t.Helper()
	r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DisableDeadlockDetection: true})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// busyWorkflow computes for d of wall clock without yielding, as a slow
// workflow task does on a loaded machine.
func busyWorkflow(_ workflow.Context, d time.Duration) error {
	for start := time.Now(); time.Since(start) < d; {
	}
	return nil
}

// TestTestEnvDeadlockBound: a workflow task busy for 1.5 s fails the SDK's
// default test environment with "Potential deadlock detected" and passes
// NewTestEnv's.
func TestTestEnvDeadlockBound(t *testing.T) {
	run := func(env *testsuite.TestWorkflowEnvironment) error {
		env.RegisterWorkflow(busyWorkflow)
		env.ExecuteWorkflow(busyWorkflow, 1500*time.Millisecond)
		if !env.IsWorkflowCompleted() {
			t.Fatal("workflow did not complete")
		}
		return env.GetWorkflowError()
	}
	var s testsuite.WorkflowTestSuite
	if err := run(s.NewTestWorkflowEnvironment()); err == nil || !strings.Contains(err.Error(), "Potential deadlock") {
		t.Fatalf("default environment: %v, want a potential deadlock", err)
	}
	if err := run(NewTestEnv(&s)); err != nil {
		t.Fatalf("NewTestEnv: %v", err)
	}
}

// TestEveryEnvFromNewTestEnv: no test file of the package makes a workflow
// environment or replayer but through NewTestEnv and NewTestReplayer, so a
// new test does not bring the one-second detector back.
func TestEveryEnvFromNewTestEnv(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f == "testenv_test.go" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, direct := range []string{".NewTestWorkflowEnvironment()", "worker.NewWorkflowReplayer()"} {
			if strings.Contains(string(b), direct) {
				t.Errorf("%s calls %s: use NewTestEnv / NewTestReplayer (deadlock bound for loaded machines)", f, direct)
			}
		}
	}
}
