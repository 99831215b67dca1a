package config

import (
	"crypto/tls"
	"net"
	"regexp"
	"strings"
	"time"
)

// SQL is the analysts' SQL endpoint: `reckon serve sql`, an Arrow Flight
// SQL server running queries on embedded DuckDB over the lake, and `reckon
// sql` for one-shot queries (docs/adr/0017-sql-endpoint.md). The zero value
// of each field means its default.
type SQL struct {
	// Listen is the Flight SQL server's host:port. Default "127.0.0.1:32010".
	Listen string `yaml:"listen"`
	// QueryTimeout bounds one query, from its start to its last batch
	// sent; a query past it is interrupted and fails. Default 5m.
	QueryTimeout time.Duration `yaml:"query_timeout"`
	// MemoryLimit is DuckDB's memory limit for all queries of the process
	// together (DuckDB has no per-query limit), e.g. "2GB"; beyond it
	// operators spill to a private temporary directory, then fail with
	// an out-of-memory error. Default "2GB".
	MemoryLimit string `yaml:"memory_limit"`
	// Threads DuckDB runs a query on. Default 0: one per CPU.
	Threads int `yaml:"threads"`
	// CacheDir holds the local mirror of an s3:// lake's tables that
	// DuckDB reads (docs/adr/0017-sql-endpoint.md); it needs room for
	// those tables. Unused for a lake in a directory. Default
	// "<dev.dir>/sql-cache".
	CacheDir string `yaml:"cache_dir"`
	// SyncInterval is how often the mirror of an s3:// lake is brought up
	// to date: new files downloaded, files gone from the bucket deleted.
	// Queries see the bucket as of at most about this long ago. Default
	// 30s.
	SyncInterval time.Duration `yaml:"sync_interval"`
	// Auth authenticates clients; the zero value means none (only on a
	// loopback address or a trusted network).
	Auth SQLAuth `yaml:"auth"`
	// TLS encrypts the endpoint; with client_ca_file it is mutual TLS. The
	// zero value means plaintext.
	TLS ServerTLS `yaml:"tls"`
	// AllowPlaintextCredentials permits auth without TLS on a non-loopback
	// listen address (trusted networks only). Default false: Validate
	// refuses it.
	AllowPlaintextCredentials bool `yaml:"allow_plaintext_credentials"`
}

// SQLAuth is how SQL clients authenticate: a bearer token, basic auth
// (user and password), or both. The zero value means no authentication.
type SQLAuth struct {
	// Token is accepted as "authorization: Bearer <token>". Prefer
	// TokenFile. Never printed. Default "".
	Token Secret `yaml:"token"`
	// TokenFile holds the token (trailing newline ignored), read when the
	// server starts. Exclusive with Token.
	TokenFile string `yaml:"token_file"`
	// Username for basic auth (the JDBC driver's user). Default "".
	Username string `yaml:"username"`
	// Password for basic auth with Username. Prefer PasswordFile. Never
	// printed.
	Password Secret `yaml:"password"`
	// PasswordFile holds the password (trailing newline ignored), read when
	// the server starts. Exclusive with Password.
	PasswordFile string `yaml:"password_file"`
}

// Enabled reports whether any authentication is configured.
func (a SQLAuth) Enabled() bool {
	return a.Token != "" || a.TokenFile != "" || a.Username != ""
}

// ResolveToken returns the token from Token or TokenFile.
func (a SQLAuth) ResolveToken() (Secret, error) {
	return resolveSecret("sql.auth.token", a.Token, a.TokenFile)
}

// ResolvePassword returns the password from Password or PasswordFile.
func (a SQLAuth) ResolvePassword() (Secret, error) {
	return resolveSecret("sql.auth.password", a.Password, a.PasswordFile)
}

// ServerTLS is a server's TLS setup. The zero value means plaintext.
type ServerTLS struct {
	// Enabled turns TLS on. Default false.
	Enabled bool `yaml:"enabled"`
	// CertFile and KeyFile are the server's PEM certificate and key. The
	// certificate file may hold its chain; both are required with TLS.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCAFile is a PEM bundle of the CAs that sign client
	// certificates; set, every client must present one (mutual TLS).
	// Default "" (no client certificates).
	ClientCAFile string `yaml:"client_ca_file"`
}

