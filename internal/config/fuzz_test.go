package config

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"reckon/deploy"
	"reckon/internal/event"
)

// FuzzLoad feeds Load a config file, environment variables and --set
// overrides (both newline separated). It must never panic; every error
// must say it comes from the config; and a config it accepts must
//   - validate again unchanged (defaults are a fixed point),
//   - build the quality gate,
//   - load identically when its RECKON_* variables are given as --set
//     overrides instead (the two override paths are one mechanism), and
//   - load back identically from what `reckon config show` prints for it
//     (yaml.Marshal), when it holds no secret (those print redacted).
//
// Seeds: the embedded default config, the examples of config_test.go, a
// SASL/TLS override, and overrides of every kind of key.
//
//	go test ./internal/config -run '^$' -fuzz '^FuzzLoad$' -fuzztime 60s
func FuzzLoad(f *testing.F) {
	f.Add(deploy.DefaultConfig, "", "")
	f.Add(deploy.DefaultConfig, "RECKON_KAFKA_BROKERS=a:1, b:2\nRECKON_STREAM_WORKER_MAX_ATTEMPTS=5\nPATH=/bin\nRECKON_CONFIG=ignored\nRECKON_TEST_TEMPORAL_BIN=/x", "gate.max_future_skew=90s\ntemporal.namespace=prod")
	f.Add(deploy.DefaultConfig, "RECKON_KAFKA_BROKER=x:1", "")
	f.Add(deploy.DefaultConfig, "RECKON_LAKE_FAULTS_RATE=0.05", "lake.faults.seed=-3\nlake.faults.rate=NaN")
	f.Add(deploy.DefaultConfig, "", "kafka.nope=1")
	f.Add(deploy.DefaultConfig, "RECKON_STREAM_WORKER_COMMIT_INTERVAL=20ms\nRECKON_METRICS_ADDR=\nRECKON_GATE_ALLOW_UNKNOWN_TYPES=true\nRECKON_ZREPORT_OFD_SIM_FAILURE_FRACTION=0.5", "batch.reconcile_at=03:30\nbatch.timezone=Asia/Jakarta\ndev.kafka_port=0")
	f.Add(deploy.DefaultConfig, "RECKON_KAFKA_SASL_MECHANISM=PLAIN\nRECKON_KAFKA_SASL_USERNAME=u\nRECKON_KAFKA_SASL_PASSWORD=p\nRECKON_KAFKA_TLS_ENABLED=true", "")
	f.Add([]byte("kafka:\n  brokerz: [x]\n"), "", "")
	f.Add([]byte(""), "", "")
	f.Add([]byte("streams: []\n"), "", "stream_worker.instance=a")
	f.Add([]byte(`
kafka: {brokers: [nohost]}
streams:
  - {name: a, topic: t, event_types: [x.y], key_field: k, window: 7m}
  - {name: a, topic: "", event_types: [], key_field: ""}
stream_worker: {max_attempts: -1}
gate: {max_future_skew: 10m}
`), "", "")
	f.Add([]byte(`
streams:
  - {name: p, topic: t, event_types: [a.b], key_field: k, value_field: v, window: 5m, allowed_lateness: 5m, rolling: 60s}
gate:
  types:
    a.b:
      fields:
        k: {required: true, type: string, pattern: "[a-z]{1,8}", min_len: 1, max_len: 8}
        v: {type: number, min: 0, max: 1e12}
        n: {type: integer, min: -1}
        e: {enum: [x, "y z"]}
`), "RECKON_GATE_MAX_DEPTH=4", "gate.max_payload_bytes=512")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, file []byte, env, sets string) {
		path := filepath.Join(dir, "reckon.yaml")
		if err := os.WriteFile(path, file, 0o600); err != nil {
			t.Fatal(err)
		}
		environ, setList := lines(env), lines(sets)
		c, err := Load(path, environ, setList)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "config: ") {
				t.Fatalf("error does not say it is the config's: %v", err)
			}
			return
		}
		again := *c
		again.fillDefaults()
		if err := again.Validate(); err != nil {
			t.Fatalf("accepted config fails a second Validate: %v", err)
		}
		if d := diff(reflect.ValueOf(again), reflect.ValueOf(*c), "config"); d != "" {
			t.Fatalf("defaults are not a fixed point: %s", d)
		}

		if _, err := event.NewGate(c.Gate); err != nil {
			t.Fatalf("accepted config builds no quality gate: %v", err)
		}

		// The same overrides as --set flags give the same config.
		byEnv := map[string]string{}
		for _, k := range Keys() {
			byEnv[EnvName(k)] = k
		}
		var asSets []string
		for _, kv := range environ {
			name, val, ok := strings.Cut(kv, "=")
			if !ok || !strings.HasPrefix(name, "RECKON_") || name == EnvConfigPath || strings.HasPrefix(name, EnvTestPrefix) {
				continue
			}
			asSets = append(asSets, byEnv[name]+"="+val) // every name is known: Load accepted them
		}
		c2, err := Load(path, nil, append(asSets, setList...))
		if err != nil {
			t.Fatalf("env accepted as RECKON_* variables but not as --set: %v", err)
		}
		if d := diff(reflect.ValueOf(*c), reflect.ValueOf(*c2), "config"); d != "" {
			t.Fatalf("env and --set overrides differ: %s", d)
		}

		// What `reckon config show` prints loads back as the same config.
		if c.Kafka.SASL.Password != "" || c.Temporal.APIKey != "" {
			return
		}
		shown, err := yaml.Marshal(c)
		if err != nil {
			t.Fatalf("config show: %v", err)
		}
		c3, err := Parse(shown)
		if err != nil {
			t.Fatalf("config show output does not parse: %v\n%s", err, shown)
		}
		c3.fillDefaults()
		if err := c3.Validate(); err != nil {
			t.Fatalf("config show output does not validate: %v\n%s", err, shown)
		}
		if d := diff(reflect.ValueOf(*c), reflect.ValueOf(*c3), "config"); d != "" {
			t.Fatalf("config show output loads differently: %s\n%s", d, shown)
		}
	})
}

