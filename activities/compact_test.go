package activities_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"reckon/activities"
	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/lake"
)

// fakeProgress is a stream progress view held in memory.
type fakeProgress map[string]event.StreamProgress

func (f fakeProgress) Sync(context.Context) error { return nil }
func (f fakeProgress) Get(stream, topic string, p int32) (event.StreamProgress, bool) {
	sp, ok := f[event.ProgressKey(stream, topic, p)]
	return sp, ok
}

func (f fakeProgress) set(stream, topic string, p int32, watermark, purged time.Time) {
	f[event.ProgressKey(stream, topic, p)] = event.StreamProgress{Stream: stream, Topic: topic, Partition: p, Watermark: watermark, PurgedThrough: purged}
}

// rawBatch writes n rows of partition p from offset first, occurring in
// the hour starting at hour, with redelivery copies of the first dups.
func rawBatch(t *testing.T, lk *lake.Lake, topic string, p int32, first int64, hour time.Time, n, dups int) {
	t.Helper()
	var rows []lake.RawRow
	for i := 0; i < n; i++ {
		rows = append(rows, lake.RawRow{
			EventID: "e-" + topic + "-" + hour.Format("15") + "-" + string(rune('a'+p)) + "-" + time.Duration(first+int64(i)).String(), EventType: "x",
			OccurredAt: hour.Add(time.Duration(i) * time.Second).UnixMicro(), IngestedAt: hour.Add(time.Duration(i)*time.Second + time.Millisecond).UnixMicro(),
			Key: "k", Value: 1, Data: "{}", KafkaPartition: p, KafkaOffset: first + int64(i),
		})
	}
	for i := 0; i < dups; i++ {
		r := rows[i]
		r.KafkaOffset, r.IngestedAt = first+int64(n+i), r.IngestedAt+1
		rows = append(rows, r)
	}
	if _, err := lk.WriteRaw(context.Background(), topic, p, first, first+int64(len(rows)-1), rows); err != nil {
		t.Fatal(err)
	}
}

