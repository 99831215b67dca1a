package lake

import (
	"context"
	"fmt"
	"strings"
	"time"

	"reckon/lake/storage"
)

// Backlog is what awaits compaction in one topic's raw table.
type Backlog struct {
	// Hours counts the hours CompactHour would work on now; Files counts
	// the files it would merge in them.
	Hours int `json:"hours"`
	Files int `json:"files"`
}

// CompactionBacklog returns what CompactHour with options o would merge in
// topic's raw table at now, by the same decision it makes
// (docs/adr/0018-continuous-compaction.md): an hour that ended at or
// before now is taken as closed (all its raw files, late files once they
// are due), the hour still being written as open (the newest files of each
// partition holding at least half of o.MaxOpenFiles, see openMergeRun). o.Open and o.Sweep
// are ignored. It reads file names only, not files.
func (l *Lake) CompactionBacklog(ctx context.Context, topic string, now time.Time, o CompactOptions) (Backlog, error) {
	var b Backlog
	if err := ValidateTopic(topic); err != nil {
		return b, err
	}
	o.fillDefaults()
	o.Sweep = false
	dir := RawDir + "/topic=" + topic
	hours := map[time.Time][]storage.Entry{}
	err := l.store.Walk(ctx, dir, func(key string, e storage.Entry) error {
		rel := strings.Split(strings.TrimPrefix(key, dir+"/"), "/")
		if len(rel) != 3 || e.Dir {
			return nil
		}
		day, ok1 := parseDateDir("event_date", rel[0])
		h, ok2 := parseHourDir(rel[1])
		if !ok1 || !ok2 {
			return nil // not an hour of this layout
		}
		hour := day.Add(time.Duration(h) * time.Hour)
		hours[hour] = append(hours[hour], e)
		return nil
	})
	if err != nil {
		return b, fmt.Errorf("lake: compaction backlog %s: %w", topic, err)
	}
	for hour, es := range hours {
		hf := classify(topic, es)
		o.Open = hour.Add(time.Hour).After(now)
		if !hf.needsWork(o, now) {
			continue
		}
		b.Hours++
		if !o.Open {
			b.Files += hf.files() // compactClosed merges them all
			continue
		}
		for _, in := range hf.archive {
			b.Files += len(openMergeRun(in, o)) // what mergeOpen merges
		}
	}
	return b, nil
}
