package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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

// TestDevS3PointsTheLakeAtTheDevServer: dev.s3 puts a default lake on the
// dev S3 server (every command given dev.s3 finds it), keeps an s3://
// root of its own with the server's endpoint, leaves a lake.s3 endpoint
// alone, and refuses a directory root.
func TestDevS3PointsTheLakeAtTheDevServer(t *testing.T) {
	c, err := Load("", nil, []string{"dev.s3=true", "dev.s3_port=18444"})
	if err != nil {
		t.Fatal(err)
	}
	s := c.Lake.S3
	if c.Lake.Root != DevS3Root || s.Endpoint != "http://127.0.0.1:18444" || s.AccessKeyID != DevS3AccessKeyID ||
		s.SecretAccessKey != DevS3SecretAccessKey || !s.AllowPlaintextCredentials {
		t.Errorf("dev.s3 with the default lake: root %s, s3 %+v", c.Lake.Root, s)
	}
	if c, err = Load("", nil, []string{"dev.s3=true", "lake.root=s3://mine/lake"}); err != nil || c.Lake.Root != "s3://mine/lake" ||
		c.Lake.S3.Endpoint != "http://127.0.0.1:8333" {
		t.Errorf("dev.s3 with an s3:// root: %v, root %s, endpoint %s", err, c.Lake.Root, c.Lake.S3.Endpoint)
	}
	c, err = Load("", nil, []string{"dev.s3=true", "lake.root=s3://mine/lake", "lake.s3.endpoint=https://s3.example.com"})
	if err != nil || c.Lake.S3.Endpoint != "https://s3.example.com" || c.Lake.S3.AccessKeyID != "" {
		t.Errorf("dev.s3 with an endpoint of its own: %v, s3 %+v", err, c.Lake.S3)
	}
	if _, err := Load("", nil, []string{"dev.s3=true", "lake.root=/tmp/lake"}); err == nil || !strings.Contains(err.Error(), "dev.s3:") {
		t.Errorf("dev.s3 with a directory root: %v", err)
	}
}

// TestSettingsDigestRolling: the rolling size joins the settings digest
// only when set, so a stream without features keeps its digest and a
// changed rolling size changes it (docs/adr/0038-feature-truth.md).
func TestSettingsDigestRolling(t *testing.T) {
	s := Stream{Topic: "t", KeyField: "k", ValueField: "v", Window: time.Minute}
	plain := s.SettingsDigest()
	s.Rolling = 60 * time.Second
	r60 := s.SettingsDigest()
	s.Rolling = 30 * time.Second
	r30 := s.SettingsDigest()
	if plain == r60 || r60 == r30 || plain == r30 {
		t.Fatalf("digests without rolling %s, rolling 60s %s, 30s %s: want all different", plain, r60, r30)
	}
	// The digest without rolling is the one streams published before it
	// joined: the v1 text of the other settings.
	h := sha256.Sum256(fmt.Appendf(nil, "v1\x00t\x00\x00k\x00v\x00%d\x000\x000", time.Minute))
	if want := hex.EncodeToString(h[:8]); plain != want {
		t.Fatalf("digest without rolling %s, want the earlier %s", plain, want)
	}
}

// TestValidateHop names each bad hop, accepts a dividing one, and gives a
// hopping stream its own settings digest while a tumbling one keeps the
// digest it always had.
func TestValidateHop(t *testing.T) {
	c, err := Parse([]byte(`
kafka: {brokers: ["127.0.0.1:9092"]}
gate: {allow_unknown_types: true}
streams:
  - {name: neg, topic: t, event_types: [x.y], key_field: k, window: 5m, hop: -1m}
  - {name: long, topic: t, event_types: [x.y], key_field: k, window: 5m, hop: 10m}
  - {name: odd, topic: t, event_types: [x.y], key_field: k, window: 5m, hop: 2m}
  - {name: good, topic: t, event_types: [x.y], key_field: k, window: 5m, hop: 1m}
`))
	if err != nil {
		t.Fatal(err)
	}
	c.fillDefaults()
	err = c.Validate()
	for _, want := range []string{"streams[0].hop: -1m0s must not be negative", "streams[1].hop: 10m0s is longer than the window 5m0s",
		"streams[2].hop: 2m0s does not divide the window 5m0s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	if err != nil && strings.Contains(err.Error(), "streams[3]") {
		t.Errorf("a dividing hop refused:\n%v", err)
	}
	tumbling := Stream{Topic: "t", EventTypes: []string{"x.y"}, KeyField: "k", Window: 5 * time.Minute}
	// The v1 digest of a tumbling stream, as streams published it before
	// hops existed: sha256 of the settings line, first 8 bytes.
	if d := tumbling.SettingsDigest(); d != tumblingDigest(tumbling) {
		t.Errorf("tumbling digest %s changed", d)
	}
	same := tumbling
	same.Hop = tumbling.Window // equal: tumbling
	hop := tumbling
	hop.Hop = time.Minute
	hop2 := tumbling
	hop2.Hop = 5 * time.Minute / 2
	if same.SettingsDigest() != tumbling.SettingsDigest() || hop.SettingsDigest() == tumbling.SettingsDigest() ||
		hop.SettingsDigest() == hop2.SettingsDigest() {
		t.Errorf("digests: tumbling %s, hop=window %s, hop=1m %s, hop=2m30s %s",
			tumbling.SettingsDigest(), same.SettingsDigest(), hop.SettingsDigest(), hop2.SettingsDigest())
	}
	if !hop.Hopping() || same.Hopping() || hop.Step() != time.Minute || same.Step() != 5*time.Minute {
		t.Error("Hopping/Step")
	}
}

func tumblingDigest(s Stream) string {
	h := sha256.Sum256(fmt.Appendf(nil, "v1\x00%s\x00%s\x00%s\x00%s\x00%d\x00%d\x00%d",
		s.Topic, strings.Join(s.EventTypes, ","), s.KeyField, s.ValueField, s.Window, s.OutOfOrderness, s.AllowedLateness))
	return hex.EncodeToString(h[:8])
}

// TestDevDemoStreams: the default config's demo streams (a hopping one)
// join the streams only with dev.demo, which `make dev` sets for its
// components; they are valid streams then.
func TestDevDemoStreams(t *testing.T) {
	c, err := Load("", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.StreamByName("payments_hop"); ok || len(c.Dev.DemoStreams) == 0 {
		t.Fatalf("without dev.demo: streams %d, demo streams %d", len(c.Streams), len(c.Dev.DemoStreams))
	}
	n := len(c.Streams)
	if c, err = Load("", nil, []string{"dev.demo=true"}); err != nil {
		t.Fatal(err)
	}
	s, ok := c.StreamByName("payments_hop")
	if !ok || len(c.Streams) != n+len(c.Dev.DemoStreams) || !s.Hopping() || s.IdleTimeout != time.Minute {
		t.Fatalf("with dev.demo: %+v", s)
	}
}
