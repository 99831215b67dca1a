package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/kafkaconn"
)

// runTopicsTail prints the last records of a topic, one JSON object per line
// (key, partition, offset, timestamp, headers, value), so an operator can
// see what reached the DLQ and why without another tool.
func runTopicsTail(ctx context.Context, cx *cmdContext, topic string, n int, follow bool) error {
	if topic == "" {
		return fmt.Errorf("%w: topics tail TOPIC [-n N] [--follow]", errUsage)
	}
	adm, closeAdm, err := kafkaconn.NewAdmin(cx.cfg.Kafka, "tail")
	if err != nil {
		return err
	}
	defer closeAdm()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return err
	}
	if err := ends.Error(); err != nil {
		return fmt.Errorf("topic %s: %w", topic, err)
	}
	starts := map[string]map[int32]kgo.Offset{topic: {}}
	for p, o := range ends[topic] {
		starts[topic][p] = kgo.NewOffset().At(max(o.Offset-int64(n), 0))
	}
	cl, err := kafkaconn.NewClient(cx.cfg.Kafka, "tail",
		kgo.ConsumePartitions(starts), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return err
	}
	defer cl.Close()
	enc := json.NewEncoder(cx.stdout)
	// Transactional topics carry commit markers that take offsets but are
	// never delivered, so the end is reached when a poll comes back empty.
	for {
		fctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		fetches := cl.PollFetches(fctx)
		cancel()
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return nil
		}
		for _, fe := range fetches.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				return fe.Err
			}
		}
		if fetches.NumRecords() == 0 && !follow {
			return nil
		}
		fetches.EachRecord(func(r *kgo.Record) {
			h := map[string]string{}
			for _, x := range r.Headers {
				h[x.Key] = string(x.Value)
			}
			_ = enc.Encode(map[string]any{
				"partition": r.Partition, "offset": r.Offset,
				"timestamp": r.Timestamp.UTC().Format(time.RFC3339Nano),
				"key":       printable(r.Key), "headers": h, "value": printable(r.Value),
			})
		})
	}
}

// printable shows bytes as a string when they are valid UTF-8 and short,
// else quoted and truncated, so binary poison does not garble a terminal.
func printable(b []byte) string {
	const limit = 2000
	if len(b) > limit {
		return strconv.Quote(string(b[:limit])) + fmt.Sprintf("... (%d bytes)", len(b))
	}
	if utf8.Valid(b) {
		return string(b)
	}
	return strconv.Quote(string(b))
}
