package lake

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCompact(t *testing.T) { forEachStore(t, testCompact) }

func testCompact(t *testing.T, opts Options) {
	ctx := context.Background()
	l := mustOpen(t, opts)
	p0 := genRows(1000, 1, 6, 0, 0, 10)
	p1 := genRows(400, 1, 6, 1, 0, 11)
	for _, b := range [][2]int{{0, 299}, {300, 599}, {500, 799}, {800, 999}} { // 500..599 twice
		if _, err := l.WriteRaw(ctx, topic, 0, int64(b[0]), int64(b[1]), p0[b[0]:b[1]+1]); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range [][2]int{{0, 199}, {200, 399}} {
		if _, err := l.WriteRaw(ctx, topic, 1, int64(b[0]), int64(b[1]), p1[b[0]:b[1]+1]); err != nil {
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

	dir := rawHourKey(topic, testStart)
	inputs := dirNames(t, l, dir)
	saved := map[string][]byte{}
	for _, n := range inputs {
		if saved[n], err = l.store.readFile(ctx, joinKey(dir, n)); err != nil {
			t.Fatal(err)
		}
	}

	res, err := l.Compact(ctx, topic, testStart)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 1400 || res.DuplicateOffsets != 100 || len(res.Written) != 2 || len(res.Removed) != 6 {
		t.Fatalf("result = %+v", res)
	}
	want := []string{"m8-suhu-kejadian-0-0-999.parquet", "m8-suhu-kejadian-1-0-399.parquet"}
	if got := dirNames(t, l, dir); !slices.Equal(got, want) {
		t.Fatalf("after compaction: %v, want %v", got, want)
	}
	after, st, err := l.Aggregate(ctx, q, 10*time.Minute)
	if err != nil || st.Duplicates != 0 || st.Rows != 1400 {
		t.Fatalf("after: %+v, %v", st, err)
	}
	checkAggs(t, after, all, 10*time.Minute)

	// A crash between writing the output and deleting the inputs leaves the
	// inputs beside the output: the reader still counts each event once,
	// and compacting again finishes the job with the same output. Debris
	// of a crashed write (a temporary file, on S3 an unfinished multipart
	// upload) older than TempMaxAge goes too.
	for n, b := range saved {
		putFile(t, l, joinKey(dir, n), b)
	}
	addDebris(t, l, dir, "m8-suhu-kejadian-0-0-999.parquet")
	mid, st, err := l.Aggregate(ctx, q, 10*time.Minute)
	if err != nil || st.Rows != 1400 {
		t.Fatalf("crash state: %+v, %v", st, err)
	}
	checkAggs(t, mid, all, 10*time.Minute)
	res, err = l.Compact(ctx, topic, testStart)
	if err != nil || len(res.TempRemoved) != 0 || res.Rows != 1400 || len(res.Removed) != 6 {
		t.Fatalf("rerun with young debris: %+v, %v", res, err)
	}
	addDebris(t, l, dir, "m8-suhu-kejadian-1-0-399.parquet")
	l.opts.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	res, err = l.Compact(ctx, topic, testStart)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.TempRemoved) != 2 || res.Rows != 0 {
		t.Errorf("second run: %+v", res)
	}
	if got := dirNames(t, l, dir); !slices.Equal(got, want) {
		t.Errorf("after second run: %v, want %v", got, want)
	}
	if _, ok := l.store.(*s3Store); ok {
		if u := uploads(t, l); len(u) != 0 {
			t.Errorf("uploads left: %v", u)
		}
	}
	after, _, err = l.Aggregate(ctx, q, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	checkAggs(t, after, all, 10*time.Minute)

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

func TestCompactLock(t *testing.T) { forEachStore(t, testCompactLock) }

func testCompactLock(t *testing.T, opts Options) {
	l := mustOpen(t, opts)
	rows := genRows(20, 1, 2, 0, 0, 12)
	l.WriteRaw(t.Context(), topic, 0, 0, 9, rows[:10])
	l.WriteRaw(t.Context(), topic, 0, 10, 19, rows[10:])
	dir := rawHourKey(topic, testStart)
	putFile(t, l, joinKey(dir, lockName), nil)
	if _, err := l.Compact(context.Background(), topic, testStart); err == nil || !strings.Contains(err.Error(), "another compaction") {
		t.Fatalf("compaction ran while another held the lock: %v", err)
	}
	if got := dirNames(t, l, dir); len(got) != 3 {
		t.Fatalf("a refused compaction changed the hour: %v", got)
	}
	l.opts.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	res, err := l.Compact(context.Background(), topic, testStart)
	if err != nil || len(res.Written) != 1 {
		t.Fatalf("stale lock not taken over: %+v, %v", res, err)
	}
	if got := dirNames(t, l, dir); !slices.Equal(got, []string{"m8-suhu-kejadian-0-0-19.parquet"}) {
		t.Errorf("lock left behind: %v", got)
	}
	// While one compaction holds the lock, another is refused.
	unlock, err := l.store.lock(context.Background(), dir, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.store.lock(context.Background(), dir, time.Now(), time.Hour); err == nil {
		t.Error("a second lock was granted")
	}
	unlock()
	if got := dirNames(t, l, dir); slices.Contains(got, lockName) {
		t.Errorf("unlock left %v", got)
	}
}

// TestCompactBadInput: a compaction that fails while merging (an input is
// not parquet) writes no output and removes nothing.
func TestCompactBadInput(t *testing.T) { forEachStore(t, testCompactBadInput) }

func testCompactBadInput(t *testing.T, opts Options) {
	l := mustOpen(t, opts)
	rows := genRows(20, 1, 2, 0, 0, 13)
	if _, err := l.WriteRaw(t.Context(), topic, 0, 0, 9, rows[:10]); err != nil {
		t.Fatal(err)
	}
	dir := rawHourKey(topic, testStart)
	putFile(t, l, joinKey(dir, FileName(topic, 0, 10, 19)), []byte("PAR1 not really parquet PAR1"))
	before := listFiles(t, l)
	_, err := l.Compact(context.Background(), topic, testStart)
	if !errors.Is(err, ErrBadFile) {
		t.Fatalf("err = %v, want ErrBadFile", err)
	}
	if after := listFiles(t, l); !slices.Equal(before, after) {
		t.Errorf("failed compaction changed the lake: %v -> %v", before, after)
	}
}
