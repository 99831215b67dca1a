package workers

import (
	"strings"
	"testing"

	"reckon/internal/config"
)

// TestConfigKeys: `reckon config keys` lists every key with its environment
// variable, its default and a description.
func TestConfigKeys(t *testing.T) {
	code, stdout, stderr := runReckon(t, "config", "keys")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rows := map[string][]string{}
	for _, l := range strings.Split(stdout, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			rows[f[0]] = f
		}
	}
	for _, k := range config.Keys() {
		f := rows[k]
		if len(f) < 4 || f[1] != config.EnvName(k) || !strings.Contains(strings.Join(f[3:], " "), config.KeyDoc(k)) {
			t.Errorf("row of %s: %q", k, f)
		}
	}
	if f := rows["stream_worker.max_attempts"]; len(f) < 3 || f[2] != "3" {
		t.Errorf("stream_worker.max_attempts default: %q", f)
	}
	if f := rows["kafka.brokers"]; len(f) < 3 || f[2] != "127.0.0.1:9092" {
		t.Errorf("kafka.brokers default: %q", f)
	}
}

// TestSetAfterSubcommand: --set written after a subcommand or an argument
// is read (config show, topics describe, topics tail) or refused with a
// usage error, never silently ignored.
func TestSetAfterSubcommand(t *testing.T) {
	code, stdout, stderr := runReckon(t, "config", "show", "--set", "kafka.brokers=10.9.8.7:9092")
	if code != 0 || !strings.Contains(stdout, "10.9.8.7:9092") {
		t.Errorf("config show --set: exit %d, override not shown: %s%s", code, stdout, stderr)
	}
	// Port 1 refuses: the error names the broker only if --set was read.
	for _, args := range [][]string{
		{"topics", "describe", "--wait", "1s", "--set", "kafka.brokers=127.0.0.1:1"},
		{"topics", "tail", "reckon-dlq", "--set", "kafka.brokers=127.0.0.1:1"},
	} {
		code, _, stderr := runReckon(t, args...)
		if code == 0 || !strings.Contains(stderr, "127.0.0.1:1") {
			t.Errorf("%q: exit %d, the broker from --set not used: %s", args, code, stderr)
		}
	}
	code, _, stderr = runReckon(t, "verify", "extra", "--set", "kafka.brokers=127.0.0.1:1")
	if code != 2 || !strings.Contains(stderr, "--set comes after the argument") {
		t.Errorf("verify extra --set: exit %d: %s", code, stderr)
	}
}
