package lake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"reckon/lake/storage"
)

func TestCompact(t *testing.T) { forEachStore(t, testCompact) }

// redeliver returns copies of every step-th row of rows as records of
// partition p from offset first, ingested shift later (earlier when
// negative): what a producer's retry leaves in the topic.
func redeliver(rows []RawRow, step int, p int32, first int64, shift time.Duration) []RawRow {
	var out []RawRow
	for i := 0; i < len(rows); i += step {
		r := rows[i]
		r.KafkaPartition, r.KafkaOffset = p, first+int64(len(out))
		r.IngestedAt += shift.Microseconds()
		out = append(out, r)
	}
	return out
}

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
	// Redeliveries: 100 of p0's events again in partition 2, ingested
	// later (dropped), 20 of p1's in partition 2 ingested earlier (kept:
	// the originals are dropped), and 10 of p0's again in partition 0.
	p2 := append(redeliver(p0, 10, 2, 0, time.Second), redeliver(p1, 20, 2, 100, -time.Millisecond)...)
	p0again := redeliver(p0, 100, 0, 1000, 2*time.Second)
	if _, err := l.WriteRaw(ctx, topic, 2, 0, int64(len(p2)-1), p2); err != nil {
		t.Fatal(err)
	}
	if _, err := l.WriteRaw(ctx, topic, 0, 1000, 1009, p0again); err != nil {
		t.Fatal(err)
	}
	all := append(slices.Clone(p0), p1...)
	q := Query{Topic: topic, From: testStart, To: testStart.Add(time.Hour)}
	before, st, err := l.Aggregate(ctx, q, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if st.Rows != 1400 || st.Duplicates != 100+130 {
		t.Fatalf("before: %+v", st)
	}
	checkAggs(t, before, all, 10*time.Minute)

	dir := rawHourKey(topic, testStart)
	inputs := dirNames(t, l, dir)
	saved := map[string][]byte{}
	for _, n := range inputs {
		if saved[n], err = l.store.ReadFile(ctx, storage.JoinKey(dir, n)); err != nil {
			t.Fatal(err)
		}
	}

	res, err := l.CompactHour(ctx, topic, testStart, CompactOptions{MaxRows: 500})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 1400 || res.DuplicateOffsets != 100 || res.Dropped != 130 || len(res.Written) != 3 || len(res.Removed) != 8 || res.Files != 3 {
		t.Fatalf("result = %+v", res)
	}
	want := []string{"m8-suhu-kejadian-c1-0.parquet", "m8-suhu-kejadian-c1-1.parquet", "m8-suhu-kejadian-c1-2.parquet"}
	if got := dirNames(t, l, dir); !slices.Equal(got, want) {
		t.Fatalf("after compaction: %v, want %v", got, want)
	}
	checkCompacted(t, l, q, all, 1400, 130)
	// The earliest ingested copy is kept: p1's events redelivered earlier
	// in partition 2 are kept there, their originals dropped.
	dropped := readParquet[DroppedRow](t, l, res.DroppedFile)
	kept := map[[2]int64][2]int64{}
	for _, d := range dropped {
		kept[[2]int64{int64(d.KafkaPartition), d.KafkaOffset}] = [2]int64{int64(d.KeptPartition), d.KeptOffset}
	}
	if k := kept[[2]int64{1, 20}]; k != [2]int64{2, 101} {
		t.Errorf("p1 offset 20 dropped for %v, want the earlier copy 2/101", k)
	}
	if k := kept[[2]int64{2, 1}]; k != [2]int64{0, 10} {
		t.Errorf("p2 offset 1 dropped for %v, want the original 0/10", k)
	}
	if k := kept[[2]int64{0, 1001}]; k != [2]int64{0, 100} {
		t.Errorf("p0 offset 1001 dropped for %v, want the original 0/100", k)
	}

	// A crash between writing the outputs and deleting the inputs leaves the
	// inputs beside the outputs: the reader still counts each event once,
	// and compacting again finishes the job (a new generation, the dropped
	// table rewritten, nothing doubled). Debris of a crashed write (a
	// temporary file, on S3 an unfinished multipart upload) older than
	// TempMaxAge goes too.
	for n, b := range saved {
		putFile(t, l, storage.JoinKey(dir, n), b)
	}
	addDebris(t, l, dir, "m8-suhu-kejadian-c1-0.parquet")
	mid, st, err := l.Aggregate(ctx, q, 10*time.Minute)
	if err != nil || st.Rows != 1400 {
		t.Fatalf("crash state: %+v, %v", st, err)
	}
	checkAggs(t, mid, all, 10*time.Minute)
	res, err = l.CompactHour(ctx, topic, testStart, CompactOptions{MaxRows: 500})
	if err != nil || len(res.TempRemoved) != 0 || res.Rows != 1400 || len(res.Removed) != 11 || res.Dropped != 130 {
		t.Fatalf("rerun with young debris: %+v, %v", res, err)
	}
	want2 := []string{"m8-suhu-kejadian-c2-0.parquet", "m8-suhu-kejadian-c2-1.parquet", "m8-suhu-kejadian-c2-2.parquet"}
	if got := slices.DeleteFunc(dirNames(t, l, dir), storage.IsTemp); !slices.Equal(got, want2) {
		t.Fatalf("after the rerun: %v, want %v", got, want2)
	}
	if got := dirNames(t, l, droppedHourKey(topic, testStart)); !slices.Equal(got, []string{"m8-suhu-kejadian-c2.parquet"}) {
		t.Errorf("raw_dropped after the rerun: %v", got)
	}
	checkCompacted(t, l, q, all, 1400, 130)

	// Nothing left to merge: Compact only sweeps old debris.
	l.opts.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	res, err = l.Compact(ctx, topic, testStart)
	if err != nil || len(res.Written) != 0 || len(res.Removed) != 0 || res.Files != 3 {
		t.Errorf("third run: %+v, %v", res, err)
	}
	if _, ok := l.base().(*storage.Local); ok && len(res.TempRemoved) != 1 {
		t.Errorf("third run removed %v, want the debris", res.TempRemoved)
	}
	if _, ok := l.base().(*storage.S3); ok {
		if u := uploads(t, l); len(u) != 0 {
			t.Errorf("uploads left: %v", u)
		}
	}
	if got := dirNames(t, l, dir); !slices.Equal(got, want2) {
		t.Errorf("after the sweep: %v, want %v", got, want2)
	}

	// A late archive batch redelivering an event again lands in the closed
	// hour; the next compaction drops it too, and keeps the dropped
	// records of the earlier generations.
	// It waits for LateDelay first, so a trickle of late files does not
	// rewrite the hour every pass.
	l.opts.Now = time.Now
	late := redeliver(p0, 500, 3, 0, time.Hour)
	if _, err := l.WriteRaw(ctx, topic, 3, 0, int64(len(late)-1), late); err != nil {
		t.Fatal(err)
	}
	if res, err = l.CompactHour(ctx, topic, testStart, CompactOptions{MaxRows: 500}); err != nil || len(res.Removed) != 0 || res.Files != 4 {
		t.Fatalf("a young late batch: %+v, %v", res, err)
	}
	l.opts.Now = func() time.Time { return time.Now().Add(11 * time.Minute) }
	if res, err = l.CompactHour(ctx, topic, testStart, CompactOptions{MaxRows: 500}); err != nil || res.Dropped != 2 || res.Rows != 1400 {
		t.Fatalf("late batch: %+v, %v", res, err)
	}
	checkCompacted(t, l, q, all, 1400, 132)

	// Missing hours are fine; unaligned hours are not.
	if _, err := l.Compact(ctx, topic, testStart.Add(5*time.Hour)); err != nil {
		t.Errorf("missing hour: %v", err)
	}
	if _, err := l.Compact(ctx, topic, testStart.Add(time.Minute)); err == nil || !strings.Contains(err.Error(), "start of an hour") {
		t.Errorf("unaligned hour: %v", err)
	}
}

