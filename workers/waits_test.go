package workers

import (
	"testing"
	"time"
)

// A waiting command repeats a reason whose figures move at most every
// waitRepeat, and prints a new kind of reason at once.
func TestWaitLinesThrottle(t *testing.T) {
	var l waitLines
	t0 := time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)
	steps := []struct {
		line string
		at   time.Duration
		want bool
	}{
		{"r/p waits: t/1: watermark 15:45:57Z < 15:49:00Z needed", 0, true},
		{"r/p waits: t/1: watermark 15:45:59Z < 15:49:00Z needed", 2 * time.Second, false},
		{"r/p waits: t/0: watermark 15:45:06Z < 15:49:00Z needed", 4 * time.Second, false}, // same shape: only figures differ
		{"r/p waits: t/0: archived to offset 7, the stream counted to 9", 6 * time.Second, true},
		{"r/p waits: t/0: archived to offset 8, the stream counted to 9", 8 * time.Second, false},
		{"r/p waits: t/0: archived to offset 8, the stream counted to 9", 21 * time.Second, true},
	}
	for i, s := range steps {
		if got := l.due(s.line, t0.Add(s.at)); got != s.want {
			t.Errorf("step %d (%q at +%v): due %v, want %v", i, s.line, s.at, got, s.want)
		}
	}
}
