package lake

import (
	"context"
	"fmt"
	"time"

	"reckon/lake/storage"
)

// DefaultRejectedRetention is how long the rejected table keeps an ingest
// date by default (lake.rejected_retention): a week to look at what the
// quality gate refused, while the original records are still in Kafka.
const DefaultRejectedRetention = 7 * 24 * time.Hour

// ExpireRejected deletes the rejected partitions of topic that are past
// retention at now, and returns the keys of the files it deleted. A
// partition (ingest_date=D) is past retention when its day ended more than
// retention before now and its newest file is older than retention too, so
// an archive that catches up on old records (a file written today into an
// old date) keeps that date another full retention. A file written while
// ExpireRejected runs is not deleted. retention ≤ 0 deletes nothing.
//
// The rows it deletes leave the accounting of Offsets: past the retention
// an archived offset is in raw, raw_dropped or nowhere.
func (l *Lake) ExpireRejected(ctx context.Context, topic string, now time.Time,
	retention time.Duration) ([]string, error) {
	if err := ValidateTopic(topic); err != nil {
		return nil, err
	}
	if retention <= 0 {
		return nil, nil
	}
	base := RejectedDir + "/topic=" + topic
	dates, err := l.store.List(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("lake: expire rejected of %s: %w", topic, err)
	}
	var gone []string
	for _, d := range dates {
		day, ok := parseDateDir("ingest_date", d.Name)
		if !d.Dir || !ok || now.Sub(day.Add(24*time.Hour)) <= retention {
			continue
		}
		dir := storage.JoinKey(base, d.Name)
		es, err := l.store.List(ctx, dir)
		if err != nil {
			return gone, fmt.Errorf("lake: expire rejected of %s: %w", topic, err)
		}
		var names []string
		fresh := false
		for _, e := range es {
			if e.Dir {
				continue
			}
			if now.Sub(e.ModTime) <= retention {
				fresh = true
				break
			}
			names = append(names, e.Name) // hidden temporaries too: a crashed write's debris
		}
		if fresh || len(names) == 0 {
			continue
		}
		if err := l.store.Remove(ctx, dir, names); err != nil {
			return gone, fmt.Errorf("lake: expire rejected of %s: %w", topic, err)
		}
		for _, n := range names {
			gone = append(gone, storage.JoinKey(dir, n))
		}
	}
	return gone, nil
}
