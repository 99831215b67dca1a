package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/goccy/go-yaml"
)

// Redacted is what a non-empty Secret prints as, everywhere.
const Redacted = "[redacted]"

// Secret is a credential (password, API key). It holds the value for the
// code that must send it, and prints as "[redacted]" everywhere else: YAML
// (`reckon config show`), JSON, fmt verbs (%v %+v %#v %s %q ...), and slog.
// Only Reveal returns the value. An empty Secret prints as "".
type Secret string

// Reveal returns the secret value. Call it only where the value is sent.
func (s Secret) Reveal() string { return string(s) }

func (s Secret) redacted() string {
	if s == "" {
		return ""
	}
	return Redacted
}

// String implements fmt.Stringer.
func (s Secret) String() string { return s.redacted() }

// GoString implements fmt.GoStringer.
func (s Secret) GoString() string { return fmt.Sprintf("%q", s.redacted()) }

// Format implements fmt.Formatter, so no verb or flag prints the value.
func (s Secret) Format(f fmt.State, verb rune) {
	fmt.Fprintf(f, fmt.FormatString(f, verb), s.redacted())
}

// MarshalYAML implements yaml.InterfaceMarshaler.
func (s Secret) MarshalYAML() (any, error) { return s.redacted(), nil }

// MarshalJSON implements json.Marshaler.
func (s Secret) MarshalJSON() ([]byte, error) { return fmt.Appendf(nil, "%q", s.redacted()), nil }

// MarshalText implements encoding.TextMarshaler (used by slog's text and
// JSON handlers and by map keys).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.redacted()), nil }

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.redacted()) }

// KafkaSASL authenticates reckon's Kafka clients. The zero value means no
// SASL.
type KafkaSASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (case
	// insensitive); empty disables SASL. Default "".
	Mechanism string `yaml:"mechanism"`
	// Username to authenticate as. Required with a mechanism.
	Username string `yaml:"username"`
	// Password, usually from RECKON_KAFKA_SASL_PASSWORD. Prefer
	// PasswordFile. Never printed.
	Password Secret `yaml:"password"`
	// PasswordFile holds the password (trailing newline ignored), e.g. a
	// Docker or Kubernetes secret. It is read on every new connection, so
	// a rotated file takes effect without a restart. Exclusive with Password.
	PasswordFile string `yaml:"password_file"`
}

// TLSConfig is a client TLS setup. The zero value means plaintext.
type TLSConfig struct {
	// Enabled turns TLS on. Default false.
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM bundle of the CAs that sign the server's
	// certificate; empty means the system roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the PEM client certificate and key for
	// mutual TLS; both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName overrides the name verified in the server's certificate
	// (and sent as SNI); empty means the host of the address dialled.
	ServerName string `yaml:"server_name"`
}

// ErrSecurity marks configuration refused for security reasons.
var ErrSecurity = errors.New("config: insecure configuration")

// CanonicalMechanism returns the SASL mechanism in upper case.
func (s KafkaSASL) CanonicalMechanism() string {
	return strings.ToUpper(strings.TrimSpace(s.Mechanism))
}

// ResolvePassword returns the password from Password or PasswordFile. Errors
// name the file, never its content.
func (s KafkaSASL) ResolvePassword() (Secret, error) {
	return resolveSecret("kafka.sasl.password", s.Password, s.PasswordFile)
}

// ResolveAPIKey returns the Temporal API key from APIKey or APIKeyFile.
func (t Temporal) ResolveAPIKey() (Secret, error) {
	return resolveSecret("temporal.api_key", t.APIKey, t.APIKeyFile)
}

