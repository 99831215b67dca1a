package lake

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"reckon/lake/storage"
)

// mirrorTables are the directories the mirror tests copy.
var mirrorTables = []string{RawDir, SummariesDir}

// visibleKeys returns the keys of the visible .parquet files of l, sorted.
func visibleKeys(t *testing.T, l *Lake) []string {
	t.Helper()
	var out []string
	for _, k := range listFiles(t, l) {
		if mirrored(k) {
			out = append(out, k)
		}
	}
	return out
}

// checkMirror fails unless the mirror at dir holds exactly the visible
// .parquet files of src, byte for byte, and reads as src does.
func checkMirror(t *testing.T, src *Lake, dir string) {
	t.Helper()
	ctx := context.Background()
	m := mustOpen(t, Options{Root: dir})
	want, got := visibleKeys(t, src), visibleKeys(t, m)
	if !slices.Equal(got, want) {
		t.Fatalf("mirror holds\n%v\nlake holds\n%v", got, want)
	}
	for _, k := range want {
		a, err := src.store.ReadFile(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(k)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("%s: the mirror's copy differs from the lake's", k)
		}
	}
	q := Query{Topic: topic, From: testStart, To: testStart.Add(2 * time.Hour)}
	wa, ws, err := src.Aggregate(ctx, q, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ga, gs, err := m.Aggregate(ctx, q, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if gs.Rows != ws.Rows || !slices.Equal(ga, wa) {
		t.Fatalf("the mirror reads %d rows, the lake %d (aggregates equal: %v)", gs.Rows, ws.Rows, slices.Equal(ga, wa))
	}
}

func writeHours(t *testing.T, l *Lake) []RawRow {
	t.Helper()
	rows := genRows(600, 2, 5, 0, 0, 21)
	for lo := 0; lo < len(rows); lo += 50 {
		if _, err := l.WriteRaw(context.Background(), topic, 0, int64(lo), int64(lo+49), rows[lo:lo+50]); err != nil {
			t.Fatal(err)
		}
	}
	return rows
}

// TestMirror: a mirror equals the lake after the first pass; after a
// compaction and a second pass it holds the outputs and no input; a file
// deleted from the lake disappears from it; an unchanged lake downloads
// nothing.
func TestMirror(t *testing.T) { forEachStore(t, testMirror) }

func testMirror(t *testing.T, opts Options) {
	ctx := context.Background()
	l := mustOpen(t, opts)
	rows := writeHours(t, l)
	dir := t.TempDir()
	res, err := l.Mirror(ctx, dir, mirrorTables)
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != len(visibleKeys(t, l)) || res.Downloaded != res.Files || res.Bytes == 0 || res.DownloadedBytes != res.Bytes {
		t.Fatalf("first pass: %+v", res)
	}
	checkMirror(t, l, dir)

	if res, err = l.Mirror(ctx, dir, mirrorTables); err != nil || res.Downloaded != 0 || res.Removed != 0 || res.Dirs != 0 {
		t.Fatalf("pass over an unchanged lake: %+v, %v", res, err)
	}

	cr, err := l.Compact(ctx, topic, testStart)
	if err != nil || len(cr.Removed) == 0 {
		t.Fatalf("compact: %+v, %v", cr, err)
	}
	if res, err = l.Mirror(ctx, dir, mirrorTables); err != nil {
		t.Fatal(err)
	}
	if res.Removed != len(cr.Removed) || res.Downloaded != len(cr.Written) {
		t.Fatalf("pass after compacting: %+v; the compaction removed %d files, wrote %d", res, len(cr.Removed), len(cr.Written))
	}
	checkMirror(t, l, dir)
	for _, k := range cr.Removed {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(k))); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("compaction input %s still in the mirror: %v", k, err)
		}
	}
	if got := rawRowCount(t, mustOpen(t, Options{Root: dir}), topic); got != int64(len(rows)) {
		t.Errorf("the mirror holds %d raw rows, want %d", got, len(rows))
	}

	// A file deleted from the lake, and with it the last of its hour.
	hour2 := rawHourKey(topic, testStart.Add(time.Hour))
	es, err := l.lakeFiles(ctx, hour2)
	if err != nil || len(es) < 2 {
		t.Fatalf("hour 2: %v, %v", es, err)
	}
	if err := l.store.Remove(ctx, hour2, []string{es[0].Name}); err != nil {
		t.Fatal(err)
	}
	if res, err = l.Mirror(ctx, dir, mirrorTables); err != nil || res.Removed != 1 || res.Downloaded != 0 || res.Dirs != 1 {
		t.Fatalf("pass after a delete: %+v, %v; want one file removed, the hour's others kept without a download", res, err)
	}
	checkMirror(t, l, dir)
	var names []string
	for _, e := range es[1:] {
		names = append(names, e.Name)
	}
	if err := l.store.Remove(ctx, hour2, names); err != nil {
		t.Fatal(err)
	}
	if res, err = l.Mirror(ctx, dir, mirrorTables); err != nil || res.Removed != len(names) {
		t.Fatalf("pass after emptying an hour: %+v, %v", res, err)
	}
	checkMirror(t, l, dir)
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(hour2))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the emptied hour's directory is still in the mirror: %v", err)
	}
}