// checkCompacted checks a compacted lake: the aggregates of all, every raw
// row a distinct event (a reader that does not deduplicate counts rows
// events), and every offset of raw and raw_dropped exactly once, dropped
// of them in raw_dropped.
func checkCompacted(t *testing.T, l *Lake, q Query, all []RawRow, rows, dropped int) {
	t.Helper()
	ctx := context.Background()
	aggs, st, err := l.Aggregate(ctx, q, 10*time.Minute)
	if err != nil || st.Duplicates != 0 || st.Rows != int64(rows) {
		t.Fatalf("compacted: %+v, %v", st, err)
	}
	checkAggs(t, aggs, all, 10*time.Minute)
	if n := rawRowCount(t, l, q.Topic); n != int64(rows) {
		t.Errorf("raw files hold %d rows, want %d distinct events", n, rows)
	}
	seen := map[string]int{}
	inDropped := 0
	if err := l.Offsets(ctx, q.Topic, func(table string, p int32, o int64) error {
		seen[fmt.Sprintf("%d/%d", p, o)]++
		if table == DroppedDir {
			inDropped++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for o, n := range seen {
		if n != 1 {
			t.Errorf("offset %s held %d times", o, n)
		}
	}
	if inDropped != dropped || len(seen) != rows+dropped {
		t.Errorf("offsets: %d, %d of them in raw_dropped; want %d, %d", len(seen), inDropped, rows+dropped, dropped)
	}
}

// rawRowCount is the number of rows in topic's raw files, as a reader that
// does not deduplicate (DuckDB's count(*)) sees them.
func rawRowCount(t *testing.T, l *Lake, topic string) int64 {
	t.Helper()
	var n int64
	if err := l.store.Walk(context.Background(), RawDir+"/topic="+topic, func(key string, e storage.Entry) error {
		if !hidden(e.Name) && strings.HasSuffix(e.Name, ".parquet") {
			n += openParquet(t, l, key).NumRows()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCompactOpenHour: an open hour's partition is merged once it holds
// half the file limit, into one archive file keeping every offset (event_id
// duplicates too: the stream may still count them).
func TestCompactOpenHour(t *testing.T) { forEachStore(t, testCompactOpenHour) }

func testCompactOpenHour(t *testing.T, opts Options) {
	ctx := context.Background()
	l := mustOpen(t, opts)
	rows := genRows(320, 1, 4, 0, 0, 14)
	rows = append(rows, redeliver(rows, 32, 0, 320, time.Second)...)
	write := func(lo, hi int) {
		t.Helper()
		for i := lo; i < hi; i += 10 {
			if _, err := l.WriteRaw(ctx, topic, 0, int64(i), int64(i+9), rows[i:i+10]); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(0, 150) // 15 files
	o := CompactOptions{Open: true, MaxOpenFiles: 32}
	res, err := l.CompactHour(ctx, topic, testStart, o)
	if err != nil || len(res.Written) != 0 || res.Files != 15 || res.MaxPartitionFiles != 15 {
		t.Fatalf("below the threshold: %+v, %v", res, err)
	}
	write(150, 330) // 33 files
	res, err = l.CompactHour(ctx, topic, testStart, o)
	if err != nil || len(res.Written) != 1 || res.Rows != 330 || res.Files != 1 || res.MaxPartitionFiles != 1 || res.Dropped != 0 {
		t.Fatalf("merge: %+v, %v", res, err)
	}
	dir := rawHourKey(topic, testStart)
	if got := dirNames(t, l, dir); !slices.Equal(got, []string{FileName(topic, 0, 0, 329)}) {
		t.Errorf("after the merge: %v", got)
	}
	_, st, err := l.Aggregate(ctx, Query{Topic: topic, From: testStart, To: testStart.Add(time.Hour)}, time.Hour)
	if err != nil || st.Rows != 320 || st.Duplicates != 10 {
		t.Errorf("read after the merge: %+v, %v", st, err)
	}
	// Closing the hour then drops the redeliveries.
	res, err = l.CompactHour(ctx, topic, testStart, CompactOptions{})
	if err != nil || res.Rows != 320 || res.Dropped != 10 || res.Files != 1 {
		t.Fatalf("closing: %+v, %v", res, err)
	}
}

// TestCompactOpenHourKeepsLargerFiles: an open hour's merge leaves a file
// at least as big as all newer files together as it is and merges the newer
// ones: each row is rewritten once per doubling of its file, not at every
// merge.
func TestCompactOpenHourKeepsLargerFiles(t *testing.T) {
	ctx := context.Background()
	l := mustOpen(t, Options{Root: t.TempDir()})
	rows := genRows(2000+31*10, 1, 4, 0, 0, 15)
	if _, err := l.WriteRaw(ctx, topic, 0, 0, 1999, rows[:2000]); err != nil {
		t.Fatal(err)
	}
	for i := 2000; i < len(rows); i += 10 {
		if _, err := l.WriteRaw(ctx, topic, 0, int64(i), int64(i+9), rows[i:i+10]); err != nil {
			t.Fatal(err)
		}
	}
	res, err := l.CompactHour(ctx, topic, testStart, CompactOptions{Open: true, MaxOpenFiles: 64})
	if err != nil || len(res.Written) != 1 || res.Rows != 310 || res.Files != 2 || res.MaxPartitionFiles != 2 {
		t.Fatalf("merge: %+v, %v", res, err)
	}
	dir := rawHourKey(topic, testStart)
	want := []string{FileName(topic, 0, 0, 1999), FileName(topic, 0, 2000, int64(len(rows)-1))}
	if got := dirNames(t, l, dir); !slices.Equal(got, want) {
		t.Errorf("after the merge: %v, want %v", got, want)
	}
	_, st, err := l.Aggregate(ctx, Query{Topic: topic, From: testStart, To: testStart.Add(time.Hour)}, time.Hour)
	if err != nil || st.Rows != int64(len(rows)) || st.Duplicates != 0 {
		t.Errorf("read after the merge: %+v, %v", st, err)
	}
}

func TestCompactLock(t *testing.T) { forEachStore(t, testCompactLock) }

// TestCompactLockLease: a killed compaction's lock is taken over once it is
// older than the holder's lease (Options.CompactLease), not after the
// temporary files' hour; younger, it is refused.
func TestCompactLockLease(t *testing.T) { forEachStore(t, testCompactLockLease) }

func testCompactLockLease(t *testing.T, opts Options) {
	opts.CompactLease = 2 * time.Minute
	l := mustOpen(t, opts)
	rows := genRows(20, 1, 2, 0, 0, 12)
	l.WriteRaw(t.Context(), topic, 0, 0, 9, rows[:10])
	l.WriteRaw(t.Context(), topic, 0, 10, 19, rows[10:])
	dir := rawHourKey(topic, testStart)
	putFile(t, l, storage.JoinKey(dir, storage.LockName), nil) // a compaction killed just now
	l.opts.Now = func() time.Time { return time.Now().Add(time.Minute) }
	if _, err := l.Compact(t.Context(), topic, testStart); err == nil || !strings.Contains(err.Error(), "another compaction") {
		t.Fatalf("a lock within its lease was taken over: %v", err)
	}
	l.opts.Now = func() time.Time { return time.Now().Add(3 * time.Minute) }
	res, err := l.Compact(t.Context(), topic, testStart)
	if err != nil || len(res.Written) != 1 || res.Rows != 20 {
		t.Fatalf("a lock past its lease was not taken over: %+v, %v", res, err)
	}
	if got := dirNames(t, l, dir); !slices.Equal(got, []string{"m8-suhu-kejadian-c2-0.parquet"}) {
		t.Errorf("after the takeover: %v", got)
	}
}

func testCompactLock(t *testing.T, opts Options) {
	l := mustOpen(t, opts)
	rows := genRows(20, 1, 2, 0, 0, 12)
	l.WriteRaw(t.Context(), topic, 0, 0, 9, rows[:10])
	l.WriteRaw(t.Context(), topic, 0, 10, 19, rows[10:])
	dir := rawHourKey(topic, testStart)
	putFile(t, l, storage.JoinKey(dir, storage.LockName), nil)
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
	// Taken over: the generation skips the one the killed holder may
	// have been writing.
	if got := dirNames(t, l, dir); !slices.Equal(got, []string{"m8-suhu-kejadian-c2-0.parquet"}) {
		t.Errorf("lock left behind: %v", got)
	}
	// While one compaction holds the lock, another is refused.
	unlock, err := l.store.Lock(context.Background(), dir, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.store.Lock(context.Background(), dir, time.Now(), time.Hour); err == nil {
		t.Error("a second lock was granted")
	}
	unlock()
	if got := dirNames(t, l, dir); slices.Contains(got, storage.LockName) {
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
	putFile(t, l, storage.JoinKey(dir, FileName(topic, 0, 10, 19)), []byte("PAR1 not really parquet PAR1"))
	before := listFiles(t, l)
	_, err := l.Compact(context.Background(), topic, testStart)
	if !errors.Is(err, ErrBadFile) {
		t.Fatalf("err = %v, want ErrBadFile", err)
	}
	if after := listFiles(t, l); !slices.Equal(before, after) {
		t.Errorf("failed compaction changed the lake: %v -> %v", before, after)
	}
}

// staleListStore hands out a listing of dir taken before calling between
// once, so a reader opens files that between has replaced.
type staleListStore struct {
	storage.Store
	dir     string
	between func()
	done    bool
}

func (s *staleListStore) List(ctx context.Context, dir string) ([]storage.Entry, error) {
	es, err := s.Store.List(ctx, dir)
	if err == nil && dir == s.dir && !s.done {
		s.done = true
		s.between()
	}
	return es, err
}

// TestReadRacesCompaction: a reader that listed an hour before a
// compaction replaced its files (open-hour merge or closed-hour
// compaction) lists it again and counts every event once.
func TestReadRacesCompaction(t *testing.T) { forEachStore(t, testReadRacesCompaction) }

func testReadRacesCompaction(t *testing.T, opts Options) {
	ctx := context.Background()
	l := mustOpen(t, opts)
	rows := genRows(400, 1, 5, 0, 0, 15)
	for lo := 0; lo < len(rows); lo += 20 {
		if _, err := l.WriteRaw(ctx, topic, 0, int64(lo), int64(lo+19), rows[lo:lo+20]); err != nil {
			t.Fatal(err)
		}
	}
	again := redeliver(rows, 7, 1, 0, time.Second)
	if _, err := l.WriteRaw(ctx, topic, 1, 0, int64(len(again)-1), again); err != nil {
		t.Fatal(err)
	}
	q := Query{Topic: topic, From: testStart, To: testStart.Add(time.Hour)}
	for _, o := range []CompactOptions{{Open: true, MaxOpenFiles: 8}, {MaxRows: 150}} {
		reader := mustOpen(t, opts)
		var res CompactResult
		reader.store = &staleListStore{Store: reader.store, dir: rawHourKey(topic, testStart), between: func() {
			var err error
			if res, err = l.CompactHour(ctx, topic, testStart, o); err != nil {
				t.Fatal(err)
			}
		}}
		aggs, st, err := reader.Aggregate(ctx, q, 10*time.Minute)
		if err != nil {
			t.Fatalf("open %v: read racing the compaction: %v", o.Open, err)
		}
		if len(res.Removed) == 0 {
			t.Fatalf("open %v: the compaction removed nothing: %+v", o.Open, res)
		}
		if st.Rows != int64(len(rows)) {
			t.Errorf("open %v: %d events read, want %d", o.Open, st.Rows, len(rows))
		}
		checkAggs(t, aggs, rows, 10*time.Minute)
	}
}
