package lake

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCompact(t *testing.T) {
	ctx := context.Background()
	l := newTestLake(t)
	p0 := genRows(1000, 1, 6, 0, 0, 10)
	p1 := genRows(400, 1, 6, 1, 0, 11)
	for _, b := range [][2]int{{0, 299}, {300, 599}, {500, 799}, {800, 999}} { // 500..599 twice
		if _, err := l.WriteRaw(topic, 0, int64(b[0]), int64(b[1]), p0[b[0]:b[1]+1]); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range [][2]int{{0, 199}, {200, 399}} {
		if _, err := l.WriteRaw(topic, 1, int64(b[0]), int64(b[1]), p1[b[0]:b[1]+1]); err != nil {
			t.Fatal(err)
		}
	}
	all := append(slices.Clone(p0), p1...)
	q := Query{Topic: topic, From: testStart, To: testStart.Add(time.Hour)}
	before, st, err := l.Aggregate(ctx, q, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if st.Rows != 1400 || st.Duplicates != 100 {
		t.Fatalf("before: %+v", st)
	}
	checkAggs(t, before, all, 10*time.Minute)

	dir := RawHourDir(l.Root(), topic, testStart)
	inputs, _ := lakeFiles(dir)
	saved := map[string][]byte{}
	for _, n := range inputs {
		saved[n], _ = os.ReadFile(filepath.Join(dir, n))
	}

	res, err := l.Compact(ctx, topic, testStart)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 1400 || res.DuplicateOffsets != 100 || len(res.Written) != 2 || len(res.Removed) != 6 {
		t.Fatalf("result = %+v", res)
	}
	got, _ := lakeFiles(dir)
	want := []string{"m8-suhu-kejadian-0-0-999.parquet", "m8-suhu-kejadian-1-0-399.parquet"}
	if !slices.Equal(got, want) {
		t.Fatalf("after compaction: %v, want %v", got, want)
	}
	after, st, err := l.Aggregate(ctx, q, 10*time.Minute)
	if err != nil || st.Duplicates != 0 || st.Rows != 1400 {
		t.Fatalf("after: %+v, %v", st, err)
	}
	checkAggs(t, after, all, 10*time.Minute)

	// A crash between rename and delete leaves the inputs beside the output:
	// the reader still counts each event once, and compacting again
	// finishes the job with the same output.
	for n, b := range saved {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, ".m8-suhu-kejadian-0-0-999.parquet.123.tmp"), []byte("debris"), 0o644)
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(filepath.Join(dir, ".m8-suhu-kejadian-0-0-999.parquet.123.tmp"), old, old)
	mid, st, err := l.Aggregate(ctx, q, 10*time.Minute)
	if err != nil || st.Rows != 1400 {
		t.Fatalf("crash state: %+v, %v", st, err)
	}
	checkAggs(t, mid, all, 10*time.Minute)
	res, err = l.Compact(ctx, topic, testStart)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.TempRemoved) != 1 || res.Rows != 1400 {
		t.Errorf("second run: %+v", res)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, want) {
		t.Errorf("after second run: %v, want %v", names, want)
	}

	// Nothing left to merge: a no-op.
	res, err = l.Compact(ctx, topic, testStart)
	if err != nil || len(res.Written) != 0 || len(res.Removed) != 0 {
		t.Errorf("third run: %+v, %v", res, err)
	}
	// Missing hours are fine; unaligned hours are not.
	if _, err := l.Compact(ctx, topic, testStart.Add(5*time.Hour)); err != nil {
		t.Errorf("missing hour: %v", err)
	}
	if _, err := l.Compact(ctx, topic, testStart.Add(time.Minute)); err == nil || !strings.Contains(err.Error(), "start of an hour") {
		t.Errorf("unaligned hour: %v", err)
	}
}

func TestCompactLock(t *testing.T) {
	l := newTestLake(t)
	rows := genRows(20, 1, 2, 0, 0, 12)
	l.WriteRaw(topic, 0, 0, 9, rows[:10])
	l.WriteRaw(topic, 0, 10, 19, rows[10:])
	dir := RawHourDir(l.Root(), topic, testStart)
	if err := os.WriteFile(filepath.Join(dir, lockName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Compact(context.Background(), topic, testStart); err == nil {
		t.Fatal("compaction ran while another held the lock")
	}
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(filepath.Join(dir, lockName), old, old)
	res, err := l.Compact(context.Background(), topic, testStart)
	if err != nil || len(res.Written) != 1 {
		t.Fatalf("stale lock not taken over: %+v, %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(dir, lockName)); !os.IsNotExist(err) {
		t.Error("lock left behind")
	}
}
