package lake

import (
	"fmt"
	"testing"
	"time"

	"reckon/internal/event"
)

// BenchmarkCurateStep: one pane archive step's curation (200 new panes in
// the current hour) on a day whose every hour already holds 36,000
// windows (50 keys, 5-second windows): the cost of keeping the windows
// table current, paid per step.
func BenchmarkCurateStep(b *testing.B) {
	l := mustOpen(b, Options{Root: b.TempDir()})
	day := time.Date(2026, 11, 7, 0, 0, 0, 0, time.UTC)
	const keys, win = 50, 5 * time.Second
	var panes []event.Pane
	for h := range 24 {
		for k := range keys {
			for w := range int(time.Hour / win) {
				ws := day.Add(time.Duration(h)*time.Hour + time.Duration(w)*win)
				panes = append(panes, event.Pane{Stream: "s", Key: fmt.Sprintf("k%02d", k), WindowStart: ws, WindowEnd: ws.Add(win), Count: 3, Sum: 3,
					Version: 1, Timing: event.TimingOnTime, ComputedBy: event.ComputedByStream, EmittedAt: ws.Add(win)})
			}
		}
	}
	fs, err := l.WritePanes(b.Context(), "s", "history", panes)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := l.Curate(b.Context(), []string{fs[0].Path}); err != nil {
		b.Fatal(err)
	}
	step := make([]event.Pane, 0, 200)
	for i := range 200 {
		p := panes[12*keys*720+i*37]
		p.Version, p.EmittedAt = 2, p.EmittedAt.Add(time.Second)
		step = append(step, p)
	}
	m := startCPU(b)
	for i := 0; i < b.N; i++ {
		fs, err := l.WritePanes(b.Context(), "s", fmt.Sprintf("step-%d", i), step)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Curate(b.Context(), []string{fs[0].Path}); err != nil {
			b.Fatal(err)
		}
	}
	// rows: the windows rewritten per step (the hour's).
	m.report(b, keys*float64(time.Hour/win))
}
