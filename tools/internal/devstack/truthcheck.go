package devstack

import (
	"fmt"
	"os"
	"strings"
	"time"

	"reckon/verify/generate"
)

// LastWindowEnd is the latest window end of the manifest's truth.
func LastWindowEnd(path string) (time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	m, err := generate.ReadManifest(f)
	if err != nil {
		return time.Time{}, err
	}
	var last time.Time
	for _, w := range m.Truth {
		end, err := time.Parse(time.RFC3339Nano, w.WindowEnd)
		if err != nil {
			return time.Time{}, fmt.Errorf("%s: window end %q: %w", path, w.WindowEnd, err)
		}
		if end.After(last) {
			last = end
		}
	}
	if last.IsZero() {
		return last, fmt.Errorf("%s: no truth window", path)
	}
	return last, nil
}

// CheckedThrough reads, from the reconcile report of day (printReport's
// table), up to where it checked the payments stream: a day in progress
// must say it ("payments: checked windows up to T; …"), and when the run's
// last window end lastEnd falls in day, T must be at or past it.
func CheckedThrough(out, day string, inProgress bool, lastEnd time.Time) error {
	const prefix = "payments: checked windows up to "
	i := strings.Index(out, prefix)
	if i < 0 {
		if inProgress {
			return fmt.Errorf("the report of %s, a day in progress, does not say up to where it checked payments", day)
		}
		return nil // a past day: checked whole
	}
	rest := out[i+len(prefix):]
	to, err := time.Parse(time.RFC3339, rest[:strings.IndexAny(rest+";", "; \n")])
	if err != nil {
		return fmt.Errorf("report line %q: %w", strings.SplitN(out[i:], "\n", 2)[0], err)
	}
	if lastEnd.Add(-time.Nanosecond).UTC().Format(time.DateOnly) == day && to.Before(lastEnd) {
		return fmt.Errorf("checked payments up to %s only, the run's windows end at %s", to.UTC().Format(time.TimeOnly),
			lastEnd.UTC().Format(time.TimeOnly))
	}
	return nil
}