// hookStore calls before(key) ahead of opening key, for the first key
// that match accepts.
type hookStore struct {
	storage.Store
	match  func(key string) bool
	before func(key string)
	once   sync.Once
}

func (s *hookStore) Open(ctx context.Context, key string, size int64) (storage.ObjectReader, error) {
	if s.match(key) {
		s.once.Do(func() { s.before(key) })
	}
	return s.Store.Open(ctx, key, size)
}

// TestMirrorRacesCompaction: a compaction that finishes between the
// mirror's listing and its download of an input makes the mirror list the
// hour again and copy the outputs; the hour is never left with its
// inputs half gone and no output.
func TestMirrorRacesCompaction(t *testing.T) { forEachStore(t, testMirrorRacesCompaction) }

func testMirrorRacesCompaction(t *testing.T, opts Options) {
	ctx := context.Background()
	l := mustOpen(t, opts)
	rows := writeHours(t, l)
	dir := t.TempDir()
	if _, err := l.Mirror(ctx, dir, mirrorTables); err != nil {
		t.Fatal(err)
	}
	hour := rawHourKey(topic, testStart)
	before, err := localFiles(dir, RawDir)
	if err != nil {
		t.Fatal(err)
	}
	// A new file in the hour: the next pass downloads it, and the
	// compaction deletes it just before.
	more := genRows(50, 1, 5, 1, 0, 22)
	if _, err := l.WriteRaw(ctx, topic, 1, 0, 49, more); err != nil {
		t.Fatal(err)
	}
	mirrorLake := mustOpen(t, opts)
	var cr CompactResult
	var seen []storage.Entry // what the mirror's hour held when the compaction ran
	var hookErr error
	// The hook runs on one of Mirror's goroutines: it records, the test
	// goroutine checks.
	mirrorLake.store = &hookStore{Store: mirrorLake.store, match: func(k string) bool { return strings.HasPrefix(k, hour+"/") },
		before: func(string) {
			if cr, hookErr = l.Compact(ctx, topic, testStart); hookErr != nil {
				return
			}
			var m map[string][]storage.Entry
			m, hookErr = localFiles(dir, RawDir)
			seen = m[hour]
		}}
	res, err := mirrorLake.Mirror(ctx, dir, mirrorTables)
	if err != nil || hookErr != nil {
		t.Fatal(err, hookErr)
	}
	if len(cr.Removed) == 0 || res.Relisted == 0 {
		t.Fatalf("the compaction did not race the mirror: %+v, compaction %+v", res, cr)
	}
	if !sameFiles(seen, before[hour]) {
		t.Errorf("while the hour was being synced the mirror held %v, want the earlier listing %v", seen, before[hour])
	}
	checkMirror(t, l, dir)
	if got := rawRowCount(t, mustOpen(t, Options{Root: dir}), topic); got != int64(len(rows)+len(more)) {
		t.Errorf("the mirror holds %d raw rows, want %d", got, len(rows)+len(more))
	}
}