func resolveSecret(key string, v Secret, file string) (Secret, error) {
	if file == "" {
		return v, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		// *PathError carries the path and the OS reason only.
		return "", fmt.Errorf("config: %s_file: %w", key, err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("config: %s_file %s is empty", key, file)
	}
	return Secret(s), nil
}

// ClientConfig loads the files and returns the tls.Config to dial with, or
// nil when TLS is disabled. at is the section's config key, e.g.
// "kafka.tls": errors name the key and the file ("config:
// kafka.tls.ca_file: open /etc/reckon/ca.pem: no such file or directory"),
// never a key's bytes.
func (t TLSConfig) ClientConfig(at string) (*tls.Config, error) {
	if !t.Enabled {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pool, err := loadCertPool(at+".ca_file", t.CAFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := loadKeyPair(at, t.CertFile, t.KeyFile)
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// loadCertPool reads the PEM bundle file of config key at into a pool.
func loadCertPool(at, file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		// *PathError carries the path and the OS reason.
		return nil, fmt.Errorf("config: %s: %w", at, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("config: %s %s: no PEM certificate in it", at, file)
	}
	return pool, nil
}

// loadKeyPair reads the certificate and key files of section at (its
// cert_file and key_file).
func loadKeyPair(at, certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("config: %s.cert_file: %w", at, err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("config: %s.key_file: %w", at, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// X509KeyPair's errors describe PEM structure, not key bytes.
		return tls.Certificate{}, fmt.Errorf("config: %s.cert_file %s / %s.key_file %s: %w", at, certFile, at, keyFile, err)
	}
	return cert, nil
}

// validateSecurity reports every security problem of c: incomplete SASL,
// API key or TLS settings, and credentials that would cross the network
// without TLS unless allow_plaintext_credentials says so. It never includes
// a secret's value in a message.
func validateSecurity(c *Config) []error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("config: "+format, a...))
	}
	refuse := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrSecurity}, a...)...))
	}
	checkTLS := func(at string, t TLSConfig) {
		if !t.Enabled && (t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "") {
			bad("%s: ca_file/cert_file/key_file/server_name are set but %s.enabled is false", at, at)
		}
		if (t.CertFile == "") != (t.KeyFile == "") {
			bad("%s: cert_file and key_file go together (mutual TLS)", at)
		}
	}
	checkSecret := func(at string, v Secret, file string) {
		if v != "" && file != "" {
			bad("%s and %s_file are both set; use one", at, at)
		}
		if v == Redacted {
			bad("%s is %q: that is the placeholder `reckon config show` prints, not a secret", at, Redacted)
		}
	}

	k := c.Kafka
	checkTLS("kafka.tls", k.TLS)
	checkSecret("kafka.sasl.password", k.SASL.Password, k.SASL.PasswordFile)
	switch m := k.SASL.CanonicalMechanism(); m {
	case "":
		if k.SASL.Username != "" || k.SASL.Password != "" || k.SASL.PasswordFile != "" {
			bad("kafka.sasl: username/password set but kafka.sasl.mechanism is empty (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)")
		}
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		if k.SASL.Username == "" {
			bad("kafka.sasl.username: required with mechanism %s", m)
		}
		if k.SASL.Password == "" && k.SASL.PasswordFile == "" {
			bad("kafka.sasl: mechanism %s needs password or password_file", m)
		}
		if !k.TLS.Enabled && !k.AllowPlaintextCredentials {
			refuse("kafka.sasl: %s credentials over a connection without TLS; enable kafka.tls or set "+
				"kafka.allow_plaintext_credentials: true (trusted networks only)", m)
		}
	default:
		bad("kafka.sasl.mechanism: %q is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", k.SASL.Mechanism)
	}

	t := c.Temporal
	checkTLS("temporal.tls", t.TLS)
	checkSecret("temporal.api_key", t.APIKey, t.APIKeyFile)
	if (t.APIKey != "" || t.APIKeyFile != "") && !t.TLS.Enabled && !t.AllowPlaintextCredentials {
		refuse("temporal.api_key over a connection without TLS; enable temporal.tls or set " +
			"temporal.allow_plaintext_credentials: true (trusted networks only)")
	}
	return errs
}

// yamlError drops the source excerpt goccy/go-yaml puts into its errors: the
// lines around a mistake may hold a password.
func yamlError(err error) error {
	if err == nil {
		return nil
	}
	return errors.New(yaml.FormatError(err, false, false))
}
