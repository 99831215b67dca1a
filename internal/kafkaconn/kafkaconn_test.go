package kafkaconn

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
	"reckon/internal/testing/testpki"
)

const (
	user     = "reckon"
	password = "s3cret-Pa55-do-not-print"
)

// broker starts a kfake cluster with SASL enabled and the given superuser
// mechanism, plus extra options.
func broker(t *testing.T, mech string, opts ...kfake.Opt) []string {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{
		kfake.NumBrokers(1),
		kfake.EnableSASL(),
		kfake.Superuser(mech, user, password),
		kfake.SeedTopics(1, "t"),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// ping connects with cfg and returns the first request's error. A round
// trip that needs authentication: Ping sends Metadata after the handshake.
func ping(t *testing.T, cfg config.Kafka) error {
	t.Helper()
	cl, err := kgo.NewClient(append(Opts(cfg, "test"), kgo.RequestRetries(0))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return cl.Ping(ctx)
}

func TestSASLSCRAM(t *testing.T) {
	for _, mech := range []string{"SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"} {
		t.Run(mech, func(t *testing.T) {
			brokers := broker(t, mech)
			cfg := config.Kafka{Brokers: brokers, ClientID: "reckon", AllowPlaintextCredentials: true,
				SASL: config.KafkaSASL{Mechanism: strings.ToLower(mech), Username: user, Password: password}}
			if err := ping(t, cfg); err != nil {
				t.Fatalf("right password: %v", err)
			}
			// WaitReady and the admin client take the same path.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := WaitReady(ctx, cfg); err != nil {
				t.Fatalf("WaitReady: %v", err)
			}
			adm, closeAdm, err := NewAdmin(cfg, "test")
			if err != nil {
				t.Fatal(err)
			}
			defer closeAdm()
			if md, err := adm.ListTopics(ctx, "t"); err != nil || md["t"].Err != nil {
				t.Fatalf("admin over SASL: %v %v", err, md["t"].Err)
			}

			cfg.SASL.Password = "wrong-password"
			err = ping(t, cfg)
			if err == nil {
				t.Fatal("wrong password: connected")
			}
			t.Logf("wrong password: %v", err)
			if strings.Contains(err.Error(), "wrong-password") {
				t.Errorf("error prints the password: %v", err)
			}
			// WaitReady fails too. (A real broker answers
			// SASL_AUTHENTICATION_FAILED, which WaitReady returns at once;
			// kfake closes the connection, which looks transient.)
			wctx, wcancel := context.WithTimeout(context.Background(), time.Second)
			defer wcancel()
			if err := WaitReady(wctx, cfg); err == nil {
				t.Fatal("WaitReady with a wrong password succeeded")
			}
		})
	}
}

func TestPermanent(t *testing.T) {
	for _, err := range []error{kerr.SaslAuthenticationFailed, fmt.Errorf("ping: %w", kerr.TopicAuthorizationFailed)} {
		if !Permanent(err) {
			t.Errorf("Permanent(%v) = false", err)
		}
	}
	for _, err := range []error{io.EOF, kerr.NotCoordinator, context.DeadlineExceeded} {
		if Permanent(err) {
			t.Errorf("Permanent(%v) = true", err)
		}
	}
}

func TestSASLPasswordFile(t *testing.T) {
	brokers := broker(t, "SCRAM-SHA-512")
	file := filepath.Join(t.TempDir(), "kafka-password")
	if err := os.WriteFile(file, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Kafka{Brokers: brokers, ClientID: "reckon", AllowPlaintextCredentials: true,
		SASL: config.KafkaSASL{Mechanism: "SCRAM-SHA-512", Username: user, PasswordFile: file}}
	if err := ping(t, cfg); err != nil {
		t.Fatalf("password from file: %v", err)
	}
	// The file is read per connection: a rotated (here: wrong) password
	// applies to the next client without a restart.
	if err := os.WriteFile(file, []byte("rotated-wrong\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ping(t, cfg); err == nil {
		t.Fatal("wrong password from the rotated file: connected")
	}
	cfg.SASL.PasswordFile = filepath.Join(t.TempDir(), "missing")
	err := ping(t, cfg)
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("missing password file: %v", err)
	}
}

// TestSASLOverTLS runs SCRAM-SHA-512 inside TLS with a private CA, then
// mutual TLS: the broker requires a client certificate signed by the CA.
func TestSASLOverTLS(t *testing.T) {
	pki := testpki.New(t, "kafka")
	server := &tls.Config{Certificates: []tls.Certificate{pki.Server}, MinVersion: tls.VersionTLS12}
	brokers := broker(t, "SCRAM-SHA-512", kfake.TLS(server))
	cfg := config.Kafka{Brokers: brokers, ClientID: "reckon",
		SASL: config.KafkaSASL{Mechanism: "SCRAM-SHA-512", Username: user, Password: password},
		TLS:  config.TLSConfig{Enabled: true, CAFile: pki.CAFile}}
	if err := ping(t, cfg); err != nil {
		t.Fatalf("SASL_SSL: %v", err)
	}
	// Without the CA the server's certificate is not trusted.
	noCA := cfg
	noCA.TLS.CAFile = ""
	if err := ping(t, noCA); err == nil {
		t.Fatal("connected to a server signed by an unknown CA")
	}
	// Plaintext to a TLS listener fails.
	plainCfg := cfg
	plainCfg.TLS = config.TLSConfig{}
	if err := ping(t, plainCfg); err == nil {
		t.Fatal("plaintext client connected to a TLS listener")
	}
	// A CA file that cannot be read fails up front in Options and on the
	// first request through Opts.
	bad := cfg
	bad.TLS.CAFile = filepath.Join(t.TempDir(), "nope.pem")
	if _, err := Options(bad, "x"); err == nil {
		t.Fatal("Options accepted a missing ca_file")
	}
	if err := ping(t, bad); err == nil || !strings.Contains(err.Error(), "nope.pem") {
		t.Fatalf("Opts with a missing ca_file: %v", err)
	}
}

func TestMutualTLS(t *testing.T) {
	pki := testpki.New(t, "kafka")
	server := &tls.Config{Certificates: []tls.Certificate{pki.Server}, ClientCAs: pki.Pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(server), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cfg := config.Kafka{Brokers: c.ListenAddrs(), ClientID: "reckon",
		TLS: config.TLSConfig{Enabled: true, CAFile: pki.CAFile, CertFile: pki.ClientCert, KeyFile: pki.ClientKey}}
	if err := ping(t, cfg); err != nil {
		t.Fatalf("mutual TLS: %v", err)
	}
	cfg.TLS.CertFile, cfg.TLS.KeyFile = "", ""
	if err := ping(t, cfg); err == nil {
		t.Fatal("connected without the required client certificate")
	}
}

// TestUnreadableFiles: every file the connection needs is loaded when the
// options are built, so a command fails at startup with an error naming
// the config key and the file, before any dial.
func TestUnreadableFiles(t *testing.T) {
	pki := testpki.New(t, "kafka")
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.pem")
	notPEM := filepath.Join(dir, "not-a-cert.pem")
	if err := os.WriteFile(notPEM, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyPass := filepath.Join(dir, "empty-password")
	if err := os.WriteFile(emptyPass, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tlsOK := config.TLSConfig{Enabled: true, CAFile: pki.CAFile, CertFile: pki.ClientCert, KeyFile: pki.ClientKey}
	sasl := func(file string) config.KafkaSASL {
		return config.KafkaSASL{Mechanism: "SCRAM-SHA-512", Username: user, PasswordFile: file}
	}
	for _, tc := range []struct {
		name string
		tls  config.TLSConfig
		sasl config.KafkaSASL
		want []string // in the error
	}{
		{"missing ca_file", config.TLSConfig{Enabled: true, CAFile: missing}, config.KafkaSASL{}, []string{"kafka.tls.ca_file", missing}},
		{"ca_file without a certificate", config.TLSConfig{Enabled: true, CAFile: notPEM}, config.KafkaSASL{}, []string{"kafka.tls.ca_file", notPEM, "no PEM certificate"}},
		{"missing cert_file", config.TLSConfig{Enabled: true, CertFile: missing, KeyFile: pki.ClientKey}, config.KafkaSASL{}, []string{"kafka.tls.cert_file", missing}},
		{"missing key_file", config.TLSConfig{Enabled: true, CertFile: pki.ClientCert, KeyFile: missing}, config.KafkaSASL{}, []string{"kafka.tls.key_file", missing}},
		{"key_file not a key", config.TLSConfig{Enabled: true, CertFile: pki.ClientCert, KeyFile: notPEM}, config.KafkaSASL{}, []string{"kafka.tls.key_file", notPEM}},
		{"missing password_file", tlsOK, sasl(missing), []string{"kafka.sasl.password_file", missing}},
		{"empty password_file", tlsOK, sasl(emptyPass), []string{"kafka.sasl.password_file", emptyPass, "empty"}},
		{"unknown mechanism", tlsOK, config.KafkaSASL{Mechanism: "GSSAPI", Username: user, Password: password}, []string{"kafka.sasl.mechanism", "GSSAPI"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Kafka{Brokers: []string{"127.0.0.1:1"}, ClientID: "reckon", TLS: tc.tls, SASL: tc.sasl}
			errs := map[string]error{"Check": Check(cfg)}
			_, errs["Options"] = Options(cfg, "x")
			if cl, err := NewClient(cfg, "x"); err == nil {
				cl.Close()
			} else {
				errs["NewClient"] = err
			}
			if _, closeAdm, err := NewAdmin(cfg, "x"); err == nil {
				closeAdm()
			} else {
				errs["NewAdmin"] = err
			}
			for fn, err := range errs {
				if err == nil {
					t.Errorf("%s: no error", fn)
					continue
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: %v; want it to name %q", fn, err, w)
					}
				}
				if strings.Contains(err.Error(), password) {
					t.Errorf("%s: error prints the password: %v", fn, err)
				}
			}
		})
	}
	// The same material, readable, builds.
	cfg := config.Kafka{Brokers: []string{"127.0.0.1:1"}, ClientID: "reckon", TLS: tlsOK, SASL: config.KafkaSASL{Mechanism: "PLAIN", Username: user, Password: password}}
	if err := Check(cfg); err != nil {
		t.Fatalf("readable files: %v", err)
	}
}
