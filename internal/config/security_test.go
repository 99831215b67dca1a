package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

const (
	kafkaPass = "kafka-Pa55word-must-not-print"
	tempKey   = "temporal-api-key-must-not-print"
)

// secure is a valid config carrying both secrets, loaded the way every
// command loads it (file, then RECKON_* environment).
func secure(t *testing.T, extraEnv ...string) *Config {
	t.Helper()
	env := append([]string{
		"RECKON_KAFKA_SASL_MECHANISM=SCRAM-SHA-512",
		"RECKON_KAFKA_SASL_USERNAME=reckon",
		"RECKON_KAFKA_SASL_PASSWORD=" + kafkaPass,
		"RECKON_KAFKA_TLS_ENABLED=true",
		"RECKON_TEMPORAL_API_KEY=" + tempKey,
		"RECKON_TEMPORAL_TLS_ENABLED=true",
	}, extraEnv...)
	c, err := Load("", env, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func assertNoSecret(t *testing.T, where, s string) {
	t.Helper()
	for _, secret := range []string{kafkaPass, tempKey} {
		if strings.Contains(s, secret) {
			t.Errorf("%s prints a secret:\n%s", where, s)
		}
	}
}

func TestSecretsNeverPrinted(t *testing.T) {
	c := secure(t)
	if c.Kafka.SASL.Password.Reveal() != kafkaPass || c.Temporal.APIKey.Reveal() != tempKey {
		t.Fatal("secrets from the environment did not reach the config")
	}

	// `reckon config show` renders the config with yaml.Marshal.
	show, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, "config show", string(show))
	if n := strings.Count(string(show), Redacted); n != 2 {
		t.Errorf("config show has %d %q, want 2 (password, api_key):\n%s", n, Redacted, show)
	}
	// What config show prints loads back, minus the secrets, and is refused
	// rather than used as a password.
	if _, err := Parse(show); err != nil {
		t.Fatalf("config show output does not parse: %v", err)
	}
	back, _ := Parse(show)
	back.fillDefaults()
	if err := back.Validate(); err == nil || !strings.Contains(err.Error(), "placeholder") {
		t.Errorf("a redacted placeholder was accepted as a secret: %v", err)
	}

	// fmt, every verb and flag, directly and inside the structs.
	for _, f := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10s", "%-q"} {
		assertNoSecret(t, f, fmt.Sprintf(f, c.Kafka.SASL.Password))
		assertNoSecret(t, f+" Config", fmt.Sprintf(f, *c))
		assertNoSecret(t, f+" *Config", fmt.Sprintf(f, c))
		assertNoSecret(t, f+" Kafka", fmt.Sprintf(f, c.Kafka))
		assertNoSecret(t, f+" Temporal", fmt.Sprintf(f, c.Temporal))
	}
	assertNoSecret(t, "Sprint", fmt.Sprint(c.Kafka, c.Temporal.APIKey))
	assertNoSecret(t, "Sprintln", fmt.Sprintln(c.Kafka.SASL, c.Temporal))

	// JSON and structured logs.
	j, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, "json", string(j))
	var buf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&buf, nil), slog.NewJSONHandler(&buf, nil)} {
		l := slog.New(h)
		l.Info("connect", "password", c.Kafka.SASL.Password, "sasl", c.Kafka.SASL, "kafka", c.Kafka, "temporal", c.Temporal, "key", c.Temporal.APIKey)
		l.Info("any", "cfg", any(c))
	}
	assertNoSecret(t, "slog", buf.String())
	if !strings.Contains(buf.String(), Redacted) {
		t.Errorf("slog output shows no %q:\n%s", Redacted, buf.String())
	}

	// An empty secret prints as empty, so `config show` tells set from unset.
	var none Secret
	if fmt.Sprint(none) != "" || none.String() != "" {
		t.Errorf("empty secret prints %q", fmt.Sprint(none))
	}
}

func TestSecretsNotInErrors(t *testing.T) {
	// Validation: many problems at once, secrets set; no message holds them.
	_, err := Load("", []string{
		"RECKON_KAFKA_SASL_MECHANISM=SCRAM-SHA-512",
		"RECKON_KAFKA_SASL_PASSWORD=" + kafkaPass, // no username, no TLS
		"RECKON_KAFKA_SASL_PASSWORD_FILE=/run/secrets/kafka",
		"RECKON_TEMPORAL_API_KEY=" + tempKey, // no TLS
		"RECKON_TEMPORAL_TLS_CERT_FILE=/x.pem",
		"RECKON_STREAM_WORKER_MAX_ATTEMPTS=-1",
	}, nil)
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	assertNoSecret(t, "validation error", err.Error())
	for _, want := range []string{"kafka.sasl.username", "both set", "kafka.sasl: SCRAM-SHA-512 credentials over a connection without TLS",
		"temporal.api_key over a connection without TLS", "temporal.tls", "stream_worker.max_attempts"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}

	// YAML errors: goccy/go-yaml quotes the source around a mistake; the
	// password on the next line must not come along.
	for _, doc := range []string{
		"kafka:\n  sasl:\n    mechanism: PLAIN\n    usernme: reckon\n    password: " + kafkaPass + "\n",
		"kafka:\n  sasl:\n    password: " + kafkaPass + "\n    username: [a, b]\n",
		"temporal:\n  api_key: " + tempKey + "\n  api_key: twice\n",
		"temporal:\n  api_key: " + tempKey + "\n  tls: {enabled: maybe}\n",
	} {
		_, err := Parse([]byte(doc))
		if err == nil {
			t.Fatalf("bad YAML accepted:\n%s", doc)
		}
		assertNoSecret(t, "parse error", err.Error())
	}

	// A missing secret file is named; the error has no content to leak.
	s := KafkaSASL{Mechanism: "PLAIN", Username: "u", PasswordFile: filepath.Join(t.TempDir(), "nope")}
	if _, err := s.ResolvePassword(); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("missing password file: %v", err)
	}
}

