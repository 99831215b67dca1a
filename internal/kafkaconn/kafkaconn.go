// Package kafkaconn turns reckon's Kafka configuration into franz-go client
// options, so every command connects the same way: brokers, client id, SASL
// (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and TLS, including mutual TLS
// (docs/adr/0009-security.md). Options loads the TLS files and checks the
// SASL password when the client is built, so a bad file is a startup error
// naming its config key; the password is read again from the config or its
// file whenever a connection authenticates. Secrets are never logged.
package kafkaconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"reckon/internal/config"
)

// MaxRecordBytes is the largest record reckon produces or fetches.
const MaxRecordBytes = 16 << 20

// Options returns the client options for cfg; role is appended to the
// client id (e.g. "stream", "generate"). It builds the connection material
// at once and fails when a TLS file (kafka.tls.ca_file, cert_file,
// key_file) cannot be loaded, the SASL password file
// (kafka.sasl.password_file) cannot be read or is empty, or the mechanism
// is unknown; the error names the config key and the file. The password is
// read again on every authentication, so a rotated password file needs no
// restart.
func Options(cfg config.Kafka, role string) ([]kgo.Opt, error) {
	opts := baseOpts(cfg, role)
	tlsCfg, err := cfg.TLS.ClientConfig("kafka.tls")
	if err != nil {
		return nil, fmt.Errorf("kafkaconn: %w", err)
	}
	if tlsCfg != nil {
		// kgo clones the config per dial and sets ServerName from the
		// broker's host when it is empty.
		opts = append(opts, kgo.DialTLSConfig(tlsCfg))
	}
	if cfg.SASL.CanonicalMechanism() != "" {
		m := mechanism(cfg.SASL)
		if m == nil {
			return nil, fmt.Errorf("kafkaconn: kafka.sasl.mechanism: %q is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
				cfg.SASL.Mechanism)
		}
		if _, err := cfg.SASL.ResolvePassword(); err != nil {
			return nil, fmt.Errorf("kafkaconn: %w", err)
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// Check builds cfg's connection material as Options does and returns its
// error. Commands call it at startup, so a bad file stops the process with
// an error naming it instead of failing every connection later.
func Check(cfg config.Kafka) error {
	_, err := Options(cfg, "")
	return err
}

// NewClient returns a client with cfg's connection options (Options) and
// opts.
func NewClient(cfg config.Kafka, role string, opts ...kgo.Opt) (*kgo.Client, error) {
	base, err := Options(cfg, role)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("kafkaconn: %w", err)
	}
	return cl, nil
}

// Opts is Options for code that builds clients without an error path: the
// activities (which dial per call) and tests. It relies on the command
// having passed Check at startup; should a file become unreadable later,
// the returned options make every dial fail with the error naming it.
func Opts(cfg config.Kafka, role string) []kgo.Opt {
	opts, err := Options(cfg, role)
	if err != nil {
		return append(baseOpts(cfg, role), kgo.Dialer(func(context.Context, string, string) (net.Conn, error) {
			return nil, err
		}))
	}
	return opts
}

func baseOpts(cfg config.Kafka, role string) []kgo.Opt {
	id := cfg.ClientID
	if role != "" {
		id += "-" + role
	}
	return []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(id),
		kgo.DialTimeout(5 * time.Second),
		// Oversized poison must travel to the DLQ unchanged (topics allow
		// 16 MiB; see deploy/topics.yaml).
		kgo.ProducerBatchMaxBytes(MaxRecordBytes),
		kgo.FetchMaxPartitionBytes(MaxRecordBytes),
	}
}

// mechanism returns the SASL mechanism of s, nil when SASL is off or the
// mechanism unknown.
func mechanism(s config.KafkaSASL) sasl.Mechanism {
	pass := func() (string, error) {
		p, err := s.ResolvePassword()
		if err != nil {
			return "", fmt.Errorf("kafkaconn: %w", err)
		}
		return p.Reveal(), nil
	}
	scramAuth := func(context.Context) (scram.Auth, error) {
		p, err := pass()
		return scram.Auth{User: s.Username, Pass: p}, err
	}
	switch s.CanonicalMechanism() {
	case "PLAIN":
		return plain.Plain(func(context.Context) (plain.Auth, error) {
			p, err := pass()
			return plain.Auth{User: s.Username, Pass: p}, err
		})
	case "SCRAM-SHA-256":
		return scram.Sha256(scramAuth)
	case "SCRAM-SHA-512":
		return scram.Sha512(scramAuth)
	}
	return nil
}

// NewAdmin returns an admin client and a close func.
func NewAdmin(cfg config.Kafka, role string) (*kadm.Client, func(), error) {
	cl, err := NewClient(cfg, role)
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}

// WaitReady pings the cluster until it answers or ctx ends. Failures that
// waiting cannot fix — bad TLS files, rejected credentials — return at once.
func WaitReady(ctx context.Context, cfg config.Kafka) error {
	opts, err := Options(cfg, "ping")
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafkaconn: %w", err)
	}
	defer cl.Close()
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err = cl.Ping(pctx)
		cancel()
		if err == nil {
			return nil
		}
		if Permanent(err) {
			return fmt.Errorf("kafkaconn: brokers %v: %w", cfg.Brokers, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafkaconn: brokers %v not ready: %w", cfg.Brokers, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Permanent reports whether err is an authentication or authorization
// failure, which retrying with the same configuration cannot fix.
func Permanent(err error) bool {
	return errors.Is(err, kerr.SaslAuthenticationFailed) ||
		errors.Is(err, kerr.UnsupportedSaslMechanism) ||
		errors.Is(err, kerr.IllegalSaslState) ||
		errors.Is(err, kerr.ClusterAuthorizationFailed) ||
		errors.Is(err, kerr.TopicAuthorizationFailed) ||
		errors.Is(err, kerr.GroupAuthorizationFailed)
}
