// Package verifytest wraps the verification room's checks (verify/…) for
// tests: each reads what it checks and fails t for every violation.
package verifytest

import (
	"context"
	"testing"

	"reckon/internal/config"
	"reckon/verify/progresscheck"
)

// Progress reads what is committed and fails t for every violation; it
// returns what it read for the test's own assertions.
func Progress(t testing.TB, ctx context.Context, cfg *config.Config) *progresscheck.Committed {
	t.Helper()
	c, err := progresscheck.Read(ctx, cfg)
	if err != nil {
		t.Fatalf("progresscheck: %v", err)
	}
	v := c.Violations(cfg)
	for i, l := range v {
		if i == 20 {
			t.Errorf("progresscheck: … %d more", len(v)-i)
			break
		}
		t.Errorf("progresscheck: %s", l)
	}
	t.Logf("progresscheck: %d progress records, %d panes checked, %d violations", len(c.Progress), len(c.Panes), len(v))
	return c
}
