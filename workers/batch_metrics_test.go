package workers

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"reckon/activities"
	"reckon/internal/metrics"
)

type fakeHorizon struct{}

func (*fakeHorizon) CheckHorizon(_ context.Context, in activities.HorizonInput) (activities.HorizonResult, error) {
	return activities.HorizonResult{Waiting: "x", Causes: []string{activities.HorizonWatermark}}, nil
}

// TestActivityResultsReachTheMetrics: the worker interceptor hands each
// activity's decoded argument and result to the batch metrics.
func TestActivityResultsReachTheMetrics(t *testing.T) {
	r := metrics.NewRegistry()
	m := &batchMetrics{results: activities.NewMetrics(r, time.Minute)}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: append(batchWorkerOptions().Interceptors, m.interceptor())})
	env.RegisterActivity(&fakeHorizon{})
	if _, err := env.ExecuteActivity((&fakeHorizon{}).CheckHorizon, activities.HorizonInput{Stream: "payments"}); err != nil {
		t.Fatal(err)
	}
	r.Collect(t.Context())
	var b strings.Builder
	r.WriteText(&b)
	for _, line := range []string{
		`reckon_batch_horizon_checks_total{stream="payments",result="waiting"} 1`,
		`reckon_batch_horizon_waiting{stream="payments",cause="watermark_behind"} 1`,
	} {
		if !strings.Contains(b.String(), line+"\n") {
			t.Errorf("no %s in\n%s", line, b.String())
		}
	}
}
