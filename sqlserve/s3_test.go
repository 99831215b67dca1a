//go:build duckdb_arrow

package sqlserve

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/minio/minio-go/v7"
	"github.com/parquet-go/parquet-go"

	"reckon/internal/config"
	"reckon/internal/testing/s3test"
	"reckon/lake"
)

const (
	s3Bucket = "reckon-lake"
	s3Prefix = "prod/lake"
)

// s3Lake is the test lake copied into an S3 bucket: an in-process fake
// (gofakes3), as the lake's own S3 tests build one (lake/store_test.go),
// or the real S3 server of internal/testing/s3test (SeaweedFS).
type s3Lake struct {
	*testLake
	url, bucket, prefix string
	key, secret         string
	cacheDir            string
	// remove deletes a key (relative to prefix) in the bucket.
	remove func(t *testing.T, key string)
}

// forEachS3 runs fn on the test lake copied into the fake and into the
// real S3 server (skipped without ./bin/weed unless RECKON_TEST_REQUIRE_S3).
func forEachS3(t *testing.T, fn func(t *testing.T, s *s3Lake)) {
	t.Run("gofakes3", func(t *testing.T) { fn(t, s3Copy(t, buildLake(t))) })
	t.Run("weed", func(t *testing.T) { fn(t, s3CopyWeed(t, buildLake(t))) })
}

