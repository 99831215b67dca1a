package workers

import (
	"log/slog"
	"strings"
	"testing"

	"reckon/internal/config"
	"reckon/internal/metrics"
	"reckon/internal/testing/promtool"
	"reckon/streaming"
)

// TestMetricsPassPromtool: the stream and batch workers' /metrics, with a
// series in every family they register, pass Prometheus' own linter
// (`promtool check metrics`): names, units, suffixes and help text. The
// families are read from the registries, so one added later is linted
// too.
func TestMetricsPassPromtool(t *testing.T) {
	promtool.Path(t)
	cfg, err := config.Load("", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	stream := metrics.NewRegistry()
	if _, err := streaming.New(cfg, log, stream); err != nil {
		t.Fatal(err)
	}
	batch := metrics.NewRegistry()
	newBatchMetrics(batch, cfg, nil, nil, nil, log)
	for _, w := range []struct {
		name string
		r    *metrics.Registry
	}{{"stream", stream}, {"batch", batch}} {
		fams := w.r.Families()
		if len(fams) < 10 {
			t.Fatalf("%s worker: only %d metric families registered", w.name, len(fams))
		}
		promtool.Populate(w.r)
		var b strings.Builder
		w.r.WriteText(&b)
		for _, f := range fams {
			if !strings.Contains(b.String(), "\n"+f.Name) {
				t.Errorf("%s worker: family %s has no sample after Populate", w.name, f.Name)
			}
		}
		if out, err := promtool.CheckMetrics(t, b.String()); err != nil {
			t.Errorf("%s worker's metrics (%d families): %v\n%s", w.name, len(fams), err, out)
		}
	}
}

// TestPromtoolRejectsAnHourGauge: the linter the test above relies on
// rejects the name the batch worker used to serve (a gauge of hour
// partitions named like a duration in hours), so a clean run means
// something.
func TestPromtoolRejectsAnHourGauge(t *testing.T) {
	r := metrics.NewRegistry()
	r.Gauge("reckon_batch_compaction_backlog_hours", "UTC hours of the raw topic with files to compact.", "topic")
	promtool.Populate(r)
	var b strings.Builder
	r.WriteText(&b)
	out, err := promtool.CheckMetrics(t, b.String())
	if err == nil || !strings.Contains(out, `use base unit "seconds" instead of "hours"`) {
		t.Fatalf("promtool accepted reckon_batch_compaction_backlog_hours (err %v):\n%s", err, out)
	}
}
