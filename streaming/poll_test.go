package streaming

import (
	"testing"
	"time"

	"reckon/internal/testing/poll"
)

// waitFor is poll.WaitFor: tests synchronise on conditions, not sleeps.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	poll.WaitFor(t, timeout, what, cond)
}
