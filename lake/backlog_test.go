package lake

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestCompactionBacklog(t *testing.T) {
	root := t.TempDir()
	l, err := Open(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)
	touch := func(hour time.Time, name string, size int, mtime time.Time) {
		t.Helper()
		dir := RawHourDir(root, "pay", hour)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	h := func(ago int) time.Time { return now.Truncate(time.Hour).Add(-time.Duration(ago) * time.Hour) }
	// Closed hour: all its files are merged across partitions.
	touch(h(1), FileName("pay", 0, 0, 9), 1, now)
	touch(h(1), FileName("pay", 0, 10, 19), 1, now)
	touch(h(1), FileName("pay", 0, 20, 29), 1, now)
	touch(h(1), FileName("pay", 1, 0, 9), 1, now) // alone in its partition, merged all the same
	touch(h(1), ".tmp-"+FileName("pay", 1, 10, 19), 1, now)
	// Closed hour, one file per partition: still merged (and deduplicated).
	touch(h(2), FileName("pay", 1, 0, 9), 1, now)
	touch(h(2), FileName("pay", 2, 0, 9), 1, now)
	// Compacted hour with a small late file not yet due: waits late_delay.
	touch(h(3), CompactedName("pay", 1, 0), 100, now)
	touch(h(3), FileName("pay", 0, 30, 39), 1, now.Add(-time.Minute))
	// Compacted hour with a late file past late_delay: merged with it.
	touch(h(4), CompactedName("pay", 1, 0), 100, now)
	touch(h(4), FileName("pay", 0, 40, 49), 1, now.Add(-20*time.Minute))
	// Compacted hour alone: nothing to do.
	touch(h(5), CompactedName("pay", 2, 0), 100, now)
	// The open hour: a partition at half of MaxOpenFiles is merged, one
	// below it is not.
	touch(h(0), FileName("pay", 0, 50, 59), 1, now)
	touch(h(0), FileName("pay", 0, 60, 69), 1, now)
	touch(h(0), FileName("pay", 1, 20, 29), 1, now)
	o := CompactOptions{MaxOpenFiles: 4, LateDelay: 10 * time.Minute}
	b, err := l.CompactionBacklog(t.Context(), "pay", now, o)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Backlog{Hours: 4, Files: 4 + 2 + 2 + 2}); b != want {
		t.Errorf("backlog %+v, want %+v", b, want)
	}
	// The same decision as CompactHour: each hour counted has work there.
	for ago, work := range map[int]bool{0: true, 1: true, 2: true, 3: false, 4: true, 5: false} {
		es, err := l.store.List(t.Context(), rawHourKey("pay", h(ago)))
		if err != nil {
			t.Fatal(err)
		}
		oh := o
		oh.fillDefaults()
		oh.Open = ago == 0
		if got := classify("pay", es).needsWork(oh, now); got != work {
			t.Errorf("hour %s: needsWork %v, want %v", h(ago).Format(time.RFC3339), got, work)
		}
	}
	if b, err := l.CompactionBacklog(t.Context(), "other", now, o); err != nil || b != (Backlog{}) {
		t.Errorf("a topic with no raw table: %+v, %v", b, err)
	}
}