// tornStore's readers fail for good after half of a file whose key cut
// accepts.
type tornStore struct {
	storage.Store
	cut func(key string) bool
}

func (s *tornStore) Open(ctx context.Context, key string, size int64) (storage.ObjectReader, error) {
	r, err := s.Store.Open(ctx, key, size)
	if err != nil || !s.cut(key) {
		return r, err
	}
	return tornReader{r}, nil
}

type tornReader struct{ storage.ObjectReader }

var errTorn = errors.New("connection cut (test)")

func (r tornReader) ReadAt(p []byte, off int64) (int, error) {
	half := r.Size() / 2
	if off >= half {
		return 0, storage.NoRetry(errTorn)
	}
	if off+int64(len(p)) > half {
		n, _ := r.ObjectReader.ReadAt(p[:half-off], off)
		return n, storage.NoRetry(errTorn)
	}
	return r.ObjectReader.ReadAt(p, off)
}

// TestMirrorTornDownload: a download cut halfway fails the pass and leaves
// no part of the file, nor of its directory's new state, where a glob over
// the table sees it; the next pass completes.
func TestMirrorTornDownload(t *testing.T) { forEachStore(t, testMirrorTornDownload) }

func testMirrorTornDownload(t *testing.T, opts Options) {
	ctx := context.Background()
	l := mustOpen(t, opts)
	writeHours(t, l)
	dir := t.TempDir()
	if _, err := l.Mirror(ctx, dir, mirrorTables); err != nil {
		t.Fatal(err)
	}
	before, err := localFiles(dir, RawDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Compact(ctx, topic, testStart); err != nil {
		t.Fatal(err)
	}
	torn := mustOpen(t, opts)
	torn.store = &tornStore{Store: torn.store, cut: func(k string) bool { return strings.Contains(k, "-c") }}
	if _, err := torn.Mirror(ctx, dir, mirrorTables); !errors.Is(err, errTorn) {
		t.Fatalf("mirror with a torn download: %v, want %v", err, errTorn)
	}
	after, err := localFiles(dir, RawDir)
	if err != nil {
		t.Fatal(err)
	}
	for d, es := range after {
		if !sameFiles(es, before[d]) {
			t.Errorf("%s changed by a failed pass: %v, was %v", d, es, before[d])
		}
	}
	// Nothing but the mirror's own hidden directory holds anything else.
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == MirrorTmpDir {
			return fs.SkipDir
		}
		if err == nil && !d.IsDir() && !strings.HasSuffix(p, ".parquet") && d.Name() != MirrorLockFile && d.Name() != mirrorETags {
			t.Errorf("stray file %s", p)
		}
		return nil
	})
	if _, err := l.Mirror(ctx, dir, mirrorTables); err != nil {
		t.Fatal(err)
	}
	checkMirror(t, l, dir)
}

// TestMirrorSeesRewrite: on S3, a file rewritten at the same size within
// the same second (a curated table's file, rewritten each pane archive
// step) is seen as changed by its ETag.
func TestMirrorSeesRewrite(t *testing.T) {
	t.Run("gofakes3", func(t *testing.T) {
		testMirrorSeesRewrite(t, newS3FakeBackend(t, s3mem.New(s3mem.WithTimeSource(gofakes3.FixedTimeSource(testStart))), nil))
	})
	// The real server stamps real times: the two writes fall in one
	// second most of the time, and the ETag tells them apart either way.
	t.Run("weed", func(t *testing.T) { testMirrorSeesRewrite(t, newS3Weed(t)) })
}

func testMirrorSeesRewrite(t *testing.T, f *s3Server) {
	ctx := context.Background()
	l := mustOpen(t, f.options())
	key := WindowsDir + "/stream=s/window_date=2026-11-07/windows-00.parquet"
	dir := t.TempDir()
	for _, content := range []string{"version 1", "version 2"} {
		if _, err := l.store.Put(ctx, key, func(w io.Writer) error { _, err := io.WriteString(w, content); return err }); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Mirror(ctx, dir, []string{WindowsDir}); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(key))); err != nil || string(b) != content {
			t.Fatalf("the mirror holds %q (%v), the lake %q", b, err, content)
		}
	}
}
