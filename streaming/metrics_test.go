package streaming

import (
	"testing"
	"time"

	"reckon/internal/metrics"
	"reckon/streaming/operator"
)

// TestFeatureLateOnlyWithRollingFeatures: reckon_stream_feature_late_total
// counts records too late for rolling features, so a stream without them
// (suhu in deploy/reckon.yaml) reports none, and a stream with them reports
// what its operator counted.
func TestFeatureLateOnlyWithRollingFeatures(t *testing.T) {
	reg := metrics.NewRegistry()
	m := newWorkerMetrics(reg)
	t0 := time.Date(2026, 11, 7, 8, 0, 0, 0, time.UTC)
	sec := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	// Each stream sees the same records, with a watermark at the latest
	// event time and 10s of lateness: 50s; 35s, too late for features (at
	// 50s − 10s) but in a window that has not fired; 65s, which fires
	// [0, 60); 30s, too late for features, a late pane of [0, 60).
	events := []int{50, 35, 65, 30}
	for _, st := range []struct {
		name    string
		rolling time.Duration
		want    float64
	}{
		{"suhu", 0, 0},
		{"payments", 30 * time.Second, 2},
	} {
		op, err := operator.New(operator.Options{Stream: st.name, Window: time.Minute, Rolling: st.rolling, AllowedLateness: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		var out operator.Out
		for i, s := range events {
			v, err := op.Process(operator.Record{ID: operator.EventID{byte(i + 1)}, Key: "k", Value: 1, EventTime: sec(s), Arrival: sec(max(s, events[0]))}, &out)
			if err != nil {
				t.Fatal(err)
			}
			m.verdict(st.name, st.rolling > 0, v)
		}
		accepted := m.accepted.With(st.name).Get()
		got := m.featureLate.With(st.name).Get()
		if accepted != float64(len(events)) || got != st.want || got != float64(op.Stats().FeatureLate) {
			t.Errorf("%s: accepted %v, feature-late %v, want %v (operator counted %d)", st.name, accepted, got, st.want, op.Stats().FeatureLate)
		}
	}
}
