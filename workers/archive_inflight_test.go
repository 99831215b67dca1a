package workers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"reckon/internal/config"
	"reckon/internal/kafkaconn"
)

// The archive tests stop or kill a batch worker while an ArchiveRange
// activity is in flight and prove it: they wait for evidence that a step
// is running, stop the worker, and check afterwards that the step never
// completed and was retried. These helpers gather that evidence.

// archiveStep is an ArchiveRange activity the Temporal server holds as
// pending on an archive workflow.
type archiveStep struct {
	workflowID string
	activityID string
	attempt    int32
	state      enumspb.PendingActivityState
	worker     string // identity of the worker that last started it
}

func (s archiveStep) String() string {
	return fmt.Sprintf("%s activity %s attempt %d (%s by %s)", s.workflowID, s.activityID, s.attempt, s.state, s.worker)
}

// pendingArchiveSteps lists the pending ArchiveRange activities of the
// workflows ids, from DescribeWorkflowExecution.
func pendingArchiveSteps(ctx context.Context, tc client.Client, ids ...string) ([]archiveStep, error) {
	var out []archiveStep
	for _, id := range ids {
		d, err := tc.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			return nil, fmt.Errorf("describe %s: %w", id, err)
		}
		for _, a := range d.GetPendingActivities() {
			if a.GetActivityType().GetName() != "ArchiveRange" {
				continue
			}
			out = append(out, archiveStep{id, a.GetActivityId(), a.GetAttempt(), a.GetState(), a.GetLastWorkerIdentity()})
		}
	}
	return out, nil
}

// startedBy returns the pending ArchiveRange activities of ids that the
// server has handed to a worker whose identity starts with prefix.
func startedBy(ctx context.Context, tc client.Client, prefix string, ids ...string) ([]archiveStep, error) {
	steps, err := pendingArchiveSteps(ctx, tc, ids...)
	if err != nil {
		return nil, err
	}
	var out []archiveStep
	for _, s := range steps {
		if s.state == enumspb.PENDING_ACTIVITY_STATE_STARTED && strings.HasPrefix(s.worker, prefix) {
			out = append(out, s)
		}
	}
	return out, nil
}

// stillPending reports whether step s has not completed: the server still
// holds the same activity as pending, in the same or a later attempt.
func stillPending(ctx context.Context, tc client.Client, s archiveStep) (bool, error) {
	steps, err := pendingArchiveSteps(ctx, tc, s.workflowID)
	if err != nil {
		return false, err
	}
	for _, p := range steps {
		if p.activityID == s.activityID && p.attempt >= s.attempt {
			return true, nil
		}
	}
	return false, nil
}

// retriedAttempt returns the attempt in which step s finally ran, from the
// workflow's history (ActivityTaskStarted records the last attempt), or 0
// when it has not completed.
func retriedAttempt(ctx context.Context, tc client.Client, s archiveStep) (int32, error) {
	scheduled := int64(-1)
	it := tc.GetWorkflowHistory(ctx, s.workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return 0, err
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityId() == s.activityID {
			scheduled = e.GetEventId()
		}
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil && a.GetScheduledEventId() == scheduled {
			return a.GetAttempt(), nil
		}
	}
	return 0, nil
}

// heldFetch is the fetch a fetchHold holds: an archive activity reading
// partition from offset.
type heldFetch struct {
	partition int32
	offset    int64
}

// fetchHold makes the kfake broker hold the next fetch of one topic — the
// read of an ArchiveRange activity, the only consumer of a raw topic in
// these tests — until release, so the test can stop or kill the worker
// while the activity is provably inside its step. Every later fetch of the
// same partition from the same offset is held too: when the client gives
// up on the held request (its request timeout) and asks again, or the
// activity fails and its retry reads the same range, the step still cannot
// get past its read, however long the test takes to stop the worker.
type fetchHold struct {
	held     chan heldFetch // receives the first held fetch
	released chan struct{}
	once     sync.Once
}

func holdNextFetch(t testing.TB, ctx context.Context, c *kfake.Cluster, cfg *config.Config, topic string) *fetchHold {
	t.Helper()
	adm, closeAdm, err := kafkaconn.NewAdmin(cfg.Kafka, "test")
	if err != nil {
		t.Fatal(err)
	}
	md, err := adm.ListTopics(ctx, topic)
	closeAdm()
	if err != nil || md[topic].Err != nil {
		t.Fatalf("topic %s: %v %v", topic, err, md[topic].Err)
	}
	id := md[topic].ID
	h := &fetchHold{held: make(chan heldFetch, 1), released: make(chan struct{})}
	t.Cleanup(h.release)
	var mu sync.Mutex // protects first
	var first *heldFetch
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		select {
		case <-h.released:
			c.DropControl()
			return nil, nil, false
		default:
		}
		var got *heldFetch
		for _, tp := range req.(*kmsg.FetchRequest).Topics {
			if (tp.Topic == topic || tp.TopicID == id) && len(tp.Partitions) > 0 {
				got = &heldFetch{tp.Partitions[0].Partition, tp.Partitions[0].FetchOffset}
			}
		}
		if got == nil {
			return nil, nil, false
		}
		mu.Lock()
		switch {
		case first == nil:
			first = got
			h.held <- *got
		case *got != *first:
			mu.Unlock()
			return nil, nil, false // another partition or range goes on
		}
		mu.Unlock()
		// Sleep this request (other connections go on) until released;
		// then the broker answers it as usual, if anyone still listens.
		c.SleepControl(func() { <-h.released })
		return nil, nil, false
	})
	return h
}

// wait returns the held fetch, failing the test after timeout.
func (h *fetchHold) wait(t testing.TB, timeout time.Duration) heldFetch {
	t.Helper()
	select {
	case f := <-h.held:
		return f
	case <-time.After(timeout):
		t.Fatalf("no fetch of the raw topic within %v: no archive step started", timeout)
		return heldFetch{}
	}
}

// release lets the held fetch go on; safe to call more than once.
func (h *fetchHold) release() { h.once.Do(func() { close(h.released) }) }
