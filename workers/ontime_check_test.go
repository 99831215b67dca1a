package workers

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/streaming"
)

// checkOnTimePanes reads every pane the stream published and fails the
// test for an on_time pane emitted before its window end + the stream's
// out-of-orderness by the clock that stamped the records (its emitted_at
// is the stream's processing clock): a future-dated event must not close
// windows early (docs/adr/0015).
func checkOnTimePanes(t *testing.T, ctx context.Context, cfg *config.Config) {
	t.Helper()
	ooo := map[string]time.Duration{}
	for _, s := range cfg.Streams {
		ooo[s.Name] = s.OutOfOrderness
	}
	var onTime, early int
	err := streaming.ReadTopic(ctx, cfg, cfg.Topics.Summaries, 1500*time.Millisecond, func(r *kgo.Record) {
		var p event.Pane
		if json.Unmarshal(r.Value, &p) != nil || p.Timing != event.TimingOnTime || p.ComputedBy != event.ComputedByStream {
			return
		}
		onTime++
		if due := p.WindowEnd.Add(ooo[p.Stream]); p.EmittedAt.Before(due) {
			early++
			if early <= 5 {
				t.Errorf("on_time pane %s v%d emitted at %s, before window end + out_of_orderness %s (watermark %s)",
					p.RecordKey(), p.Version, p.EmittedAt.Format(time.RFC3339Nano), due.Format(time.RFC3339Nano), p.Watermark.Format(time.RFC3339Nano))
			}
		}
	})
	if err != nil {
		t.Fatalf("read %s: %v", cfg.Topics.Summaries, err)
	}
	if onTime == 0 {
		t.Errorf("no on_time pane published: nothing checked")
	}
	t.Logf("on_time panes: %d, emitted before window end + out_of_orderness: %d", onTime, early)
}
