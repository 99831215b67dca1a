package config

import (
	"fmt"
	"time"
)

// Batch tunes the batch truth: recompute, the daily reconciliation
// schedule, replay and targeted corrections (docs/adr/0008-batch-truth.md).
// The zero value of each field means its default.
type Batch struct {
	// ScheduleID is the Temporal Schedule of the daily reconciliation.
	// Default "reckon-reconcile".
	ScheduleID string `yaml:"schedule_id"`
	// ReconcileAt is the time of day (HH:MM, in Timezone) the daily
	// reconciliation runs. Default "02:00".
	ReconcileAt string `yaml:"reconcile_at"`
	// Timezone of ReconcileAt and of "yesterday". Default "UTC".
	Timezone string `yaml:"timezone"`
	// DaysBack is which day a run reconciles: the run's nominal date minus
	// this many days. Default 1 (yesterday).
	DaysBack int `yaml:"days_back"`
	// CatchupWindow: after an outage of the Temporal server, missed daily
	// runs younger than this are still taken (one after another); older
	// ones are left to `reckon replay`. Default 72h.
	CatchupWindow time.Duration `yaml:"catchup_window"`
	// HorizonWait bounds how long a recompute waits for the horizon before
	// it fails (visible in the Temporal UI meanwhile). Default 6h.
	HorizonWait time.Duration `yaml:"horizon_wait"`
	// HorizonPoll is how often a waiting recompute checks again. Default 30s.
	HorizonPoll time.Duration `yaml:"horizon_poll"`
	// ReplayConcurrency is the default number of (stream, day) children a
	// replay runs at once. Default 2.
	ReplayConcurrency int `yaml:"replay_concurrency"`
	// CorrectDebounce: a targeted correction waits this long after the
	// last too-late event of a stream before recomputing. Default 10s.
	CorrectDebounce time.Duration `yaml:"correct_debounce"`
	// CorrectMaxDelay bounds the debounce: a correction starts at most this
	// long after the first pending too-late event. Default 1m.
	CorrectMaxDelay time.Duration `yaml:"correct_max_delay"`
	// LateWait is how long one read of the late topic waits for records
	// before returning empty. Default 5s.
	LateWait time.Duration `yaml:"late_wait"`
	// PaneArchiveIdle is how long the pane and feature archives idle.
	// Default 2s.
	PaneArchiveIdle time.Duration `yaml:"pane_archive_idle"`
	// FinalizeEvery paces the finalizers: a step at most this often. Each
	// stream's (workflow finalize/<stream>, ADR 0034) makes windows final
	// as soon as their horizon passes. Default 10s; a negative value turns
	// the finalizers off (windows are then final only after a
	// reconciliation, a replay or a targeted correction).
	FinalizeEvery time.Duration `yaml:"finalize_every"`
}

func (b *Batch) fillDefaults() {
	if b.ScheduleID == "" {
		b.ScheduleID = "reckon-reconcile"
	}
	if b.ReconcileAt == "" {
		b.ReconcileAt = "02:00"
	}
	if b.Timezone == "" {
		b.Timezone = "UTC"
	}
	if b.DaysBack == 0 {
		b.DaysBack = 1
	}
	defs := []struct {
		d *time.Duration
		v time.Duration
	}{
		{&b.CatchupWindow, 72 * time.Hour}, {&b.HorizonWait, 6 * time.Hour},
		{&b.HorizonPoll, 30 * time.Second}, {&b.CorrectDebounce, 10 * time.Second}, {&b.CorrectMaxDelay, time.Minute},
		{&b.LateWait, 5 * time.Second}, {&b.PaneArchiveIdle, 2 * time.Second},
		{&b.FinalizeEvery, 10 * time.Second},
	}
	for _, d := range defs {
		if *d.d == 0 {
			*d.d = d.v
		}
	}
	if b.ReplayConcurrency == 0 {
		b.ReplayConcurrency = 2
	}
}

// ReconcileClock parses ReconcileAt into hour and minute.
func (b *Batch) ReconcileClock() (hour, minute int, err error) {
	t, err := time.Parse("15:04", b.ReconcileAt)
	if err != nil {
		return 0, 0, fmt.Errorf("config: batch.reconcile_at: %q is not HH:MM", b.ReconcileAt)
	}
	return t.Hour(), t.Minute(), nil
}

func (b *Batch) validate(bad func(format string, a ...any)) {
	if _, _, err := b.ReconcileClock(); err != nil {
		bad("batch.reconcile_at: %q is not HH:MM", b.ReconcileAt)
	}
	if _, err := time.LoadLocation(b.Timezone); err != nil {
		bad("batch.timezone: %q: %v", b.Timezone, err)
	}
	if b.DaysBack < 0 {
		bad("batch.days_back: must not be negative")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"catchup_window", b.CatchupWindow}, {"horizon_wait", b.HorizonWait},
		{"horizon_poll", b.HorizonPoll}, {"correct_debounce", b.CorrectDebounce}, {"correct_max_delay", b.CorrectMaxDelay},
		{"late_wait", b.LateWait}, {"pane_archive_idle", b.PaneArchiveIdle},
	} {
		if d.v < 0 {
			bad("batch.%s: must not be negative", d.name)
		}
	}
	if b.CatchupWindow > 0 && b.CatchupWindow < 10*time.Second {
		bad("batch.catchup_window: %v is below Temporal's minimum of 10s", b.CatchupWindow)
	}
	if b.CorrectMaxDelay < b.CorrectDebounce {
		bad("batch.correct_max_delay (%v) must not be below batch.correct_debounce (%v)", b.CorrectMaxDelay,
			b.CorrectDebounce)
	}
	if b.ReplayConcurrency < 1 {
		bad("batch.replay_concurrency: must be at least 1")
	}
}
