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
