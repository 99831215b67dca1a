package generate

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ProducerOpts are the producer settings the Kafka sink expects on its
// client, added after the connection options:
//
//   - acks=all with the idempotent producer (franz-go's default, stated
//     here so it cannot drift), so a retried batch is never duplicated or
//     reordered within a partition: the records of a partition land in the
//     generator's arrival order;
//   - zstd batches up to 1 MiB + 64 KiB uncompressed: an oversized poison
//     record (over the gate's 1 MiB) is a repetitive log dump that
//     compresses far below the broker's max.message.bytes (1,048,588), and
//     ordinary batches of that size compress below it too.
func ProducerOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.ZstdCompression()),
		kgo.ProducerBatchMaxBytes(1<<20 + 64<<10),
		kgo.ProducerLinger(0),
	}
}

// KafkaSink produces records with their simulated arrival as the record
// timestamp (CreateTime), so the stream worker's arrival — the record
// timestamp — is the arrival the generator planned, whether the run is
// paced or not, and a rerun produces identical records.
type KafkaSink struct {
	cl    *kgo.Client
	acked func(r Record, partition int32, offset int64)

	mu       sync.Mutex // protects following fields
	err      error      // first produce error
	produced int64      // records acknowledged
}

// NewKafkaSink returns a sink producing through cl, which the caller owns
// (build it with ProducerOpts). acked, if not nil, is called from the
// client's goroutines for every acknowledged record.
func NewKafkaSink(cl *kgo.Client, acked func(r Record, partition int32, offset int64)) *KafkaSink {
	return &KafkaSink{cl: cl, acked: acked}
}

// Write implements Sink. It returns the first failure of any earlier
// record, so a broken run stops early.
func (s *KafkaSink) Write(ctx context.Context, r Record) error {
	if err := s.failed(); err != nil {
		return err
	}
	kr := &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Timestamp: r.Arrival}
	s.cl.Produce(ctx, kr, func(kr *kgo.Record, err error) {
		s.mu.Lock()
		if err != nil {
			if s.err == nil {
				s.err = fmt.Errorf("generate: produce record %d to %s: %w", r.Seq, r.Topic, err)
			}
			s.mu.Unlock()
			return
		}
		s.produced++
		s.mu.Unlock()
		if s.acked != nil {
			s.acked(r, kr.Partition, kr.Offset)
		}
	})
	return nil
}

// Flush implements Sink.
func (s *KafkaSink) Flush(ctx context.Context) error {
	if err := s.cl.Flush(ctx); err != nil {
		return fmt.Errorf("generate: flush: %w", err)
	}
	return s.failed()
}

// Acknowledged returns how many records the brokers acknowledged so far.
func (s *KafkaSink) Acknowledged() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.produced
}

func (s *KafkaSink) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}
