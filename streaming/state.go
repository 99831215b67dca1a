package streaming

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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

// logKey is the state topic's record key of one raw partition's replay
// log ('#' cannot start a stream name, so it never collides with a
// stateKey).
func logKey(topic string, partition int32) string {
	return "#log|" + topic + "|" + strconv.FormatInt(int64(partition), 10)
}

// Headers of state records: the raw offset the record is the state before
// (the next record to process), and the checkpoint epoch it belongs to.
const (
	headerNextOffset = "reckon.next_offset"
	headerEpoch      = "reckon.epoch"
	// headerChunks: a checkpoint larger than chunkBytes is written as this
	// many records, keys stateKey, stateKey#1, stateKey#2, ... in one
	// transaction (a broker refuses records over max.message.bytes; a
	// million remembered event ids alone are ~19 MB).
	headerChunks = "reckon.chunks"
	// headerProc: the partition's processing clock (Unix ns) when the
	// record was committed; a restored partition's clock resumes there, so
	// an idle partition keeps ticking (idle watermark) after a restart.
	headerProc = "reckon.proc"
	// headerRefresh: the next offset of the refresh topic the partition
	// has considered (refresh.go): what was applied before it is in this
	// state, in the same transaction.
	headerRefresh = "reckon.refresh_next"
)

// chunkBytes is the largest state record value written (a variable so
// tests can make every checkpoint span several records).
var chunkBytes = productionChunkBytes

// productionChunkBytes is chunkBytes outside tests.
const productionChunkBytes = 4 << 20

// chunkKey is the key of chunk i of a checkpoint.
func chunkKey(key string, i int) string {
	if i == 0 {
		return key
	}
	return key + "#" + strconv.Itoa(i)
}

// baseKey strips a chunk suffix from a state record key.
func baseKey(k string) string {
	if i := strings.LastIndexByte(k, '#'); i > strings.LastIndexByte(k, '|') && i > 0 {
		return k[:i]
	}
	return k
}

// chunked splits a checkpoint value into record values of at most
// chunkBytes.
func chunked(v []byte) [][]byte {
	var out [][]byte
	for len(v) > chunkBytes {
		out = append(out, v[:chunkBytes])
		v = v[chunkBytes:]
	}
	return append(out, v)
}

// checkpointOf reassembles the checkpoint stored under key from its chunks;
// ok is false when there is none.
func checkpointOf(snaps map[string]snapshot, key string) (snap snapshot, ok bool, err error) {
	snap, ok = snaps[key]
	if !ok || snap.chunks <= 1 {
		return snap, ok, nil
	}
	buf := append([]byte(nil), snap.state...)
	for i := 1; i < snap.chunks; i++ {
		c, found := snaps[chunkKey(key, i)]
		if !found || c.epoch != snap.epoch || c.next != snap.next || c.chunks != snap.chunks {
			return snapshot{}, false, fmt.Errorf("state %s: chunk %d of %d of checkpoint %d missing or from another checkpoint",
				key, i, snap.chunks, snap.epoch)
		}
		buf = append(buf, c.state...)
	}
	snap.state = buf
	return snap, true, nil
}

// snapshot is one committed state record: an operator checkpoint or a
// partition's replay log.
type snapshot struct {
	state  []byte
	next   int64 // next raw offset to process; -1 when unknown
	epoch  int64 // checkpoint epoch; 0 for records written before epochs
	chunks int   // records the checkpoint is split into; 0 or 1 = one
	proc   int64 // processing clock at commit (Unix ns); 0 = unknown
	// refresh is the partition's next refresh-topic offset (refresh.go).
	refresh int64
}

// stateQuiet is how long loadState waits with nothing arriving before it
// ends its read short of the last stable offsets (a variable for tests).
var stateQuiet = 10 * time.Second

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
	cl, err := kafkaconn.NewClient(cfg.Kafka, "stream-state",
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Transaction markers are delivered too, so the read ends at the
		// last stable offset (a marker, as every state write is
		// transactional) without waiting for an idle poll.
		kgo.KeepControlRecords(),
	)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	for len(remaining) > 0 {
		// Every state write is transactional and markers are delivered
		// too, so each partition's read ends at its last stable offset,
		// however slowly the broker answers. Only a stretch of stateQuiet
		// with nothing arriving at all ends it short (a compacted
		// partition whose last marker was cleaned never reaches it).
		pctx, cancel := context.WithTimeout(ctx, stateQuiet)
		fetches := cl.PollFetches(pctx)
		quiet := pctx.Err() != nil
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// A poll may also end early with nothing: records of aborted
		// transactions filtered out. Only a whole quiet stretch counts.
		if fetches.NumRecords() == 0 && quiet {
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
			if r.Attrs.IsControl() {
				return
			}
			k := string(r.Key)
			if !want[baseKey(k)] {
				return
			}
			if len(r.Value) == 0 {
				delete(out, k)
				return
			}
			snap := snapshot{state: r.Value, next: -1}
			for _, h := range r.Headers {
				n, err := strconv.ParseInt(string(h.Value), 10, 64)
				switch {
				case err != nil:
				case h.Key == headerNextOffset:
					snap.next = n
				case h.Key == headerEpoch:
					snap.epoch = n
				case h.Key == headerChunks && n > 0 && n < 1<<20:
					snap.chunks = int(n)
				case h.Key == headerProc:
					snap.proc = n
				case h.Key == headerRefresh:
					snap.refresh = n
				}
			}
			out[k] = snap
		})
	}
	return out, nil
}
