package deploy_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"reckon/internal/testing/promtool"
)

// ruleTestFiles are the unit tests of deploy/alerts.yml: those evaluated
// every minute, and those whose series span a day or a week, evaluated
// hourly (every minute, a week of series costs promtool ~36 CPU-seconds).
var ruleTestFiles = []string{"alerts_test.yml", "alerts_test_long.yml"}

// TestAlertRules: deploy/alerts.yml passes `promtool check rules`, its
// unit tests (ruleTestFiles) pass `promtool test rules`, and
// deploy/prometheus.yml, which loads it, passes `promtool check config`.
func TestAlertRules(t *testing.T) {
	for _, args := range [][]string{
		{"check", "rules", "alerts.yml"},
		{"check", "config", "prometheus.yml"},
		append([]string{"test", "rules"}, ruleTestFiles...),
	} {
		if out, err := promtool.Run(t, "", args...); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	}
}

// ruleFile is the part of a Prometheus rule file the tests read.
type ruleFile struct {
	Groups []struct {
		Rules []struct {
			Alert string `yaml:"alert"`
			Expr  string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func alerts(t *testing.T, b []byte) []string {
	t.Helper()
	var f ruleFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	var names []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				names = append(names, r.Alert)
			}
		}
	}
	return names
}

// ruleTests is the part of a promtool test file the tests read.
type ruleTests struct {
	Tests []struct {
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// TestEveryAlertFiresInATest: each alert of deploy/alerts.yml has a unit
// test in one of ruleTestFiles in which it fires, every alert a test
// names exists, and the alerts deploy/README.md §6 asks for are there.
func TestEveryAlertFiresInATest(t *testing.T) {
	rb, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	names := alerts(t, rb)
	fires := map[string]bool{}
	for _, file := range ruleTestFiles {
		tb, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var rt ruleTests
		if err := yaml.Unmarshal(tb, &rt); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, tc := range rt.Tests {
			for _, a := range tc.AlertRuleTest {
				if !slices.Contains(names, a.Alertname) {
					t.Errorf("%s tests %s, which alerts.yml does not define", file, a.Alertname)
				}
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				}
			}
		}
	}
	for _, n := range names {
		if !fires[n] {
			t.Errorf("alerts.yml: %s fires in no test of %v", n, ruleTestFiles)
		}
	}
	// The README's signals, each by the metric its rule reads.
	for _, m := range []string{
		"reckon_batch_archive_lag_seconds", "reckon_batch_horizon_waiting", "reckon_stream_dead_letters_total",
		`up{job="reckon-stream"}`, "reckon_batch_corrections_total", "reckon_lake_storage_gave_up_total",
		"reckon_stream_consumer_lag_records", "reckon_stream_transactions_total",
	} {
		if !strings.Contains(string(rb), m) {
			t.Errorf("alerts.yml has no rule on %s (deploy/README.md §6)", m)
		}
	}
}

// TestAlertTestsCatchABrokenRule: the unit tests are not satisfied by any
// rule: in each test file, with one alert's threshold raised tenfold, that
// alert's test fails.
func TestAlertTestsCatchABrokenRule(t *testing.T) {
	promtool.Path(t)
	for _, c := range []struct{ file, alert, good, broken string }{
		{"alerts_test.yml", "ReckonArchiveLag",
			"max by (topic, partition) (reckon_batch_archive_lag_seconds) > 3600", "> 36000"},
		{"alerts_test_long.yml", "ReckonCorrectionRateHigh",
			`/ sum by (stream) (increase(reckon_batch_windows_checked_total{trigger="reconcile"}[1d])) > 0.01`, "> 0.1"},
	} {
		t.Run(c.file, func(t *testing.T) { brokenRule(t, c.file, c.alert, c.good, c.broken) })
	}
}

// brokenRule runs file's tests of alert against alerts.yml with good
// replaced by its start up to " > " followed by broken; they must fail.
func brokenRule(t *testing.T, file, alert, good, broken string) {
	rb, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rb), good) {
		t.Fatalf("alerts.yml: no %q to break", good)
	}
	bad := good[:strings.LastIndex(good, " > ")] + " " + broken
	rules := strings.Replace(string(rb), good, bad, 1)
	tb, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// Only the alert's tests: the others would pass and take time.
	var all map[string]any
	if err := yaml.Unmarshal(tb, &all); err != nil {
		t.Fatal(err)
	}
	var keep []any
	for _, tc := range all["tests"].([]any) {
		for _, a := range tc.(map[string]any)["alert_rule_test"].([]any) {
			if a.(map[string]any)["alertname"] == alert {
				keep = append(keep, tc)
				break
			}
		}
	}
	if len(keep) == 0 {
		t.Fatalf("%s has no test of %s", file, alert)
	}
	all["tests"] = keep
	sub, err := yaml.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, b := range map[string][]byte{"alerts.yml": []byte(rules), file: sub} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := promtool.Run(t, "", "test", "rules", filepath.Join(dir, file))
	if err == nil || !strings.Contains(out, "alertname: "+alert) {
		t.Fatalf("promtool test rules %s passed with %q (err %v):\n%s", file, bad, err, out)
	}
}

// TestComposeLoadsAlertRules: the compose stack's Prometheus finds the
// rules where deploy/prometheus.yml names them, relative to the file.
func TestComposeLoadsAlertRules(t *testing.T) {
	b, err := os.ReadFile("prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		RuleFiles []string `yaml:"rule_files"`
	}
	if err := yaml.Unmarshal(b, &p); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	if !slices.Equal(p.RuleFiles, []string{"alerts.yml"}) {
		t.Fatalf("prometheus.yml rule_files %v, want [alerts.yml]", p.RuleFiles)
	}
	c := load(t)
	vols := c.Services["prometheus"].Volumes
	for _, want := range []string{
		"./deploy/prometheus.yml:/etc/prometheus/prometheus.yml:ro",
		"./deploy/alerts.yml:/etc/prometheus/alerts.yml:ro",
	} {
		if !slices.Contains(vols, want) {
			t.Errorf("docker-compose.yml: prometheus mounts %v, not %s", vols, want)
		}
	}
}
