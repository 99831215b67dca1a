package streaming

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
	"reckon/internal/kafkaconn"
)

// stateKey is the state topic's record key of one stream's operator on one
// raw partition.
func stateKey(stream, topic string, partition int32) string {
	return stream + "|" + topic + "|" + strconv.FormatInt(int64(partition), 10)
}

// Header carrying, on a state record, the raw offset the snapshot is the
// state before: the next record to process.
const headerNextOffset = "reckon.next_offset"

// snapshot is one committed operator state.
type snapshot struct {
	state []byte
	next  int64 // next raw offset to process; -1 when unknown
}

// loadState reads the committed snapshots of the given keys from the
// compacted state topic, keeping the latest per key. It reads committed
// records only, so state of aborted transactions is never restored.
func loadState(ctx context.Context, cfg *config.Config, want map[string]bool) (map[string]snapshot, error) {
	topic := cfg.Topics.StreamState
	adm, closeAdm, err := kafkaconn.NewAdmin(cfg.Kafka, "stream-state")
	if err != nil {
		return nil, err
	}
	defer closeAdm()
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("streaming: state topic %s: %w", topic, err)
	}
	if err := ends.Error(); err != nil {
		return nil, fmt.Errorf("streaming: state topic %s: %w (run `reckon topics apply`)", topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("streaming: state topic %s: %w", topic, err)
	}
	offsets := map[int32]kgo.Offset{}
	remaining := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(topic, o.Partition)
		if o.Offset > s.Offset {
			offsets[o.Partition] = kgo.NewOffset().At(s.Offset)
			remaining[o.Partition] = o.Offset
		}
	})
	out := map[string]snapshot{}
	if len(offsets) == 0 {
		return out, nil
	}
	cl, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "stream-state"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	for len(remaining) > 0 {
		// Commit markers may follow the last record: a fetch that brings
		// nothing within the wait means everything readable was read.
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fetches := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if fetches.NumRecords() == 0 {
			break
		}
		for _, fe := range fetches.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				return nil, fmt.Errorf("streaming: read state: %w", fe.Err)
			}
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset+1 >= remaining[r.Partition] {
				delete(remaining, r.Partition)
			}
			k := string(r.Key)
			if !want[k] {
				return
			}
			if len(r.Value) == 0 {
				delete(out, k)
				return
			}
			snap := snapshot{state: r.Value, next: -1}
			for _, h := range r.Headers {
				if h.Key == headerNextOffset {
					if n, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil {
						snap.next = n
					}
				}
			}
			out[k] = snap
		})
	}
	return out, nil
}
