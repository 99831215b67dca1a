package config

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"path"
	"strings"
	"time"
)

// Lake is where the Parquet lake lives (docs/adr/0011-lake-object-storage.md).
type Lake struct {
	// Root is the lake's location: a local directory, or
	// s3://bucket[/prefix] on S3-compatible object storage reached as S3
	// says. Default "./.reckon/lake".
	Root string `yaml:"root"`
	// S3 reaches the object store of an s3:// root. Its keys must stay
	// unset for a local root.
	S3 LakeS3 `yaml:"s3"`
	// Compaction tunes the continuous compaction of the raw table
	// (docs/adr/0018-continuous-compaction.md).
	Compaction LakeCompaction `yaml:"compaction"`
	// RejectedRetention is how long the rejected table keeps an ingest date.
	// The compaction workflow deletes a date's files once the day ended
	// this long ago and its newest file is as old; negative keeps them
	// forever. Default 168h (7 days).
	RejectedRetention time.Duration `yaml:"rejected_retention"`
	// Faults injects storage faults into every lake access of the
	// process: for `make chaos` and tests only, never in production
	// (docs/adr/0022-lake-fault-injection.md). Default off.
	Faults LakeFaults `yaml:"faults"`
}

// LakeCompaction tunes the compaction workflow `reckon batch` runs per raw
// topic (docs/adr/0018-continuous-compaction.md). The zero value of each
// field means its default.
type LakeCompaction struct {
	// MaxRows bounds the rows of each file a closed hour is compacted
	// into. Default 1000000.
	MaxRows int64 `yaml:"max_rows"`
	// MaxOpenFiles is how many raw files one (topic, partition, hour) still
	// open may hold; a partition reaching half of it is merged. Default 64.
	MaxOpenFiles int `yaml:"max_open_files"`
	// Margin is how far the stream's purged-through point (watermark −
	// allowed lateness; for a topic no stream reads, the archive's
	// archived-through time) must be past an hour's end before the hour is
	// compacted as closed. Default 5m.
	Margin time.Duration `yaml:"margin"`
	// Poll is how often the workflow looks for work. Default 30s.
	Poll time.Duration `yaml:"poll"`
	// Lookback is how far back from now the workflow looks at hours; older
	// hours are left to `reckon lake compact`. Default 168h.
	Lookback time.Duration `yaml:"lookback"`
	// LateDelay is how long files archived into an already compacted
	// closed hour (late events) may wait before the hour is compacted
	// again, unless they reach half of max_open_files. Default 10m.
	LateDelay time.Duration `yaml:"late_delay"`
	// Lease is how long one compaction of an hour may hold its lock.
	// It works under a deadline of three quarters of it, and a lock older
	// than the lease is a killed compaction's, taken over. Default 10m.
	Lease time.Duration `yaml:"lease"`
}

func (c *LakeCompaction) fillDefaults() {
	if c.MaxRows == 0 {
		c.MaxRows = 1_000_000
	}
	if c.MaxOpenFiles == 0 {
		c.MaxOpenFiles = 64
	}
	for _, d := range []struct {
		d *time.Duration
		v time.Duration
	}{{&c.Margin, 5 * time.Minute}, {&c.Poll, 30 * time.Second}, {&c.Lookback, 7 * 24 * time.Hour}, {&c.LateDelay,
		10 * time.Minute},
		{&c.Lease, 10 * time.Minute}} {
		if *d.d == 0 {
			*d.d = d.v
		}
	}
}

func (c LakeCompaction) validate(bad func(format string, a ...any)) {
	if c.MaxRows < 0 {
		bad("lake.compaction.max_rows: must not be negative")
	}
	if c.MaxOpenFiles < 0 || c.MaxOpenFiles > 0 && c.MaxOpenFiles < 4 {
		bad("lake.compaction.max_open_files: %d; at least 4 (a partition is merged at half of it)", c.MaxOpenFiles)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"margin", c.Margin}, {"poll", c.Poll}, {"lookback", c.Lookback}, {"late_delay", c.LateDelay}, {"lease", c.Lease}} {
		if d.v < 0 {
			bad("lake.compaction.%s: must not be negative", d.name)
		}
	}
}

// LakeFaults makes the lake's storage fail on purpose: a fraction of its
// calls fail, stall, time out, read short, find the disk full or lose
// their answer (errorfs.UniformFaults). Chaos testing only.
type LakeFaults struct {
	// Rate is the fraction of storage calls that draw a transient fault,
	// 0..1. Default 0: no fault injection.
	Rate float64 `yaml:"rate"`
	// Seed makes the faults repeatable. Default 0.
	Seed int64 `yaml:"seed"`
}

// LakeS3 is the connection to the object store of an s3:// lake root. The
// zero value means AWS S3 with credentials from the environment or the
// instance role; Region is then required.
type LakeS3 struct {
	// Endpoint is the S3 API's URL: https://host[:port], or http://host[:port]
	// on a trusted network (a local MinIO). Empty means AWS,
	// https://s3.<region>.amazonaws.com. Default "".
	Endpoint string `yaml:"endpoint"`
	// Region of the bucket. Required without endpoint; with one, empty
	// asks the store. Default "".
	Region string `yaml:"region"`
	// AccessKeyID signs requests with SecretAccessKey. Empty: the
	// AWS_*/MINIO_* environment variables, then the instance or pod role.
	AccessKeyID string `yaml:"access_key_id"`
	// SecretAccessKey, usually from RECKON_LAKE_S3_SECRET_ACCESS_KEY.
	// Prefer SecretAccessKeyFile. Never printed.
	SecretAccessKey Secret `yaml:"secret_access_key"`
	// SecretAccessKeyFile holds the secret key (trailing newline ignored),
	// read when the lake is opened. Exclusive with SecretAccessKey.
	SecretAccessKeyFile string `yaml:"secret_access_key_file"`
	// SessionToken accompanies temporary credentials. Never printed.
	SessionToken Secret `yaml:"session_token"`
	// CAFile is a PEM bundle of the CAs that sign an https endpoint's
	// certificate; empty means the system roots.
	CAFile string `yaml:"ca_file"`
	// AllowPlaintextCredentials permits credentials with an http://
	// endpoint (trusted networks only). Default false: Validate refuses it.
	AllowPlaintextCredentials bool `yaml:"allow_plaintext_credentials"`
}

