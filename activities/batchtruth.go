package activities

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"reckon/internal/config"
	"reckon/lake"
	"reckon/streaming/progress"
)

// BatchTruth holds the dependencies of the batch-truth activities: the
// pane archive, the late-topic reader, recompute, reports and replay status
// (docs/adr/0008-batch-truth.md). Its methods are safe for concurrent use.
//
// "Truth" alone names several things; each has its own name: BatchTruth is
// this group of activities, foldLake its fold of the lake's raw rows into
// window aggregates (operator.Truth's fold: the stream operator's window
// arithmetic and aggregate, run unbounded), and the lake's truth table
// (lake.WriteTruth/ReadTruth) holds the recomputed windows that
// RecomputeWindows writes. Temporal registers the activities by method
// name (RecomputeWindows, CheckHorizon, TruthStreams, ...), not by this
// type's name, so recorded histories stay valid across the rename.
type BatchTruth struct {
	Cfg  *config.Config
	Lake *lake.Lake
	// Now is the clock; default time.Now.
	Now func() time.Time
	// SignalLate hands the too-late events of one stream to its targeted
	// correction workflow (signal-with-start). The wiring sets it: the
	// workflow's names live in package workflows, which activities must
	// not import.
	SignalLate func(ctx context.Context, stream string, items []LateItem) error
	// Kafka is the process's shared Kafka read side (NewKafka), which the
	// wiring builds and closes. Nil builds one from Cfg.Kafka on first use,
	// kept as long as the struct (tests, benchmarks).
	Kafka *Kafka
	lazy  lazyKafka
	// Progress follows the stream's progress topic: the horizon's only
	// evidence (CheckHorizon, docs/adr/0015-stream-progress.md). Built
	// once by the worker wiring.
	Progress *progress.View
}

// kafka returns the Kafka read side.
func (a *BatchTruth) kafka() (*Kafka, error) { return a.lazy.get(a.Kafka, a.Cfg.Kafka, "truth") }

func (a *BatchTruth) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func badInput(format string, a ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("truth: "+format, a...), ErrTypeTruthInput, nil)
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "(nothing)"
	}
	return t.UTC().Format(time.RFC3339)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func floorNanos(t, size int64) int64 {
	m := t % size
	if m < 0 {
		m += size
	}
	return t - m
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
