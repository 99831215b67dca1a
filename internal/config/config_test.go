package config

import (
	"strings"
	"testing"
	"time"
)

func TestDefaultConfigLoadsAndValidates(t *testing.T) {
	c, err := Load("", nil, nil)
	if err != nil {
		t.Fatalf("embedded default config: %v", err)
	}
	s, ok := c.StreamByName("suhu")
	if !ok || s.Topic != "m8-suhu-kejadian" || s.Window != time.Hour || s.KeyField != "id_perangkat" {
		t.Fatalf("suhu stream = %+v", s)
	}
	r := c.Gate.Types["sensor.suhu.terbaca"].Fields["suhu_c"]
	if r.Min == nil || *r.Min != -40 || r.Max == nil || *r.Max != 60 || r.Type != "number" {
		t.Fatalf("suhu_c rule = %+v", r)
	}
	// The YAML anchor shares Z-report part rules across the three sources.
	for _, typ := range []string{"zreport.ofd.received", "zreport.dwh.computed", "zreport.rms.computed"} {
		if _, ok := c.Gate.Types[typ].Fields["fiscal_drive"]; !ok {
			t.Errorf("%s: no fiscal_drive rule", typ)
		}
	}
}

func TestEnvAndSetOverride(t *testing.T) {
	env := []string{"RECKON_KAFKA_BROKERS=a:1, b:2", "RECKON_STREAM_WORKER_MAX_ATTEMPTS=5", "PATH=/bin", "RECKON_CONFIG=ignored", "RECKON_TEST_TEMPORAL_BIN=/x"}
	c, err := Load("", env, []string{"gate.max_future_skew=90s", "temporal.namespace=prod"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Kafka.Brokers, ",") != "a:1,b:2" || c.Stream.MaxAttempts != 5 {
		t.Fatalf("env not applied: %+v %+v", c.Kafka, c.Stream)
	}
	if c.Gate.MaxFutureSkew != 90*time.Second || c.Temporal.Namespace != "prod" {
		t.Fatalf("--set not applied: %v %q", c.Gate.MaxFutureSkew, c.Temporal.Namespace)
	}
}

func TestUnknownEnvAndKeysAreErrors(t *testing.T) {
	if _, err := Load("", []string{"RECKON_KAFKA_BROKER=x:1"}, nil); err == nil || !strings.Contains(err.Error(), "RECKON_KAFKA_BROKER") {
		t.Fatalf("typo in env var: err = %v", err)
	}
	if _, err := Load("", nil, []string{"kafka.nope=1"}); err == nil {
		t.Fatal("unknown --set key accepted")
	}
	if _, err := Parse([]byte("kafka:\n  brokerz: [x]\n")); err == nil {
		t.Fatal("unknown YAML key accepted")
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c, err := Parse([]byte(`
kafka: {brokers: [nohost]}
streams:
  - {name: a, topic: t, event_types: [x.y], key_field: k, window: 7m}
  - {name: a, topic: "", event_types: [], key_field: ""}
stream_worker: {max_attempts: -1}
gate: {max_future_skew: 10m}
`))
	if err != nil {
		t.Fatal(err)
	}
	c.fillDefaults()
	err = c.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"kafka.brokers[0]", "streams[0].window", "streams[0].event_types: \"x.y\" has no rules", "streams[1].name: \"a\" is used twice", "streams[1].topic", "streams[1].event_types", "streams[1].key_field", "stream_worker.max_attempts"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	// A skew wider than the lateness is fine: a future-dated event moves
	// the watermark only to its record timestamp (docs/adr/0015).
	if strings.Contains(err.Error(), "max_future_skew") {
		t.Errorf("a 10m skew is reported:\n%v", err)
	}
}
