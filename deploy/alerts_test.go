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

// TestAlertRules: deploy/alerts.yml passes `promtool check rules`, its
// unit tests (deploy/alerts_test.yml) pass `promtool test rules`, and
// deploy/prometheus.yml, which loads it, passes `promtool check config`.
func TestAlertRules(t *testing.T) {
	for _, args := range [][]string{
		{"check", "rules", "alerts.yml"},
		{"check", "config", "prometheus.yml"},
		{"test", "rules", "alerts_test.yml"},
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
// test in deploy/alerts_test.yml in which it fires, every alert a test
// names exists, and the alerts deploy/README.md §6 asks for are there.
func TestEveryAlertFiresInATest(t *testing.T) {
	rb, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	names := alerts(t, rb)
	tb, err := os.ReadFile("alerts_test.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rt ruleTests
	if err := yaml.Unmarshal(tb, &rt); err != nil {
		t.Fatalf("alerts_test.yml: %v", err)
	}
	fires := map[string]bool{}
	for _, tc := range rt.Tests {
		for _, a := range tc.AlertRuleTest {
			if !slices.Contains(names, a.Alertname) {
				t.Errorf("alerts_test.yml tests %s, which alerts.yml does not define", a.Alertname)
			}
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			}
		}
	}
	for _, n := range names {
		if !fires[n] {
			t.Errorf("alerts.yml: %s fires in no test of alerts_test.yml", n)
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
// rule: with the archive-lag threshold raised tenfold, the archive-lag
// test fails.
func TestAlertTestsCatchABrokenRule(t *testing.T) {
	promtool.Path(t)
	rb, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	const good = "max by (topic, partition) (reckon_batch_archive_lag_seconds) > 3600"
	if !strings.Contains(string(rb), good) {
		t.Fatalf("alerts.yml: no %q to break", good)
	}
	broken := strings.Replace(string(rb), good, strings.Replace(good, "3600", "36000", 1), 1)
	tb, err := os.ReadFile("alerts_test.yml")
	if err != nil {
		t.Fatal(err)
	}
	// Only the archive-lag tests: the others would pass and take time.
	var all map[string]any
	if err := yaml.Unmarshal(tb, &all); err != nil {
		t.Fatal(err)
	}
	var keep []any
	for _, tc := range all["tests"].([]any) {
		for _, a := range tc.(map[string]any)["alert_rule_test"].([]any) {
			if a.(map[string]any)["alertname"] == "ReckonArchiveLag" {
				keep = append(keep, tc)
				break
			}
		}
	}
	if len(keep) == 0 {
		t.Fatal("alerts_test.yml has no test of ReckonArchiveLag")
	}
	all["tests"] = keep
	sub, err := yaml.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, b := range map[string][]byte{"alerts.yml": []byte(broken), "alerts_test.yml": sub} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := promtool.Run(t, "", "test", "rules", filepath.Join(dir, "alerts_test.yml"))
	if err == nil || !strings.Contains(out, "alertname: ReckonArchiveLag") {
		t.Fatalf("promtool test rules passed with the archive-lag threshold at 10 h (err %v):\n%s", err, out)
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
