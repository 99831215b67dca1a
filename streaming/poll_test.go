package streaming

import (
	"testing"
	"time"
)

// waitFor polls cond every 50 ms until it holds, and fails the test when
// timeout passes first, with what it waited for and cond's last reason.
// Tests synchronise with it instead of sleeping a fixed time.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s: %s", timeout, what, why)
		}
		time.Sleep(50 * time.Millisecond) // the poll interval, not a synchronisation
	}
}