// ServerConfig loads the files and returns the tls.Config to listen with,
// or nil when TLS is disabled. at is the section's config key (e.g.
// "sql.tls"); errors name the key and the file, never a key's bytes.
func (t ServerTLS) ServerConfig(at string) (*tls.Config, error) {
	if !t.Enabled {
		return nil, nil
	}
	cert, err := loadKeyPair(at, t.CertFile, t.KeyFile)
	if err != nil {
		return nil, err
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if t.ClientCAFile != "" {
		pool, err := loadCertPool(at+".client_ca_file", t.ClientCAFile)
		if err != nil {
			return nil, err
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return c, nil
}

func (s *SQL) fillDefaults() {
	if s.Listen == "" {
		s.Listen = "127.0.0.1:32010"
	}
	if s.QueryTimeout == 0 {
		s.QueryTimeout = 5 * time.Minute
	}
	if s.MemoryLimit == "" {
		s.MemoryLimit = "2GB"
	}
	if s.SyncInterval == 0 {
		s.SyncInterval = 30 * time.Second
	}
}

// memoryLimitRE is what DuckDB's memory_limit accepts that we pass on:
// a number and a unit.
var memoryLimitRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)? ?(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$`)

func (s *SQL) validate(bad func(format string, a ...any), refuse func(format string, a ...any)) {
	host, port, err := net.SplitHostPort(s.Listen)
	if err != nil || port == "" {
		bad("sql.listen: %q is not host:port", s.Listen)
	}
	if s.QueryTimeout < 0 {
		bad("sql.query_timeout: must not be negative")
	}
	if !memoryLimitRE.MatchString(s.MemoryLimit) {
		bad("sql.memory_limit: %q is not a size such as 512MB or 2GB", s.MemoryLimit)
	}
	if s.Threads < 0 {
		bad("sql.threads: must not be negative")
	}
	if s.SyncInterval < 0 {
		bad("sql.sync_interval: must not be negative")
	}
	a := s.Auth
	if a.Token != "" && a.TokenFile != "" {
		bad("sql.auth.token and sql.auth.token_file are both set; use one")
	}
	if a.Password != "" && a.PasswordFile != "" {
		bad("sql.auth.password and sql.auth.password_file are both set; use one")
	}
	for _, sec := range []struct {
		key string
		v   Secret
	}{{"sql.auth.token", a.Token}, {"sql.auth.password", a.Password}} {
		if sec.v == Redacted {
			bad("%s is %q: that is the placeholder `reckon config show` prints, not a secret", sec.key, Redacted)
		}
	}
	if (a.Username != "") != (a.Password != "" || a.PasswordFile != "") {
		bad("sql.auth: username and password (or password_file) go together")
	}
	t := s.TLS
	if !t.Enabled && (t.CertFile != "" || t.KeyFile != "" || t.ClientCAFile != "") {
		bad("sql.tls: cert_file/key_file/client_ca_file are set but sql.tls.enabled is false")
	}
	if t.Enabled && (t.CertFile == "" || t.KeyFile == "") {
		bad("sql.tls: cert_file and key_file are required with sql.tls.enabled")
	}
	if a.Enabled() && !t.Enabled && !s.AllowPlaintextCredentials && err == nil && !isLoopback(host) {
		refuse("sql.auth: credentials over a connection without TLS on %s; enable sql.tls or set sql.allow_plaintext_credentials: true (trusted networks only)", s.Listen)
	}
}

// isLoopback reports whether host names only this machine.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// validateServe checks the lookup endpoint's keys (serve_*).
func (s *StreamWorker) validateServe(bad func(format string, a ...any), refuse func(format string, a ...any)) {
	a, t := s.ServeAuth, s.ServeTLS
	if a.Token != "" && a.TokenFile != "" {
		bad("stream_worker.serve_auth.token and stream_worker.serve_auth.token_file are both set; use one")
	}
	if a.Token == Redacted {
		bad("stream_worker.serve_auth.token is %q: that is the placeholder `reckon config show` prints, "+
			"not a secret", Redacted)
	}
	if !t.Enabled && (t.CertFile != "" || t.KeyFile != "" || t.ClientCAFile != "") {
		bad("stream_worker.serve_tls: cert_file/key_file/client_ca_file are set but stream_worker.serve_tls.enabled is false")
	}
	if t.Enabled && (t.CertFile == "" || t.KeyFile == "") {
		bad("stream_worker.serve_tls: cert_file and key_file are required with stream_worker.serve_tls.enabled")
	}
	if s.ServeAddr == "" {
		return
	}
	host, port, err := net.SplitHostPort(s.ServeAddr)
	if err != nil || port == "" {
		bad("stream_worker.serve_addr: %q is not host:port", s.ServeAddr)
		return
	}
	if s.ServeAdvertise != "" {
		if _, p, err := net.SplitHostPort(s.ServeAdvertise); err != nil || p == "" {
			bad("stream_worker.serve_advertise: %q is not host:port", s.ServeAdvertise)
		}
	}
	authOn := a.Token != "" || a.TokenFile != ""
	if authOn && !t.Enabled && !s.ServeAllowPlaintextCredentials && !isLoopback(host) {
		refuse("stream_worker.serve_auth: a token over a connection without TLS on %s; enable stream_worker.serve_tls "+
			"or set stream_worker.serve_allow_plaintext_credentials: true (trusted networks only)", s.ServeAddr)
	}
}
