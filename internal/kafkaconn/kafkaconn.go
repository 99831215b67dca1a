// Package kafkaconn turns reckon's Kafka configuration into franz-go client
// options, so every command connects the same way (brokers, client id, and —
// as they land — SASL and TLS).
package kafkaconn

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
)

// MaxRecordBytes is the largest record reckon produces or fetches.
const MaxRecordBytes = 16 << 20

// Opts returns the base client options for cfg; role is appended to the
// client id (e.g. "stream", "generate").
func Opts(cfg config.Kafka, role string) []kgo.Opt {
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

// NewAdmin returns an admin client and a close func.
func NewAdmin(cfg config.Kafka, role string) (*kadm.Client, func(), error) {
	cl, err := kgo.NewClient(Opts(cfg, role)...)
	if err != nil {
		return nil, nil, fmt.Errorf("kafkaconn: %w", err)
	}
	return kadm.NewClient(cl), cl.Close, nil
}

// WaitReady pings the cluster until it answers or ctx ends.
func WaitReady(ctx context.Context, cfg config.Kafka) error {
	cl, err := kgo.NewClient(Opts(cfg, "ping")...)
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
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafkaconn: brokers %v not ready: %w", cfg.Brokers, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
