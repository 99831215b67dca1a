package workers

import (
	"testing"
	"time"
)

// waitFor polls cond until it holds, and fails the test when timeout
// passes first, with what it waited for and cond's last reason. Tests
// synchronise with it instead of sleeping a fixed time.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	if ok, why := pollUntil(timeout, cond); !ok {
		t.Fatalf("waited %v for %s: %s", timeout, what, why)
	}
}

// pollUntil polls cond every 20 ms until it holds or timeout passes, and
// returns whether it held and its last reason; for waits whose timeout is
// an outcome rather than a failure.
func pollUntil(timeout time.Duration, cond func() (bool, string)) (bool, string) {
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok || time.Now().After(deadline) {
			return ok, why
		}
		time.Sleep(20 * time.Millisecond) // the poll interval, not a synchronisation
	}
}
