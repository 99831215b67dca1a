// Package poll is how tests wait: on a condition, polled, with a deadline,
// never a fixed sleep.
package poll

import (
	"testing"
	"time"
)

// Interval is how often a condition is polled.
const Interval = 20 * time.Millisecond

// WaitFor polls cond until it holds, and fails the test when timeout passes
// first, with what it waited for and cond's last reason.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	if ok, why := Until(timeout, cond); !ok {
		t.Fatalf("waited %v for %s: %s", timeout, what, why)
	}
}

// Until polls cond until it holds or timeout passes, and returns whether it
// held and its last reason: for waits whose timeout is an outcome rather
// than a failure.
func Until(timeout time.Duration, cond func() (bool, string)) (bool, string) {
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok || time.Now().After(deadline) {
			return ok, why
		}
		time.Sleep(Interval) // the poll interval, not a synchronisation
	}
}
