// Package temporalconn turns reckon's Temporal configuration into a
// connected client, so every command connects the same way: address,
// namespace, TLS (server-verified or mutual) and API keys
// (docs/adr/0009-security.md). The API key is never logged.
package temporalconn

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"reckon/internal/config"
)

// ClientOptions returns client options for cfg. It loads the TLS files and
// the API key at once and fails when one cannot be read; the error names
// the config key (temporal.tls.ca_file, cert_file, key_file,
// temporal.api_key_file) and the file.
func ClientOptions(cfg config.Temporal, logger *slog.Logger) (client.Options, error) {
	o := client.Options{HostPort: cfg.Address, Namespace: cfg.Namespace}
	if logger != nil {
		o.Logger = tlog.NewStructuredLogger(logger)
	}
	tlsCfg, err := cfg.TLS.ClientConfig("temporal.tls")
	if err != nil {
		return client.Options{}, fmt.Errorf("temporalconn: %w", err)
	}
	// With cert_file/key_file the TLS config carries the client
	// certificate: mutual TLS.
	o.ConnectionOptions.TLS = tlsCfg
	key, err := cfg.ResolveAPIKey()
	if err != nil {
		return client.Options{}, fmt.Errorf("temporalconn: %w", err)
	}
	if key != "" {
		o.Credentials = client.NewAPIKeyStaticCredentials(key.Reveal())
		if tlsCfg == nil {
			// The SDK turns TLS on for API keys; config validation let
			// this through only with allow_plaintext_credentials.
			o.ConnectionOptions.TLSDisabled = true
		}
	}
	return o, nil
}

// Dial connects, retrying until the frontend answers or wait has passed:
// workers may start before the server in `reckon dev` and in compose.
// Unreadable TLS or key files (ClientOptions) and rejected credentials fail
// at once.
func Dial(ctx context.Context, cfg config.Temporal, logger *slog.Logger, wait time.Duration) (client.Client, error) {
	opts, err := ClientOptions(cfg, logger)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var last error
	for {
		c, err := client.DialContext(ctx, opts)
		if err == nil {
			return c, nil
		}
		if Permanent(err) {
			return nil, fmt.Errorf("temporalconn: %s (namespace %s): %w", cfg.Address, cfg.Namespace, err)
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("temporalconn: %s (namespace %s) not reachable after %v: %w", cfg.Address, cfg.Namespace,
				wait, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Permanent reports whether err is a refusal that retrying with the same
// credentials cannot fix.
func Permanent(err error) bool {
	switch status.Code(err) {
	case codes.Unauthenticated, codes.PermissionDenied:
		return true
	}
	return false
}
