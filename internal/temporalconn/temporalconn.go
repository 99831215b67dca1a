// Package temporalconn turns reckon's Temporal configuration into a
// connected client, so every command connects the same way (address,
// namespace, and — as they land — TLS and API keys).
package temporalconn

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"reckon/internal/config"
)

// Options returns client options for cfg.
func Options(cfg config.Temporal, logger *slog.Logger) client.Options {
	o := client.Options{HostPort: cfg.Address, Namespace: cfg.Namespace}
	if logger != nil {
		o.Logger = tlog.NewStructuredLogger(logger)
	}
	return o
}

// Dial connects, retrying until the frontend answers or wait has passed:
// workers may start before the server in `reckon dev` and in compose.
func Dial(ctx context.Context, cfg config.Temporal, logger *slog.Logger, wait time.Duration) (client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var last error
	for {
		c, err := client.DialContext(ctx, Options(cfg, logger))
		if err == nil {
			return c, nil
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("temporalconn: %s (namespace %s) not reachable after %v: %w", cfg.Address, cfg.Namespace, wait, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