// walkLake calls put for every file of tl's directory, by its key.
func walkLake(t *testing.T, tl *testLake, put func(key string, data []byte) error) {
	t.Helper()
	err := filepath.WalkDir(tl.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(tl.root, p)
		return put(filepath.ToSlash(rel), data)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// s3Copy uploads every file of tl's directory into a fake bucket.
func s3Copy(t *testing.T, tl *testLake) *s3Lake {
	t.Helper()
	b := s3mem.New()
	if err := b.CreateBucket(s3Bucket); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(b, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	t.Cleanup(srv.Close)
	walkLake(t, tl, func(key string, data []byte) error {
		meta := map[string]string{"Last-Modified": time.Now().UTC().Format(http.TimeFormat)} // as gofakes3's PUT sets it
		_, err := b.PutObject(s3Bucket, s3Prefix+"/"+key, meta, bytes.NewReader(data), int64(len(data)), nil)
		return err
	})
	return &s3Lake{testLake: tl, url: srv.URL, bucket: s3Bucket, prefix: s3Prefix, key: "reckon", secret: "fake-secret",
		cacheDir: t.TempDir(), remove: func(t *testing.T, key string) {
			if _, err := b.DeleteObject(s3Bucket, s3Prefix+"/"+key); err != nil {
				t.Fatal(err)
			}
		}}
}

// s3CopyWeed uploads every file of tl's directory to the real S3 server,
// under a prefix of the test's own.
func s3CopyWeed(t *testing.T, tl *testLake) *s3Lake {
	t.Helper()
	srv, c := s3test.Server(t), s3test.Client(t)
	prefix := s3test.Prefix(t) + "/" + s3Prefix
	walkLake(t, tl, func(key string, data []byte) error {
		_, err := c.PutObject(t.Context(), s3test.Bucket, prefix+"/"+key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
		return err
	})
	return &s3Lake{testLake: tl, url: srv.Endpoint, bucket: s3test.Bucket, prefix: prefix,
		key: srv.AccessKeyID, secret: srv.SecretAccessKey, cacheDir: t.TempDir(),
		remove: func(t *testing.T, key string) {
			if err := c.RemoveObject(t.Context(), s3test.Bucket, prefix+"/"+key, minio.RemoveObjectOptions{}); err != nil {
				t.Fatal(err)
			}
		}}
}

// uri is the lake's root, s3://bucket/prefix.
func (s *s3Lake) uri() string { return "s3://" + s.bucket + "/" + s.prefix }

// kvs are the configuration that points reckon-sql at the bucket.
func (s *s3Lake) kvs() []string {
	return []string{
		"lake.root=" + s.uri(), "lake.s3.endpoint=" + s.url, "lake.s3.region=us-east-1",
		"lake.s3.access_key_id=" + s.key, "lake.s3.secret_access_key=" + s.secret, "lake.s3.allow_plaintext_credentials=true",
		"sql.cache_dir=" + s.cacheDir,
	}
}

// sets are kvs as --set flags.
func (s *s3Lake) sets() []string {
	var out []string
	for _, kv := range s.kvs() {
		out = append(out, "--set", kv)
	}
	return out
}

// lake opens the bucket as reckon's lake.
func (s *s3Lake) lake(t *testing.T) *lake.Lake {
	t.Helper()
	cfg, err := config.Load("", nil, s.kvs())
	if err != nil {
		t.Fatal(err)
	}
	opts, err := s3LakeOptions(cfg.Lake)
	if err != nil {
		t.Fatal(err)
	}
	l, err := lake.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// mirror returns the LakeMirror reckon-sql uses for the bucket.
func (s *s3Lake) mirror(t *testing.T) *LakeMirror {
	t.Helper()
	cfg, err := config.Load("", nil, s.kvs())
	if err != nil {
		t.Fatal(err)
	}
	m, err := OpenLakeMirror(cfg, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// s3Queries are compared between the lake on a directory and on S3: every
// view, ordered.
var s3Queries = []string{
	`SELECT count(*), count(DISTINCT event_id), round(sum(value), 6) FROM raw`,
	`SELECT * FROM events ORDER BY topic, event_id`,
	`SELECT * FROM windows ORDER BY stream, key, window_start`,
	`SELECT * FROM corrections ORDER BY stream, key, window_start, version`,
	`SELECT * FROM panes ORDER BY stream, key, window_start, version, emitted_at`,
	`SELECT * FROM truth ORDER BY stream, key, window_start`,
	`SELECT * FROM zreports ORDER BY fiscal_drive, shift`,
	`SELECT * FROM zreport_versions ORDER BY fiscal_drive, shift, version`,
}

// TestS3LakeQuery: `reckon sql` on an S3 lake answers every view as it
// does on the same lake in a directory, through a mirror in sql.cache_dir
// holding the tables' files and nothing of the mirror's own work; a second
// run downloads nothing.
func TestS3LakeQuery(t *testing.T) { forEachS3(t, testS3LakeQuery) }

func testS3LakeQuery(t *testing.T, s *s3Lake) {
	run := func(q string, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := Main(context.Background(), append(append([]string{"sql", "--format", "csv"}, args...), q), strings.NewReader(""), &out, &errb, nil); code != 0 {
			t.Fatalf("%s: exit %d: %s", q, code, errb.String())
		}
		return out.String()
	}
	for _, q := range s3Queries {
		want := run(q, "--set", "lake.root="+s.root)
		got := run(q, s.sets()...)
		if got != want || strings.Count(want, "\n") < 2 {
			t.Errorf("%s:\non S3\n%s\nin a directory\n%s", q, got, want)
		}
	}
	m := s.mirror(t)
	if !strings.HasPrefix(m.Dir(), s.cacheDir) {
		t.Errorf("mirror in %s, want under sql.cache_dir %s", m.Dir(), s.cacheDir)
	}
	res, err := m.Sync(context.Background())
	if err != nil || res.Downloaded != 0 || res.Files == 0 {
		t.Errorf("a pass after the queries: %+v, %v; want nothing to download", res, err)
	}
	if got, want := parquetFiles(t, m.Dir()), parquetFiles(t, s.root); !slices.Equal(got, want) {
		t.Errorf("the mirror holds\n%v\nthe lake\n%v", got, want)
	}
}

// parquetFiles lists the visible .parquet files under root, relative.
func parquetFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".parquet") {
			rel, _ := filepath.Rel(root, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(out)
	return out
}

// TestS3LakeMirrorFollowsTheBucket: a server over an S3 lake keeps
// answering the same counts after a compaction on the bucket and a sync,
// with no compaction input left in the mirror; a file deleted in the
// bucket disappears from the mirror and from the views.
func TestS3LakeMirrorFollowsTheBucket(t *testing.T) { forEachS3(t, testS3LakeMirrorFollowsTheBucket) }

func testS3LakeMirrorFollowsTheBucket(t *testing.T, s *s3Lake) {
	ctx := context.Background()
	m := s.mirror(t)
	if _, err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	eng := openEngine(t, m.Dir())
	c := newClient(t, startServer(t, eng, ServeOptions{}))
	const counts = `SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM raw), (SELECT count(*) FROM windows), (SELECT count(*) FROM zreport_versions)`
	before := mustRead(t, c, counts).rows[0]

	bucket := s.lake(t)
	var removed []string
	for h := range 3 {
		res, err := bucket.Compact(ctx, testTopic, t0.Add(time.Duration(h)*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		removed = append(removed, res.Removed...)
	}
	if len(removed) == 0 {
		t.Fatal("the compaction removed nothing")
	}
	res, err := m.Sync(ctx)
	if err != nil || res.Removed != len(removed) {
		t.Fatalf("sync after compacting: %+v, %v; the compaction removed %d files", res, err, len(removed))
	}
	for _, k := range removed {
		if _, err := os.Stat(filepath.Join(m.Dir(), filepath.FromSlash(k))); err == nil {
			t.Errorf("compaction input %s is still in the mirror", k)
		}
	}
	after := mustRead(t, c, counts).rows[0]
	if after[0] != before[0] || after[2] != before[2] || after[3] != before[3] {
		t.Errorf("counts (events, raw, windows, zreport_versions) %v before the compaction, %v after", before, after)
	}

	// A Z-report version file deleted in the bucket.
	zs := parquetFiles(t, filepath.Join(m.Dir(), "zreports"))
	if len(zs) == 0 {
		t.Fatal("no Z-report file in the mirror")
	}
	gone := filepath.Join(m.Dir(), "zreports", filepath.FromSlash(zs[0]))
	want, _ := strconv.Atoi(before[3])
	want -= int(parquetRows(t, gone))
	s.remove(t, "zreports/"+zs[0])
	if res, err := m.Sync(ctx); err != nil || res.Removed != 1 {
		t.Fatalf("sync after a delete: %+v, %v", res, err)
	}
	if _, err := os.Stat(gone); err == nil {
		t.Errorf("zreports/%s deleted in the bucket is still in the mirror", zs[0])
	}
	if got := mustRead(t, c, `SELECT count(*) FROM zreport_versions`).rows[0][0]; got != strconv.Itoa(want) {
		t.Errorf("zreport_versions after the delete: %s rows, want %d", got, want)
	}
}

// parquetRows is the number of rows of a parquet file.
func parquetRows(t *testing.T, p string) int64 {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	return pf.NumRows()
}

// TestServeS3Lake: `reckon-sql serve` on an S3 lake syncs its mirror
// before it says it serves, and again every sql.sync_interval: a file
// deleted in the bucket leaves the views without a restart.
func TestServeS3Lake(t *testing.T) { forEachS3(t, testServeS3Lake) }

func testServeS3Lake(t *testing.T, s *s3Lake) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		args := append([]string{"serve", "--set", "sql.listen=127.0.0.1:0", "--set", "sql.sync_interval=100ms"}, s.sets()...)
		done <- Main(ctx, args, strings.NewReader(""), pw, io.Discard, nil)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no address line: %v", err)
	}
	go io.Copy(io.Discard, pr)
	_, rest, ok := strings.Cut(line, "grpc://")
	if !ok || !strings.Contains(line, s.uri()+" mirrored in "+s.cacheDir) {
		t.Fatalf("address line %q", line)
	}
	c := newClient(t, strings.Fields(rest)[0])
	// Ready means synced: the first query sees the whole lake.
	if n := mustRead(t, c, "SELECT count(*) FROM events").rows[0][0]; n != strconv.Itoa(s.events) {
		t.Errorf("events through the served endpoint: %s, want %d", n, s.events)
	}
	before := mustRead(t, c, "SELECT count(*) FROM zreport_versions").rows[0][0]
	zs := parquetFiles(t, filepath.Join(s.root, "zreports"))
	s.remove(t, "zreports/"+zs[0])
	want, _ := strconv.Atoi(before)
	want -= int(parquetRows(t, filepath.Join(s.root, "zreports", filepath.FromSlash(zs[0]))))
	for deadline := time.Now().Add(30 * time.Second); ; {
		got := mustRead(t, c, "SELECT count(*) FROM zreport_versions").rows[0][0]
		if got == strconv.Itoa(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("zreport_versions still %s rows 30s after a file was deleted in the bucket; want %d", got, want)
		}
		time.Sleep(50 * time.Millisecond) // polling the condition
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("serve exited %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
}