func TestPlaintextCredentialsRefused(t *testing.T) {
	base := []string{"RECKON_KAFKA_SASL_MECHANISM=PLAIN", "RECKON_KAFKA_SASL_USERNAME=u", "RECKON_KAFKA_SASL_PASSWORD=p"}
	_, err := Load("", base, nil)
	if !errors.Is(err, ErrSecurity) {
		t.Fatalf("SASL without TLS: err = %v, want ErrSecurity", err)
	}
	if _, err := Load("", append(base, "RECKON_KAFKA_TLS_ENABLED=true"), nil); err != nil {
		t.Fatalf("SASL over TLS refused: %v", err)
	}
	if _, err := Load("", append(base, "RECKON_KAFKA_ALLOW_PLAINTEXT_CREDENTIALS=true"), nil); err != nil {
		t.Fatalf("SASL without TLS, explicitly allowed, refused: %v", err)
	}

	_, err = Load("", []string{"RECKON_TEMPORAL_API_KEY=k"}, nil)
	if !errors.Is(err, ErrSecurity) {
		t.Fatalf("API key without TLS: err = %v, want ErrSecurity", err)
	}
	for _, ok := range [][]string{
		{"RECKON_TEMPORAL_API_KEY=k", "RECKON_TEMPORAL_TLS_ENABLED=true"},
		{"RECKON_TEMPORAL_API_KEY_FILE=/run/secrets/k", "RECKON_TEMPORAL_TLS_ENABLED=true"},
		{"RECKON_TEMPORAL_API_KEY=k", "RECKON_TEMPORAL_ALLOW_PLAINTEXT_CREDENTIALS=true"},
		{"RECKON_TEMPORAL_TLS_ENABLED=true", "RECKON_TEMPORAL_TLS_CERT_FILE=c.pem", "RECKON_TEMPORAL_TLS_KEY_FILE=k.pem"},
	} {
		if _, err := Load("", ok, nil); err != nil {
			t.Errorf("%v refused: %v", ok, err)
		}
	}
}

func TestSecurityValidation(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"RECKON_KAFKA_SASL_MECHANISM=GSSAPI", "RECKON_KAFKA_TLS_ENABLED=true"}, `"GSSAPI" is not PLAIN`},
		{[]string{"RECKON_KAFKA_SASL_USERNAME=u"}, "mechanism is empty"},
		{[]string{"RECKON_KAFKA_SASL_MECHANISM=SCRAM-SHA-256", "RECKON_KAFKA_SASL_USERNAME=u", "RECKON_KAFKA_TLS_ENABLED=true"}, "needs password or password_file"},
		{[]string{"RECKON_KAFKA_TLS_CA_FILE=ca.pem"}, "kafka.tls.enabled is false"},
		{[]string{"RECKON_KAFKA_TLS_ENABLED=true", "RECKON_KAFKA_TLS_KEY_FILE=k.pem"}, "cert_file and key_file go together"},
		{[]string{"RECKON_TEMPORAL_API_KEY=k", "RECKON_TEMPORAL_API_KEY_FILE=f", "RECKON_TEMPORAL_TLS_ENABLED=true"}, "both set"},
	} {
		_, err := Load("", tc.env, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.env, err, tc.want)
		}
	}
}

func TestSecretFiles(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte(kafkaPass+"\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := KafkaSASL{PasswordFile: pw}.ResolvePassword()
	if err != nil || got.Reveal() != kafkaPass {
		t.Fatalf("password file: %q %v", got.Reveal(), err)
	}
	empty := filepath.Join(dir, "empty")
	_ = os.WriteFile(empty, []byte("\n"), 0o600)
	if _, err := (Temporal{APIKeyFile: empty}).ResolveAPIKey(); err == nil {
		t.Fatal("empty API key file accepted")
	}
	if got, err := (Temporal{APIKey: "k"}).ResolveAPIKey(); err != nil || got.Reveal() != "k" {
		t.Fatalf("inline API key: %q %v", got.Reveal(), err)
	}
}

func TestSecurityKeysOverridable(t *testing.T) {
	keys := Keys()
	for _, k := range []string{"kafka.sasl.mechanism", "kafka.sasl.username", "kafka.sasl.password", "kafka.sasl.password_file",
		"kafka.tls.enabled", "kafka.tls.ca_file", "kafka.tls.cert_file", "kafka.tls.key_file", "kafka.tls.server_name",
		"kafka.allow_plaintext_credentials", "temporal.tls.enabled", "temporal.tls.ca_file", "temporal.api_key",
		"temporal.api_key_file", "temporal.allow_plaintext_credentials"} {
		if !slices.Contains(keys, k) {
			t.Errorf("key %s (%s) is not overridable", k, EnvName(k))
		}
	}
}
