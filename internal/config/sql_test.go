package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
)

// TestSQLDefaultsAndValidation: the sql section's defaults, each problem
// reported, credentials without TLS beyond loopback refused as insecure,
// and the secrets never printed.
func TestSQLDefaultsAndValidation(t *testing.T) {
	c, err := Load("", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.SQL.Listen != "127.0.0.1:32010" || c.SQL.QueryTimeout != 5*time.Minute || c.SQL.MemoryLimit != "2GB" || c.SQL.Auth.Enabled() || c.SQL.TLS.Enabled {
		t.Errorf("defaults: %+v", c.SQL)
	}
	for _, tc := range []struct {
		env      []string
		want     string
		security bool
	}{
		{[]string{"RECKON_SQL_LISTEN=32010"}, "sql.listen", false},
		{[]string{"RECKON_SQL_MEMORY_LIMIT=lots"}, "sql.memory_limit", false},
		{[]string{"RECKON_SQL_MEMORY_LIMIT=1GB'; SET x=1; --"}, "sql.memory_limit", false},
		{[]string{"RECKON_SQL_QUERY_TIMEOUT=-1s"}, "sql.query_timeout", false},
		{[]string{"RECKON_SQL_AUTH_USERNAME=analyst"}, "username and password", false},
		{[]string{"RECKON_SQL_AUTH_TOKEN=a", "RECKON_SQL_AUTH_TOKEN_FILE=/x"}, "sql.auth.token and sql.auth.token_file", false},
		{[]string{"RECKON_SQL_TLS_ENABLED=true"}, "cert_file and key_file are required", false},
		{[]string{"RECKON_SQL_TLS_CLIENT_CA_FILE=/ca.pem"}, "sql.tls.enabled is false", false},
		{[]string{"RECKON_SQL_LISTEN=0.0.0.0:32010", "RECKON_SQL_AUTH_TOKEN=tok-must-not-print"}, "without TLS", true},
	} {
		_, err := Load("", tc.env, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, ErrSecurity) != tc.security {
			t.Errorf("%v: %v, want an error mentioning %q (security %v)", tc.env, err, tc.want, tc.security)
		}
		if err != nil && strings.Contains(err.Error(), "tok-must-not-print") {
			t.Errorf("%v: the error prints the token", tc.env)
		}
	}
	for _, env := range [][]string{
		{"RECKON_SQL_AUTH_TOKEN=tok-must-not-print"}, // loopback
		{"RECKON_SQL_LISTEN=0.0.0.0:32010", "RECKON_SQL_AUTH_TOKEN=tok-must-not-print", "RECKON_SQL_ALLOW_PLAINTEXT_CREDENTIALS=true"},
		{"RECKON_SQL_LISTEN=0.0.0.0:32010"}, // no credentials to leak
	} {
		c, err := Load("", env, nil)
		if err != nil {
			t.Errorf("%v: %v", env, err)
			continue
		}
		show, _ := yaml.Marshal(c)
		if strings.Contains(string(show), "tok-must-not-print") {
			t.Errorf("config show prints the sql token")
		}
	}

	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	os.WriteFile(tok, []byte("from-file\n"), 0o600)
	c, err = Load("", []string{"RECKON_SQL_AUTH_TOKEN_FILE=" + tok}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := c.SQL.Auth.ResolveToken(); err != nil || s.Reveal() != "from-file" {
		t.Errorf("token file: %q, %v", s.Reveal(), err)
	}
	if _, err := (ServerTLS{Enabled: true, CertFile: filepath.Join(dir, "none.pem"), KeyFile: tok}).ServerConfig("sql.tls"); err == nil || !strings.Contains(err.Error(), "sql.tls.cert_file") {
		t.Errorf("missing server certificate: %v", err)
	}
}

// TestServeValidation: the lookup endpoint's keys (R-LOOK-4) are checked
// in the SQL endpoint's style; off by default.
func TestServeValidation(t *testing.T) {
	c, err := Load("", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Stream.ServeAddr != "" || c.Dev.LookupPort != 8290 {
		t.Errorf("defaults: serve_addr %q, dev.lookup_port %d", c.Stream.ServeAddr, c.Dev.LookupPort)
	}
	if _, err := Load("", []string{"RECKON_STREAM_WORKER_SERVE_ADDR=127.0.0.1:8290",
		"RECKON_STREAM_WORKER_SERVE_AUTH_TOKEN=tok"}, nil); err != nil {
		t.Errorf("a token on loopback: %v", err)
	}
	for _, tc := range []struct {
		env      []string
		want     string
		security bool
	}{
		{[]string{"RECKON_STREAM_WORKER_SERVE_ADDR=8290"}, "stream_worker.serve_addr", false},
		{[]string{"RECKON_STREAM_WORKER_SERVE_ADDR=:8290", "RECKON_STREAM_WORKER_SERVE_ADVERTISE=host"}, "serve_advertise", false},
		{[]string{"RECKON_STREAM_WORKER_SERVE_AUTH_TOKEN=a", "RECKON_STREAM_WORKER_SERVE_AUTH_TOKEN_FILE=/x"}, "token_file are both", false},
		{[]string{"RECKON_STREAM_WORKER_SERVE_TLS_ENABLED=true"}, "cert_file and key_file are required", false},
		{[]string{"RECKON_STREAM_WORKER_SERVE_TLS_CERT_FILE=/c.pem"}, "serve_tls.enabled is false", false},
		{[]string{"RECKON_STREAM_WORKER_SERVE_ADDR=0.0.0.0:8290", "RECKON_STREAM_WORKER_SERVE_AUTH_TOKEN=tok-must-not-print"},
			"without TLS", true},
	} {
		_, err := Load("", tc.env, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, ErrSecurity) != tc.security {
			t.Errorf("%v: %v, want an error mentioning %q (security %v)", tc.env, err, tc.want, tc.security)
		}
		if err != nil && strings.Contains(err.Error(), "tok-must-not-print") {
			t.Errorf("%v: the error prints the token", tc.env)
		}
	}
}
