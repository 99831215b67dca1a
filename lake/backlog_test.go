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
	touch := func(hour time.Time, name string) {
		t.Helper()
		dir := RawHourDir(root, "pay", hour)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h9, h8, h10 := now.Truncate(time.Hour).Add(-time.Hour), now.Truncate(time.Hour).Add(-2*time.Hour), now.Truncate(time.Hour)
	touch(h9, FileName("pay", 0, 0, 9))
	touch(h9, FileName("pay", 0, 10, 19))
	touch(h9, FileName("pay", 0, 20, 29))
	touch(h9, FileName("pay", 1, 0, 9)) // alone in its partition: nothing to merge
	touch(h9, ".tmp-"+FileName("pay", 1, 10, 19))
	touch(h8, FileName("pay", 1, 0, 9))
	touch(h8, FileName("pay", 1, 10, 19))
	touch(h10, FileName("pay", 0, 30, 39)) // the hour still being written
	touch(h10, FileName("pay", 0, 40, 49))
	b, err := l.CompactionBacklog(t.Context(), "pay", now)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Backlog{Hours: 2, Files: 5}); b != want {
		t.Errorf("backlog %+v, want %+v", b, want)
	}
	if b, err := l.CompactionBacklog(t.Context(), "other", now); err != nil || b != (Backlog{}) {
		t.Errorf("a topic with no raw table: %+v, %v", b, err)
	}
}