// TestLoadRejectsWhatTheGateRejects lists the gate rules Load must refuse.
func TestLoadRejectsWhatTheGateRejects(t *testing.T) {
	dir := t.TempDir()
	for _, y := range []string{
		"gate: {types: {a.b: {fields: {k: {pattern: \"[\"}}}}}\n",
		"gate: {types: {A: {fields: {k: {type: string}}}}}\n",
		"gate: {max_depth: 1}\n",
		"gate: {max_future_skew: -1s}\n",
		"gate: {max_past_age: -1s}\n",
		"gate: {types: {a.b: {fields: {k: {type: boolean, enum: [x]}}}}}\n",
		"gate: {types: {a.b: {fields: {\"x/y\": {type: string}}}}}\n",
		"gate: {types: {a.b: {fields: {k: {min_len: -1}}}}}\n",
	} {
		path := filepath.Join(dir, "reckon.yaml")
		if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path, nil, nil); err == nil {
			t.Errorf("Load accepts %q", y)
		}
	}
}

// TestLoadNeverPanics loads files that crashed the YAML parser.
func TestLoadNeverPanics(t *testing.T) {
	dir := t.TempDir()
	for _, y := range []string{"streams:\n  ! #0\n", "kafka:\n  brokers:\n    ! #0\n", "gate:\n  types:\n    a.b:\n      fields:\n        x:\n          enum:\n            ! #0\n"} {
		path := filepath.Join(dir, "reckon.yaml")
		if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path, nil, nil); err == nil || !strings.HasPrefix(err.Error(), "config: ") {
			t.Errorf("Load(%q) = %v, want a config error", y, err)
		}
	}
}

// lines splits s at newlines, dropping empty lines.
func lines(s string) []string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// diff returns the first path where a and b differ, "" when they are
// equal. An empty and a nil slice or map are equal: YAML cannot tell them
// apart and no reader of the config does.
func diff(a, b reflect.Value, path string) string {
	switch a.Kind() {
	case reflect.Struct:
		for i := range a.NumField() {
			if d := diff(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); d != "" {
				return d
			}
		}
		return ""
	case reflect.Slice:
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: %d vs %d elements", path, a.Len(), b.Len())
		}
		for i := range a.Len() {
			if d := diff(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
		return ""
	case reflect.Map:
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: %d vs %d entries", path, a.Len(), b.Len())
		}
		for _, k := range a.MapKeys() {
			bv := b.MapIndex(k)
			if !bv.IsValid() {
				return fmt.Sprintf("%s[%v]: missing", path, k)
			}
			if d := diff(a.MapIndex(k), bv, fmt.Sprintf("%s[%v]", path, k)); d != "" {
				return d
			}
		}
		return ""
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return fmt.Sprintf("%s: nil vs not nil", path)
			}
			return ""
		}
		return diff(a.Elem(), b.Elem(), path)
	case reflect.Float64:
		if x, y := a.Float(), b.Float(); x != y && !(math.IsNaN(x) && math.IsNaN(y)) {
			return fmt.Sprintf("%s: %v vs %v", path, x, y)
		}
		return ""
	}
	if !a.Equal(b) {
		return fmt.Sprintf("%s: %v vs %v", path, a, b)
	}
	return ""
}
