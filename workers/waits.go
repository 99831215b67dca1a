package workers

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"reckon/workflows"
)

// childWaits says what the running children of workflow id wait for: for
// each pending child that answers the recompute `status` query while
// waiting for the horizon, "<child id>: <first reason>" (the same text as
// the child's current details in the Temporal UI). Empty when nothing
// waits or the workflow cannot be described.
func childWaits(ctx context.Context, c client.Client, id string) []string {
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return nil
	}
	var out []string
	for _, ch := range d.GetPendingChildren() {
		v, err := c.QueryWorkflow(ctx, ch.GetWorkflowId(), "", workflows.RecomputeQueryStatus)
		if err != nil {
			continue
		}
		var st workflows.RecomputeStatus
		if v.Get(&st) != nil || st.Status != workflows.StatusWaiting || st.Waiting == "" {
			continue
		}
		reasons := strings.Split(st.Waiting, "\n")
		w := reasons[0]
		if len(reasons) > 1 {
			w += fmt.Sprintf(" (+%d more)", len(reasons)-1)
		}
		out = append(out, ch.GetWorkflowId()+" waits: "+w)
	}
	slices.Sort(out)
	return out
}

// waitLines decides when a waiting command prints its reason again: at
// once when what it waits for changes (another workflow or partition,
// another kind of reason), else at most every waitRepeat while only the
// figures in it move (a watermark creeping toward its target).
type waitLines struct {
	shape string
	at    time.Time
}

const waitRepeat = 15 * time.Second

var waitFigures = regexp.MustCompile(`[0-9]`)

func (l *waitLines) due(line string, now time.Time) bool {
	shape := waitFigures.ReplaceAllString(line, "")
	if shape == l.shape && now.Sub(l.at) < waitRepeat {
		return false
	}
	l.shape, l.at = shape, now
	return true
}