// IsS3 reports whether the lake is on object storage (an s3:// root).
func (l Lake) IsS3() bool { return strings.HasPrefix(l.Root, "s3://") }

// ResolveSecretAccessKey returns the secret key from SecretAccessKey or
// SecretAccessKeyFile. Errors name the file, never its content.
func (s LakeS3) ResolveSecretAccessKey() (Secret, error) {
	return resolveSecret("lake.s3.secret_access_key", s.SecretAccessKey, s.SecretAccessKeyFile)
}

// ClientTLS returns the TLS settings for an https endpoint: the CAs of
// CAFile, or nil for the system roots.
func (s LakeS3) ClientTLS() (*tls.Config, error) {
	if s.CAFile == "" {
		return nil, nil
	}
	return TLSConfig{Enabled: true, CAFile: s.CAFile}.ClientConfig("lake.s3")
}

// validateLake reports every problem of the lake section. Messages name
// keys, never secret values.
func validateLake(l Lake) []error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("config: "+format, a...))
	}
	if !(l.Faults.Rate >= 0 && l.Faults.Rate <= 1) {
		bad("lake.faults.rate: %v outside 0..1", l.Faults.Rate)
	}
	s := l.S3
	switch {
	case l.Root == "":
		bad("lake.root: required")
		return errs
	case !l.IsS3():
		if s != (LakeS3{}) {
			bad("lake.s3: set, but lake.root %q is not an s3://bucket[/prefix] URL", l.Root)
		}
		return errs
	}
	bucket, prefix, _ := strings.Cut(strings.TrimPrefix(l.Root, "s3://"), "/")
	if msg := badBucket(bucket); msg != "" {
		bad("lake.root: %q: %s", l.Root, msg)
	}
	if prefix = strings.Trim(prefix,
		"/"); prefix != "" && (path.Clean(prefix) != prefix || strings.ContainsAny(prefix, "?#\\") ||
		prefix == ".." || strings.HasPrefix(prefix, "../") || strings.Contains(prefix, "/../") || strings.HasSuffix(prefix,
		"/..")) {
		bad("lake.root: %q: the prefix must be a clean path without . or .. elements, ? # or \\", l.Root)
	}
	var u *url.URL
	if s.Endpoint == "" {
		if s.Region == "" {
			bad("lake.s3: endpoint or region is required for an s3:// lake.root")
		}
	} else if p, err := url.Parse(s.Endpoint); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" ||
		(p.Path != "" && p.Path != "/") || p.RawQuery != "" || p.User != nil {
		bad("lake.s3.endpoint: %q is not an http(s)://host[:port] URL", s.Endpoint)
	} else {
		u = p
	}
	plaintext := u != nil && u.Scheme == "http"
	if plaintext && s.CAFile != "" {
		bad("lake.s3.ca_file: set, but lake.s3.endpoint is http://")
	}
	hasSecret := s.SecretAccessKey != "" || s.SecretAccessKeyFile != ""
	if s.SecretAccessKey != "" && s.SecretAccessKeyFile != "" {
		bad("lake.s3.secret_access_key and lake.s3.secret_access_key_file are both set; use one")
	}
	for _, sec := range []struct {
		key string
		v   Secret
	}{{"lake.s3.secret_access_key", s.SecretAccessKey}, {"lake.s3.session_token", s.SessionToken}} {
		if sec.v == Redacted {
			bad("%s is %q: that is the placeholder `reckon config show` prints, not a secret", sec.key, Redacted)
		}
	}
	if (s.AccessKeyID != "") != hasSecret {
		bad("lake.s3: access_key_id and secret_access_key (or secret_access_key_file) go together")
	}
	if s.SessionToken != "" && s.AccessKeyID == "" {
		bad("lake.s3.session_token: needs access_key_id and secret_access_key")
	}
	if plaintext && s.AccessKeyID != "" && !s.AllowPlaintextCredentials {
		errs = append(errs,
			fmt.Errorf("%w: lake.s3: credentials sent to an http:// endpoint; use https or set "+
				"lake.s3.allow_plaintext_credentials: true (trusted networks only)", ErrSecurity))
	}
	return errs
}

// badBucket says what is wrong with an S3 bucket name, or "".
func badBucket(b string) string {
	if len(b) < 3 || len(b) > 63 {
		return fmt.Sprintf("bucket %q must be 3 to 63 characters", b)
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	for i := 0; i < len(b); i++ {
		if c := b[i]; !alnum(c) && c != '.' && c != '-' {
			return fmt.Sprintf("bucket %q: character %q outside [a-z0-9.-]", b, c)
		}
	}
	if !alnum(b[0]) || !alnum(b[len(b)-1]) {
		return fmt.Sprintf("bucket %q must start and end with a letter or digit", b)
	}
	return ""
}
