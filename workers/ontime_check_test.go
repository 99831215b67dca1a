package workers

import (
	"context"
	"testing"

	"reckon/internal/config"
	"reckon/streaming"
)

// checkOnTimePanes fails the test for an on_time pane a stream emitted
// before its window end + out_of_orderness by its own clock (the record
// timestamps): a future-dated event must not close windows early
// (docs/adr/0015). It reads what `reckon verify` reads.
func checkOnTimePanes(t *testing.T, ctx context.Context, cfg *config.Config) {
	t.Helper()
	for _, s := range cfg.Streams {
		out, err := streaming.CollectOutputs(ctx, cfg, s)
		if err != nil {
			t.Fatalf("stream %s: %v", s.Name, err)
		}
		for i, e := range out.EarlyOnTime {
			if i == 5 {
				break
			}
			t.Errorf("stream %s: early on_time pane %s", s.Name, e)
		}
		if s.Name == "payments" && out.OnTime == 0 {
			t.Errorf("stream %s published no on_time pane: nothing checked", s.Name)
		}
		t.Logf("stream %s: on_time panes %d, emitted before window end + out_of_orderness: %d", s.Name, out.OnTime, len(out.EarlyOnTime))
	}
}
