package lake

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"
)

// Backlog is what awaits compaction in one topic's raw table.
type Backlog struct {
	// Hours counts the ended UTC hours where some partition has two or
	// more files; Files counts those partitions' files in them.
	Hours int `json:"hours"`
	Files int `json:"files"`
}

// CompactionBacklog returns what Compact would merge in topic's raw table
// among the hours that ended at or before now: per hour, every partition
// with two or more files. The hour still being written is left out (its
// files are expected). It reads file names only, not files.
func (l *Lake) CompactionBacklog(ctx context.Context, topic string, now time.Time) (Backlog, error) {
	var b Backlog
	if err := ValidateTopic(topic); err != nil {
		return b, err
	}
	dir := RawDir + "/topic=" + topic
	type hourPart struct {
		hour      time.Time
		partition int32
	}
	files := map[hourPart]int{}
	err := l.store.walk(ctx, dir, func(key string, e entry) error {
		rel := strings.Split(strings.TrimPrefix(key, dir+"/"), "/")
		if len(rel) != 3 || hidden(e.name) || !strings.HasSuffix(e.name, ".parquet") {
			return nil
		}
		day, ok1 := parseDateDir("event_date", rel[0])
		h, ok2 := parseHourDir(rel[1])
		r, err := ParseFileName(topic, path.Base(key))
		if !ok1 || !ok2 || err != nil {
			return nil // not a raw file of this layout
		}
		hour := day.Add(time.Duration(h) * time.Hour)
		if hour.Add(time.Hour).After(now) {
			return nil
		}
		files[hourPart{hour, r.Partition}]++
		return nil
	})
	if err != nil {
		return b, fmt.Errorf("lake: compaction backlog %s: %w", topic, err)
	}
	hours := map[time.Time]bool{}
	for k, n := range files {
		if n > 1 {
			b.Files += n
			hours[k.hour] = true
		}
	}
	b.Hours = len(hours)
	return b, nil
}
