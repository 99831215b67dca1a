package activities

import (
	"testing"
	"time"

	"reckon/internal/config"
)

// TestHorizonHopping: the windows starting before To of a hopping stream
// end by To + window − hop, which the horizon waits for; the range a
// stream purged through low has made final ends on a window boundary
// whose last window ends by low (docs/adr/0041).
func TestHorizonHopping(t *testing.T) {
	day := time.Date(2026, 11, 7, 0, 0, 0, 0, time.UTC)
	tumbling := config.Stream{Window: 5 * time.Minute}
	hopping := config.Stream{Window: 5 * time.Minute, Hop: time.Minute}
	to := day.Add(time.Hour)
	if e := windowsEnd(tumbling, to); !e.Equal(to) {
		t.Errorf("tumbling: windows end %v, want %v", e, to)
	}
	if e := windowsEnd(hopping, to); !e.Equal(to.Add(4 * time.Minute)) {
		t.Errorf("hopping: windows end %v, want To + 4m", e)
	}
	for _, c := range []struct {
		st       config.Stream
		low, max time.Duration // after day
		want     time.Duration
	}{
		{tumbling, 63 * time.Minute, 24 * time.Hour, 60 * time.Minute},
		{tumbling, 63 * time.Minute, 62 * time.Minute, 60 * time.Minute},
		// Purged through 01:03: 00:58–01:03 has ended, 00:59–01:04 not;
		// on a window boundary the final range ends 00:55.
		{hopping, 63 * time.Minute, 24 * time.Hour, 55 * time.Minute},
		// Through 01:04 the window 00:59–01:04 ended: the range ends 01:00.
		{hopping, 64 * time.Minute, 24 * time.Hour, 60 * time.Minute},
		{hopping, 64 * time.Minute, 57 * time.Minute, 55 * time.Minute},
	} {
		got := finalStarts(c.st, day.Add(c.low), day.Add(c.max))
		if !got.Equal(day.Add(c.want)) {
			t.Errorf("hop %v purged through %v, at most %v: %v, want %v", c.st.Hop, c.low, c.max, got.Sub(day), c.want)
		}
		// Every window starting before it has ended by low.
		if e := windowsEnd(c.st, got); e.After(day.Add(c.low)) {
			t.Errorf("hop %v: windows before %v end %v, after low %v", c.st.Hop, got.Sub(day), e.Sub(day), c.low)
		}
	}
}
