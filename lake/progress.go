package lake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Progress is the archive progress of one topic partition, kept in the lake
// at ProgressPath so recompute (and anyone else) can tell how complete the
// raw table is without asking Temporal.
type Progress struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// NextOffset is the first offset not yet archived: every offset below
	// it is in the raw or the rejected table, or holds no record (a
	// transaction marker, an aborted transaction's record).
	NextOffset int64 `json:"next_offset"`
	// ArchivedThrough is the ingest (Kafka timestamp) time up to which
	// everything the partition received is archived: no record with an
	// earlier timestamp can still arrive in the lake.
	ArchivedThrough time.Time `json:"archived_through"`
	// UpdatedAt is when the archiver wrote this.
	UpdatedAt time.Time `json:"updated_at"`
}

// WriteProgress records p atomically. Progress only moves forward: a write
// whose NextOffset is below the recorded one is ignored and returns the
// recorded progress, so a stale retry cannot move the cursor back.
// Concurrent writers of the same partition must be serialized by the caller
// (the archive workflow is the partition's only writer).
func (l *Lake) WriteProgress(ctx context.Context, p Progress) (Progress, error) {
	if err := ValidateTopic(p.Topic); err != nil {
		return p, err
	}
	if p.Partition < 0 || p.NextOffset < 0 {
		return p, fmt.Errorf("%w: progress partition %d next offset %d", ErrBadRange, p.Partition, p.NextOffset)
	}
	cur, err := l.ReadProgress(ctx, p.Topic, p.Partition)
	switch {
	case errors.Is(err, ErrNoProgress):
	case err != nil:
		return p, err
	case p.NextOffset < cur.NextOffset || p.NextOffset == cur.NextOffset && !p.ArchivedThrough.After(cur.ArchivedThrough):
		return cur, nil
	}
	p.ArchivedThrough = p.ArchivedThrough.UTC()
	p.UpdatedAt = p.UpdatedAt.UTC()
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return p, fmt.Errorf("lake: progress: %w", err)
	}
	_, err = l.store.Put(ctx, progressKey(p.Topic, p.Partition), func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	})
	return p, err
}

// ReadProgress returns the recorded progress of topic/partition, or an error
// wrapping ErrNoProgress when nothing was archived yet.
func (l *Lake) ReadProgress(ctx context.Context, topic string, partition int32) (Progress, error) {
	if err := ValidateTopic(topic); err != nil {
		return Progress{}, err
	}
	b, err := l.store.ReadFile(ctx, progressKey(topic, partition))
	if errors.Is(err, fs.ErrNotExist) {
		return Progress{}, fmt.Errorf("%w: %s/%d", ErrNoProgress, topic, partition)
	}
	if err != nil {
		return Progress{}, err
	}
	var p Progress
	if err := json.Unmarshal(b, &p); err != nil {
		return Progress{}, fmt.Errorf("%w: progress %s/%d: %v", ErrBadFile, topic, partition, err)
	}
	return p, nil
}

// TopicProgress returns the progress of every partition of topic recorded
// in the lake, in partition order.
func (l *Lake) TopicProgress(ctx context.Context, topic string) ([]Progress, error) {
	if err := ValidateTopic(topic); err != nil {
		return nil, err
	}
	entries, err := l.store.List(ctx, progressDirKey(topic))
	if err != nil {
		return nil, err
	}
	var out []Progress
	for _, e := range entries {
		v, ok := strings.CutPrefix(e.Name, "partition=")
		if e.Dir || !ok {
			continue
		}
		v, ok = strings.CutSuffix(v, ".json")
		p, err := strconv.ParseInt(v, 10, 32)
		if !ok || err != nil {
			continue
		}
		pr, err := l.ReadProgress(ctx, topic, int32(p))
		if err != nil {
			return nil, err
		}
		out = append(out, pr)
	}
	slices.SortFunc(out, func(a, b Progress) int { return int(a.Partition) - int(b.Partition) })
	return out, nil
}
