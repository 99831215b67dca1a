package workers

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

// pollUntil is poll.Until, for waits whose timeout is an outcome.
func pollUntil(timeout time.Duration, cond func() (bool, string)) (bool, string) {
	return poll.Until(timeout, cond)
}