// TestCompactRaw: an hour is closed when every archived partition's
// stream progress has purged through its end plus the margin; closed hours
// are compacted (redeliveries dropped), open ones only merged at half the
// file limit. A topic no stream reads falls back to the archive's progress,
// and a partition with no watermark of the stream to the archive's too.
func TestCompactRaw(t *testing.T) {
	cfg, err := config.Load("", nil, []string{"lake.root=" + t.TempDir(), "lake.compaction.max_open_files=8"})
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lake.Open(lake.Options{Root: cfg.Lake.Root})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const topic = "m8-suhu-kejadian" // read by stream suhu
	h := time.Date(2026, 11, 7, 10, 0, 0, 0, time.UTC)
	for p := int32(0); p < 2; p++ {
		for i := 0; i < 3; i++ { // hours 10, 11, 12: three files each
			for j := int64(0); j < 3; j++ {
				rawBatch(t, lk, topic, p, int64(i)*1000+j*100, h.Add(time.Duration(i)*time.Hour), 10, 2)
			}
		}
		if _, err := lk.WriteProgress(ctx, lake.Progress{Topic: topic, Partition: p, NextOffset: 3000, ArchivedThrough: h.Add(5 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	pv := fakeProgress{}
	a := &activities.Compaction{Cfg: cfg, Lake: lk, Progress: pv, Now: func() time.Time { return h.Add(3 * time.Hour) }}

	// Partition 1 has published nothing: no hour is closed.
	pv.set("suhu", topic, 0, h.Add(3*time.Hour), h.Add(2*time.Hour+50*time.Minute))
	res, err := a.CompactRaw(ctx, activities.CompactRawInput{Topic: topic})
	if err != nil || !res.ClosedThrough.IsZero() || res.ClosedHours != 0 || !strings.Contains(res.Waiting, "m8-suhu-kejadian/1: stream suhu has published no progress") {
		t.Fatalf("without partition 1's progress: %+v, %v", res, err)
	}
	// Partition 0 purged through 12:50, partition 1 through 12:04: with
	// the 5m margin hours up to 11:00-12:00 are closed (12:04 − 5m < 12:00).
	pv.set("suhu", topic, 1, h.Add(2*time.Hour+14*time.Minute), h.Add(2*time.Hour+4*time.Minute))
	res, err = a.CompactRaw(ctx, activities.CompactRawInput{Topic: topic})
	if err != nil || !res.ClosedThrough.Equal(h.Add(time.Hour)) || res.ClosedHours != 1 || res.Dropped != 12 || res.Hours != 3 ||
		res.MaxClosedFiles != 1 || res.MaxOpenFiles != 3 || !strings.Contains(res.Waiting, "m8-suhu-kejadian/1: stream suhu purged through") {
		t.Fatalf("closed through 11:00: %+v, %v", res, err)
	}
	// Purged through 12:06 closes 11:00-12:00 (12:06 − 5m ≥ 12:00).
	pv.set("suhu", topic, 1, h.Add(2*time.Hour+16*time.Minute), h.Add(2*time.Hour+6*time.Minute))
	res, err = a.CompactRaw(ctx, activities.CompactRawInput{Topic: topic, ClosedThrough: h.Add(time.Hour)})
	if err != nil || !res.ClosedThrough.Equal(h.Add(2*time.Hour)) || res.ClosedHours != 1 || res.Dropped != 12 {
		t.Fatalf("closed through 12:00: %+v, %v", res, err)
	}
	// The open hour 12 gets its fourth file per partition: half of
	// max_open_files, so each partition is merged into one file.
	for p := int32(0); p < 2; p++ {
		rawBatch(t, lk, topic, p, 2300, h.Add(2*time.Hour), 10, 0)
	}
	res, err = a.CompactRaw(ctx, activities.CompactRawInput{Topic: topic, ClosedThrough: h.Add(2 * time.Hour)})
	if err != nil || res.OpenMerges != 2 || res.MaxOpenFiles != 1 || res.Dropped != 0 || res.ClosedHours != 0 {
		t.Fatalf("open merge: %+v, %v", res, err)
	}
	// A closed-through point never goes back (a view behind after a restart).
	pv.set("suhu", topic, 1, h, h.Add(-time.Hour))
	res, err = a.CompactRaw(ctx, activities.CompactRawInput{Topic: topic, ClosedThrough: h.Add(2 * time.Hour)})
	if err != nil || !res.ClosedThrough.Equal(h.Add(2*time.Hour)) {
		t.Fatalf("progress behind: %+v, %v", res, err)
	}
	// No watermark on a partition (none of the stream's event types):
	// the archive's progress decides there (archived through 15:00).
	pv.set("suhu", topic, 1, time.Time{}, time.Time{})
	res, err = a.CompactRaw(ctx, activities.CompactRawInput{Topic: topic, ClosedThrough: h.Add(2 * time.Hour)})
	if err != nil || !res.ClosedThrough.Equal(h.Add(2*time.Hour)) || !strings.Contains(res.Waiting, "m8-suhu-kejadian/0: stream suhu purged through 2026-11-07T12:50:00Z") {
		t.Fatalf("no watermark on partition 1: %+v, %v", res, err)
	}

	// zreport-parts: no stream reads it; archive progress decides.
	const parts = "zreport-parts"
	rawBatch(t, lk, parts, 0, 0, h, 10, 1)
	if _, err := lk.WriteProgress(ctx, lake.Progress{Topic: parts, Partition: 0, NextOffset: 11, ArchivedThrough: h.Add(time.Hour + 4*time.Minute)}); err != nil {
		t.Fatal(err)
	}
	res, err = a.CompactRaw(ctx, activities.CompactRawInput{Topic: parts})
	if err != nil || res.Basis != "archive progress" || !res.ClosedThrough.Equal(h) || res.ClosedHours != 0 {
		t.Fatalf("archive progress 11:04: %+v, %v", res, err)
	}
	if _, err := lk.WriteProgress(ctx, lake.Progress{Topic: parts, Partition: 0, NextOffset: 11, ArchivedThrough: h.Add(time.Hour + 5*time.Minute)}); err != nil {
		t.Fatal(err)
	}
	res, err = a.CompactRaw(ctx, activities.CompactRawInput{Topic: parts})
	if err != nil || !res.ClosedThrough.Equal(h.Add(time.Hour)) || res.ClosedHours != 1 || res.Dropped != 1 {
		t.Fatalf("archive progress 11:05: %+v, %v", res, err)
	}
}

// TestCompactRawExpiresRejected: the compaction pass is what deletes
// rejected partitions past lake.rejected_retention (default 7 days): a
// refused record archived into a date ten days ago, its file as old, is
// gone after one pass, and today's stays.
func TestCompactRawExpiresRejected(t *testing.T) {
	cfg, err := config.Load("", nil, []string{"lake.root=" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Lake.RejectedRetention != 7*24*time.Hour {
		t.Fatalf("default lake.rejected_retention %v, want 168h", cfg.Lake.RejectedRetention)
	}
	lk, err := lake.Open(lake.Options{Root: cfg.Lake.Root})
	if err != nil {
		t.Fatal(err)
	}
	gate, err := event.NewGate(cfg.Gate)
	if err != nil {
		t.Fatal(err)
	}
	const topic = "m8-suhu-kejadian"
	w, err := lk.NewRawWriter(lake.RawTable{Topic: topic}, gate)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	old := now.Add(-10 * 24 * time.Hour)
	for i, at := range []time.Time{old, now} {
		if _, err := w.WriteBatch(t.Context(), 0, []lake.RawRecord{{Offset: int64(i), Timestamp: at, Value: []byte("{not json")}}); err != nil {
			t.Fatal(err)
		}
	}
	oldFile := lake.RejectedDateDir(cfg.Lake.Root, topic, old) + "/" + lake.FileName(topic, 0, 0, 0)
	newFile := lake.RejectedDateDir(cfg.Lake.Root, topic, now) + "/" + lake.FileName(topic, 0, 1, 1)
	if err := os.Chtimes(oldFile, old, old); err != nil {
		t.Fatal(err)
	}
	a := &activities.Compaction{Cfg: cfg, Lake: lk, Now: func() time.Time { return now }}
	res, err := a.CompactRaw(t.Context(), activities.CompactRawInput{Topic: topic})
	if err != nil || res.RejectedExpired != 1 || len(res.Failed) != 0 {
		t.Fatalf("pass: %+v, %v", res, err)
	}
	if _, err := os.Stat(oldFile); !os.IsNotExist(err) {
		t.Errorf("expired rejected file still there: %v", err)
	}
	if _, err := os.Stat(newFile); err != nil {
		t.Errorf("today's rejected file: %v", err)
	}
}
