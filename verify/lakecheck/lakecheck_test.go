package lakecheck

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"reckon/lake"
	"reckon/verify/generate"
)

// TestAccountLake: after compaction a redelivery the manifest lists is in
// raw_dropped and every offset is held once; a compaction's inputs put
// back beside its output are held twice, and a deleted file's listed
// records are missing.
func TestAccountLake(t *testing.T) {
	ctx := context.Background()
	lk, err := lake.Open(lake.Options{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	const topic = "m8-suhu-kejadian"
	h := time.Date(2026, 11, 7, 8, 0, 0, 0, time.UTC)
	m := &generate.Manifest{Topic: topic}
	var rows []lake.RawRow
	for i := int64(0); i < 20; i++ {
		rows = append(rows, lake.RawRow{EventID: fmt.Sprintf("e%02d", i), EventType: "x", Key: "k", OccurredAt: h.Add(time.Duration(i) * time.Minute).UnixMicro(),
			IngestedAt: h.Add(time.Duration(i) * time.Minute).UnixMicro(), Data: "{}", KafkaOffset: i})
	}
	dup := rows[3]
	dup.KafkaOffset, dup.IngestedAt = 20, dup.IngestedAt+1
	rows = append(rows, dup)
	p, o3, o20 := int32(0), int64(3), int64(20)
	m.Listed = []generate.Entry{{Category: generate.Duplicate, Partition: &p, Offset: &o20}, {Category: generate.Late, Partition: &p, Offset: &o3}}
	if _, err := lk.WriteRaw(ctx, topic, 0, 0, 9, rows[:10]); err != nil {
		t.Fatal(err)
	}
	if _, err := lk.WriteRaw(ctx, topic, 0, 10, 20, rows[10:]); err != nil {
		t.Fatal(err)
	}
	if _, err := lk.WriteProgress(ctx, lake.Progress{Topic: topic, NextOffset: 21, ArchivedThrough: h.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	acc, err := Check(ctx, lk, m)
	if err != nil || !acc.Exact() || acc.Held != 21 || acc.ByTable[lake.RawDir] != 21 || acc.Archived != 2 {
		t.Fatalf("before compaction: %+v, %v", acc, err)
	}
	if _, err := lk.Compact(ctx, topic, h); err != nil {
		t.Fatal(err)
	}
	acc, err = Check(ctx, lk, m)
	if err != nil || !acc.Exact() || acc.Held != 21 || acc.Below != 21 || acc.ByTable[lake.RawDir] != 20 || acc.ByTable[lake.DroppedDir] != 1 {
		t.Fatalf("after compaction: %+v, %v", acc, err)
	}
	var b strings.Builder
	acc.Print(&b, topic)
	if !strings.Contains(b.String(), "raw 20, rejected 0, raw_dropped 1; held twice 0") {
		t.Errorf("print: %s", b.String())
	}
	// An input back beside the compacted file: offsets 0..9 held twice.
	if _, err := lk.WriteRaw(ctx, topic, 0, 0, 9, rows[:10]); err != nil {
		t.Fatal(err)
	}
	if acc, err = Check(ctx, lk, m); err != nil || acc.Exact() || acc.NTwice != 10 {
		t.Fatalf("an input beside its output: %+v, %v", acc, err)
	}
	// Every raw file gone: the listed late record is missing (the
	// redelivery is still in raw_dropped).
	files, err := lk.Files(ctx, "raw/topic="+topic+"/event_date=2026-11-07/event_hour=08")
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := lk.LocalDir()
	for _, f := range files {
		if err := os.Remove(dir + "/raw/topic=" + topic + "/event_date=2026-11-07/event_hour=08/" + f); err != nil {
			t.Fatal(err)
		}
	}
	if acc, err = Check(ctx, lk, m); err != nil || acc.NMissing != 1 || acc.Missing[0] != "0/3" {
		t.Fatalf("raw files gone: %+v, %v", acc, err)
	}
}
