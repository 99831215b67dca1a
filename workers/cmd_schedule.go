package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"reckon/internal/config"
	"reckon/internal/temporalconn"
	"reckon/workflows"
)

// runSchedule is `reckon schedule apply|describe|trigger`.
func runSchedule(ctx context.Context, cx *cmdContext) error {
	cx.fs.Usage = func() {
		fmt.Fprintln(cx.stderr, `usage: reckon schedule apply      create or update the daily reconciliation schedule (idempotent)
       reckon schedule describe   show the schedule, its next runs and recent actions
       reckon schedule trigger    take the schedule's action now`)
		cx.fs.PrintDefaults()
	}
	if len(cx.args) == 0 {
		cx.fs.Usage()
		return fmt.Errorf("%w: missing subcommand", errUsage)
	}
	sub := cx.args[0]
	cx.args = cx.args[1:]
	if err := cx.parse(); err != nil {
		return err
	}
	cfg := cx.cfg
	c, err := temporalconn.Dial(ctx, cfg.Temporal, slog.New(slog.DiscardHandler), 30*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	switch sub {
	case "apply":
		what, err := applySchedule(ctx, cfg, c)
		if err != nil {
			return err
		}
		fmt.Fprintf(cx.stdout,
			"schedule %s %s: daily at %s %s, reconciles the date %d day(s) back, overlap %s, catch-up window %v\n",
			cfg.Batch.ScheduleID, what, cfg.Batch.ReconcileAt, cfg.Batch.Timezone, cfg.Batch.DaysBack, scheduleOverlap, cfg.Batch.CatchupWindow)
		return nil
	case "describe":
		d, err := c.ScheduleClient().GetHandle(ctx, cfg.Batch.ScheduleID).Describe(ctx)
		if err != nil {
			return fmt.Errorf("schedule %s: %w (run `reckon schedule apply`)", cfg.Batch.ScheduleID, err)
		}
		fmt.Fprintf(cx.stdout, "schedule %s\n", cfg.Batch.ScheduleID)
		if p := d.Schedule.Policy; p != nil {
			fmt.Fprintf(cx.stdout, "  overlap %s, catch-up window %v, pause on failure %v\n", p.Overlap, p.CatchupWindow,
				p.PauseOnFailure)
		}
		if s := d.Schedule.State; s != nil {
			fmt.Fprintf(cx.stdout, "  paused %v %s\n", s.Paused, s.Note)
		}
		fmt.Fprintf(cx.stdout, "  actions taken %d, missed (catch-up window) %d, skipped (overlap) %d\n",
			d.Info.NumActions, d.Info.NumActionsMissedCatchupWindow, d.Info.NumActionsSkippedOverlap)
		for _, t := range d.Info.NextActionTimes {
			fmt.Fprintf(cx.stdout, "  next   %s\n", t.UTC().Format(time.RFC3339))
		}
		for _, a := range d.Info.RecentActions {
			id := ""
			if a.StartWorkflowResult != nil {
				id = a.StartWorkflowResult.WorkflowID
			}
			fmt.Fprintf(cx.stdout, "  recent %s %s\n", a.ScheduleTime.UTC().Format(time.RFC3339), id)
		}
		return nil
	case "trigger":
		if err := c.ScheduleClient().GetHandle(ctx, cfg.Batch.ScheduleID).Trigger(ctx,
			client.ScheduleTriggerOptions{}); err != nil {
			return fmt.Errorf("schedule %s: %w", cfg.Batch.ScheduleID, err)
		}
		fmt.Fprintf(cx.stdout, "schedule %s triggered\n", cfg.Batch.ScheduleID)
		return nil
	}
	return fmt.Errorf("%w: unknown subcommand %q (apply, describe, trigger)", errUsage, sub)
}

// scheduleOverlap: a run still waiting for its horizon when the next is
// due makes the next one wait (days are never skipped, never run
// concurrently); see docs/adr/0008-batch-truth.md.
const scheduleOverlap = enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ALL

// scheduleOptions is the daily reconciliation schedule of cfg.
func scheduleOptions(cfg *config.Config) (client.ScheduleOptions, error) {
	h, m, err := cfg.Batch.ReconcileClock()
	if err != nil {
		return client.ScheduleOptions{}, err
	}
	return client.ScheduleOptions{
		ID: cfg.Batch.ScheduleID,
		Spec: client.ScheduleSpec{
			Calendars: []client.ScheduleCalendarSpec{{
				Hour: []client.ScheduleRange{{Start: h}}, Minute: []client.ScheduleRange{{Start: m}},
				Comment: "daily reconciliation",
			}},
			TimeZoneName: cfg.Batch.Timezone,
		},
		Action: &client.ScheduleWorkflowAction{
			ID:        "reconcile",
			Workflow:  workflows.ReconcileWorkflow,
			Args:      []any{reconcileParams(cfg)},
			TaskQueue: cfg.Temporal.TaskQueue,
			StaticSummary: fmt.Sprintf("daily reconciliation: the price of speed of the day %d day(s) before",
				cfg.Batch.DaysBack),
		},
		Overlap:       scheduleOverlap,
		CatchupWindow: cfg.Batch.CatchupWindow,
		Note:          "managed by `reckon schedule apply`",
	}, nil
}

// applySchedule creates the schedule, or updates an existing one to match
// cfg (spec, action, policies); it reports which.
func applySchedule(ctx context.Context, cfg *config.Config, c client.Client) (string, error) {
	opts, err := scheduleOptions(cfg)
	if err != nil {
		return "", err
	}
	_, err = c.ScheduleClient().Create(ctx, opts)
	if err == nil {
		return "created", nil
	}
	if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return "", fmt.Errorf("schedule %s: create: %w", opts.ID, err)
	}
	err = c.ScheduleClient().GetHandle(ctx, opts.ID).Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			s := in.Description.Schedule
			s.Spec = &opts.Spec
			s.Action = opts.Action
			s.Policy = &client.SchedulePolicies{Overlap: opts.Overlap, CatchupWindow: opts.CatchupWindow,
				PauseOnFailure: opts.PauseOnFailure}
			return &client.ScheduleUpdate{Schedule: &s}, nil
		},
	})
	if err != nil {
		return "", fmt.Errorf("schedule %s: update: %w", opts.ID, err)
	}
	return "updated", nil
}
