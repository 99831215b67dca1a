// Package promtool runs Prometheus' own tool, promtool (Debian package
// prometheus), from tests: its metrics linter over a registry's text and
// its rule checker and rule unit tests over deploy/alerts.yml. It is for
// tests only; no worker imports it.
package promtool

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"reckon/internal/metrics"
)

// EnvRequire makes a missing promtool a failure instead of a skip (`make
// test` and CI set it; .ci/run installs the prometheus package).
const EnvRequire = "RECKON_TEST_REQUIRE_PROMTOOL"

// Path returns promtool from PATH. Without it the test is skipped, or
// fails when EnvRequire is set.
func Path(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		msg := "promtool not found on PATH: install Debian's prometheus package (sudo apt-get install prometheus)"
		if os.Getenv(EnvRequire) != "" {
			t.Fatalf("%s (%s is set)", msg, EnvRequire)
		}
		t.Skip(msg)
	}
	return p
}

// Found says whether promtool is on PATH, for a test that lints on the
// way but tests more than the lint.
func Found() bool {
	_, err := exec.LookPath("promtool")
	return err == nil || os.Getenv(EnvRequire) != ""
}

// Run runs promtool with args and stdin and returns its combined output;
// err is non-nil when it exits non-zero.
func Run(t testing.TB, stdin string, args ...string) (string, error) {
	t.Helper()
	// A hang guard, not a speed limit: at load 30 the rule unit tests took
	// minutes of wall time (a 2-minute bound killed them).
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, Path(t), args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("promtool %s: %w", strings.Join(args, " "), err)
	}
	return out.String(), err
}

// CheckMetrics runs `promtool check metrics` over text in the Prometheus
// text format and returns what it reports; err is non-nil when it rejects
// the text (lint problems exit 3, a parse error 1).
func CheckMetrics(t testing.TB, text string) (string, error) {
	t.Helper()
	return Run(t, text, "check", "metrics")
}

// Populate gives every family of r one series, so a scrape shows each
// family with samples as a busy worker's does: label values are the label
// names, counters and gauges read 1, histograms hold one observation of 1.
func Populate(r *metrics.Registry) {
	for _, f := range r.Families() {
		vals := make([]string, len(f.Labels))
		for i, l := range f.Labels {
			vals[i] = l
		}
		switch f.Type {
		case "counter":
			r.Counter(f.Name, "", f.Labels...).With(vals...).Add(1)
		case "gauge":
			r.Gauge(f.Name, "", f.Labels...).With(vals...).Set(1)
		case "histogram":
			r.Histogram(f.Name, "", nil, f.Labels...).With(vals...).Observe(1)
		}
	}
}
