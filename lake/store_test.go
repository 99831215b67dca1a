package lake

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/minio/minio-go/v7"
	"github.com/parquet-go/parquet-go"

	"reckon/internal/testing/s3test"
	"reckon/lake/storage"
)

const (
	testBucket = "reckon-lake"
	testPrefix = "lakes/test"
)

// s3Server is an S3 server a test lake lives on: gofakes3 with an
// in-memory backend behind an httptest server (newS3Fake), or the real
// SeaweedFS server of internal/testing/s3test (newS3Weed), holding the
// bucket testBucket. A lake on it lives under base/testPrefix.
type s3Server struct {
	backend *s3mem.Backend // nil on the real server
	url     string
	bucket  string
	// base is the bucket-relative prefix every key of this test is under:
	// "" on a fake (one per test), the test's own on the shared real server.
	base        string
	key, secret string
	// received counts response body bytes of GET requests.
	received atomic.Int64
	gets     atomic.Int64
}

func newS3Fake(t testing.TB) *s3Server { return newS3FakeWrapped(t, nil) }

// newS3FakeWrapped is newS3Fake with the S3 handler wrapped by wrap (nil:
// not wrapped), to interfere with requests.
func newS3FakeWrapped(t testing.TB, wrap func(http.Handler) http.Handler) *s3Server {
	t.Helper()
	return newS3FakeBackend(t, s3mem.New(), wrap)
}

func newS3FakeBackend(t testing.TB, backend *s3mem.Backend, wrap func(http.Handler) http.Handler) *s3Server {
	t.Helper()
	f := &s3Server{backend: backend, bucket: testBucket, key: "reckon", secret: "fake-secret"}
	if err := f.backend.CreateBucket(testBucket); err != nil {
		t.Fatal(err)
	}
	var h http.Handler = gofakes3.New(f.backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// newS3Weed is a lake's place on the real S3 server (skipped without
// ./bin/weed unless RECKON_TEST_REQUIRE_S3 is set): a prefix of the
// test's own in the shared bucket.
func newS3Weed(t testing.TB) *s3Server {
	t.Helper()
	srv := s3test.Server(t)
	return &s3Server{url: srv.Endpoint, bucket: s3test.Bucket, base: s3test.Prefix(t) + "/",
		key: srv.AccessKeyID, secret: srv.SecretAccessKey}
}

// newS3WeedBucket is newS3Weed in a bucket of the test's own.
func newS3WeedBucket(t testing.TB) *s3Server {
	t.Helper()
	f := newS3Weed(t)
	f.bucket, f.base = s3test.NewBucket(t), ""
	return f
}

// options returns Options for a lake under s3://bucket/base+testPrefix on f.
func (f *s3Server) options() Options {
	return Options{Root: storage.S3Scheme + f.bucket + "/" + f.base + testPrefix, S3: storage.S3Options{
		Endpoint: f.url, Region: "us-east-1", AccessKeyID: f.key, SecretAccessKey: f.secret,
		Transport: countingTransport{f},
	}}
}

// putObject writes key (relative to base) straight into the bucket.
func (f *s3Server) putObject(t testing.TB, key string, data []byte) {
	t.Helper()
	if f.backend != nil {
		if _, err := f.backend.PutObject(f.bucket, f.base+key, nil, bytes.NewReader(data), int64(len(data)), nil); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := s3test.Client(t).PutObject(t.Context(), f.bucket, f.base+key, bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}

// bucketKeys lists every key under base, relative to it.
func (f *s3Server) bucketKeys(t testing.TB) []string {
	t.Helper()
	var keys []string
	if f.backend != nil {
		list, err := f.backend.ListBucket(f.bucket, &gofakes3.Prefix{}, gofakes3.ListBucketPage{})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Contents {
			keys = append(keys, o.Key)
		}
		return keys
	}
	for o := range s3test.Client(t).ListObjects(t.Context(), f.bucket, minio.ListObjectsOptions{Prefix: f.base, Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		keys = append(keys, strings.TrimPrefix(o.Key, f.base))
	}
	return keys
}

// removeBucket deletes the bucket with everything in it.
func (f *s3Server) removeBucket(t testing.TB) {
	t.Helper()
	if f.backend != nil {
		if err := f.backend.ForceDeleteBucket(f.bucket); err != nil {
			t.Fatal(err)
		}
		return
	}
	c := s3test.Client(t)
	for _, k := range f.bucketKeys(t) {
		if err := c.RemoveObject(t.Context(), f.bucket, k, minio.RemoveObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.RemoveBucket(t.Context(), f.bucket); err != nil {
		t.Fatal(err)
	}
}

// countingTransport counts what GETs return.
type countingTransport struct{ f *s3Server }

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "" && r.URL.Query().Get("uploads") == "" {
		c.f.gets.Add(1)
		resp.Body = &countingBody{resp.Body, &c.f.received}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// forEachStore runs fn as three subtests: on a lake in a temporary
// directory, on one in an in-process S3 (gofakes3) and on one on a real
// S3 server (SeaweedFS, skipped without ./bin/weed unless
// RECKON_TEST_REQUIRE_S3 is set). The lake suite runs through it, so every
// storage passes the same tests.
func forEachStore(t *testing.T, fn func(t *testing.T, opts Options)) {
	t.Run("local", func(t *testing.T) { fn(t, Options{Root: t.TempDir()}) })
	t.Run("s3", func(t *testing.T) { fn(t, newS3Fake(t).options()) })
	t.Run("s3-weed", func(t *testing.T) { fn(t, newS3Weed(t).options()) })
}

// forEachS3 runs fn on the in-process fake and on the real S3 server.
func forEachS3(t *testing.T, fn func(t *testing.T, f *s3Server)) {
	t.Run("gofakes3", func(t *testing.T) { fn(t, newS3Fake(t)) })
	t.Run("weed", func(t *testing.T) { fn(t, newS3Weed(t)) })
}

func mustOpen(t testing.TB, opts Options) *Lake {
	t.Helper()
	l, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// listFiles returns the key of every file in the lake, hidden ones
// included, sorted.
func listFiles(t *testing.T, l *Lake) []string {
	t.Helper()
	var out []string
	if err := l.store.Walk(context.Background(), "", func(key string, _ storage.Entry) error {
		out = append(out, key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// dirNames returns every name in dir, hidden ones included.
func dirNames(t *testing.T, l *Lake, dir string) []string {
	t.Helper()
	es, err := l.store.List(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name)
	}
	return out
}

func openParquet(t *testing.T, l *Lake, key string) *parquet.File {
	t.Helper()
	f, pf, err := l.openParquet(context.Background(), key, -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return pf
}

func readParquet[T any](t *testing.T, l *Lake, key string) []T {
	t.Helper()
	rows, err := readRows[T](context.Background(), l, key, -1)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func putFile(t *testing.T, l *Lake, key string, data []byte) {
	t.Helper()
	if _, err := l.store.Put(context.Background(), key, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// addDebris leaves what a crashed write leaves in dir: a hidden temporary
// file, or on S3 an unfinished multipart upload.
func addDebris(t *testing.T, l *Lake, dir, name string) {
	t.Helper()
	switch s := l.base().(type) {
	case *storage.Local:
		putFile(t, l, storage.JoinKey(dir, "."+name+".123.tmp"), []byte("debris"))
	case *storage.S3:
		core, bucket := s.Core()
		if _, err := core.NewMultipartUpload(context.Background(), bucket, s.Object(storage.JoinKey(dir, name)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// uploads lists the unfinished multipart uploads of an S3 lake.
func uploads(t *testing.T, l *Lake) []string {
	t.Helper()
	core, bucket := l.base().(*storage.S3).Core()
	res, err := core.ListMultipartUploads(context.Background(), bucket, l.base().(*storage.S3).DirPrefix(""), "", "", "", 1000)
	if code := minio.ToErrorResponse(err).Code; code == "NoSuchKey" || code == "NoSuchUpload" || code == "NotFound" {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, u := range res.Uploads {
		out = append(out, u.Key)
	}
	return out
}

// TestS3PutIsAtomic: a file is not visible under its key, nor anywhere in
// its directory, until its write completed; a write that fails, in a single
// PUT or in a multipart upload, leaves nothing (and an earlier version of
// the file untouched).
func TestS3PutIsAtomic(t *testing.T) { forEachS3(t, testS3PutIsAtomic) }

func testS3PutIsAtomic(t *testing.T, f *s3Server) {
	opts := f.options()
	opts.S3.PartSize = storage.MinPartSize
	l := mustOpen(t, opts)
	ctx := context.Background()
	dir, key := "reports/big", "reports/big/file.bin"
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB

	notVisible := func(when string) {
		t.Helper()
		if names := dirNames(t, l, dir); len(names) != 0 {
			t.Errorf("%s: listed %v", when, names)
		}
		if _, err := l.store.ReadFile(ctx, key); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: read: %v, want not found", when, err)
		}
	}
	// 12 MiB: two 5 MiB parts are sent while the write runs, the third and
	// the completion after it returns.
	var midway bool
	size, err := l.store.Put(ctx, key, func(w io.Writer) error {
		for i := 0; i < 12; i++ {
			if _, err := w.Write(chunk); err != nil {
				return err
			}
			if i == 10 {
				if len(uploads(t, l)) != 1 {
					t.Error("no multipart upload in flight at 11 MiB")
				}
				notVisible("during the write")
				midway = true
			}
		}
		return nil
	})
	if err != nil || size != 12<<20 || !midway {
		t.Fatalf("put: size %d, err %v, checked midway %v", size, err, midway)
	}
	got, err := l.store.ReadFile(ctx, key)
	if err != nil || !bytes.Equal(got, bytes.Repeat(chunk, 12)) {
		t.Fatalf("read back %d bytes, err %v", len(got), err)
	}
	if u := uploads(t, l); len(u) != 0 {
		t.Errorf("uploads left after success: %v", u)
	}

	boom := errors.New("encoder failed")
	for _, n := range []int{1, 7} { // single PUT never sent; multipart aborted
		other := storage.JoinKey(dir, fmt.Sprintf("failed-%d.bin", n))
		_, err := l.store.Put(ctx, other, func(w io.Writer) error {
			for i := 0; i < n; i++ {
				w.Write(chunk)
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Errorf("failed write of %d MiB: err %v", n, err)
		}
		if names := dirNames(t, l, dir); !slices.Equal(names, []string{"file.bin"}) {
			t.Errorf("after a failed write of %d MiB: %v", n, names)
		}
		if u := uploads(t, l); len(u) != 0 {
			t.Errorf("failed write of %d MiB left uploads %v", n, u)
		}
	}
	// A failed rewrite keeps the previous content.
	if _, err := l.store.Put(ctx, key, func(w io.Writer) error { w.Write([]byte("new")); return boom }); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if got, _ := l.store.ReadFile(ctx, key); len(got) != 12<<20 {
		t.Errorf("failed rewrite changed the file to %d bytes", len(got))
	}

}

// TestS3ReadsOnlyNeededChunks: a query fetches the footer and the column
// chunks it decodes, not whole files: the data column is never fetched and
// a key filter skips the row groups its statistics exclude.
func TestS3ReadsOnlyNeededChunks(t *testing.T) { forEachS3(t, testS3ReadsOnlyNeededChunks) }

func testS3ReadsOnlyNeededChunks(t *testing.T, fake *s3Server) {
	opts := fake.options()
	opts.RowGroupRows = 500
	l := mustOpen(t, opts)
	// A wide, incompressible data column (~0.5 MB per row group) that an
	// aggregation never decodes.
	rows := genRows(8000, 1, 20, 0, 0, 32)
	rng := rand.New(rand.NewPCG(32, 1))
	for i := range rows {
		b := make([]byte, 1024)
		binaryRand(rng, b)
		rows[i].Data = `{"blob":"` + hex.EncodeToString(b) + `"}`
	}
	res, err := l.WriteRaw(t.Context(), topic, 0, 0, 7999, rows)
	if err != nil {
		t.Fatal(err)
	}
	fileSize := res.Files[0].Bytes
	ctx := context.Background()
	q := Query{Topic: topic, From: testStart, To: testStart.Add(time.Hour)}

	// What opening the file costs: its footer.
	fake.received.Store(0)
	f, _, err := l.openParquet(ctx, res.Files[0].Path, fileSize)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	footer := fake.received.Load()

	fake.received.Store(0)
	aggs, all, err := l.Aggregate(ctx, q, time.Hour)
	if err != nil || all.Rows != 8000 || all.RowGroups != 16 {
		t.Fatalf("aggregate: %+v, %v", all, err)
	}
	checkAggs(t, aggs, rows, time.Hour)
	allBytes := fake.received.Load()
	// The data column is ~95% of the file; the others and the footer fit
	// in a tenth.
	if allBytes >= fileSize/10 {
		t.Errorf("aggregate fetched %d of the file's %d bytes: the data column should not be read", allBytes, fileSize)
	}

	fake.received.Store(0)
	fake.gets.Store(0)
	q.Keys = []string{"sensor-07"}
	_, one, err := l.Aggregate(ctx, q, time.Hour)
	if err != nil || one.RowGroupsPruned < 12 || one.RowGroups+one.RowGroupsPruned != 16 {
		t.Fatalf("keyed aggregate: %+v, %v", one, err)
	}
	// Per decoded row group, the keyed query fetches what the full one
	// did; pruned row groups cost nothing.
	perRG := float64(allBytes-footer) / float64(all.RowGroups)
	if got := float64(fake.received.Load() - footer); got > 1.25*perRG*float64(one.RowGroups) {
		t.Errorf("keyed query fetched %.0f bytes beyond the footer for %d row groups; a row group costs %.0f", got, one.RowGroups, perRG)
	}
	// The footer, then one GET per decoded row group: its wanted chunks
	// are close enough to coalesce.
	footerGets := int64(1)
	if footer > storage.TailSize {
		footerGets = 2
	}
	if g := fake.gets.Load(); g != footerGets+int64(one.RowGroups) {
		t.Errorf("%d GETs for the footer (%d bytes) and %d row groups", g, footer, one.RowGroups)
	}
}

// TestS3Prefix: the lake lives under its prefix; other keys of the bucket
// are not part of it.
func TestS3Prefix(t *testing.T) { forEachS3(t, testS3Prefix) }

func testS3Prefix(t *testing.T, fake *s3Server) {
	l := mustOpen(t, fake.options())
	fake.putObject(t, "lakes/testother/raw/topic=x/event_date=2026-11-07/event_hour=00/x-0-0-0.parquet", []byte("x"))
	if _, err := l.WriteRaw(t.Context(), topic, 0, 0, 9, genRows(10, 1, 1, 0, 0, 33)); err != nil {
		t.Fatal(err)
	}
	keys := fake.bucketKeys(t)
	want := "lakes/test/raw/topic=m8-suhu-kejadian/event_date=2026-11-07/event_hour=00/m8-suhu-kejadian-0-0-9.parquet"
	if !slices.Contains(keys, want) {
		t.Errorf("bucket keys %v, want %s", keys, want)
	}
	if files := listFiles(t, l); len(files) != 1 || files[0] != strings.TrimPrefix(want, testPrefix+"/") {
		t.Errorf("lake files = %v", files)
	}
	inv, err := l.List(t.Context())
	if err != nil || len(inv.Tables) != 1 || inv.Tables[0].Files != 1 || inv.Tables[0].Rows != 10 {
		t.Errorf("inventory %+v, %v", inv, err)
	}
}

func TestOptionsValidate(t *testing.T) {
	good := Options{Root: "s3://reckon-lake/a/b", S3: storage.S3Options{Endpoint: "https://minio.internal:9000"}}
	if err := good.Validate(); err != nil {
		t.Errorf("good options: %v", err)
	}
	if err := (Options{Root: "s3://reckon-lake", S3: storage.S3Options{Region: "eu-central-1"}}).Validate(); err != nil {
		t.Errorf("AWS by region: %v", err)
	}
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{Root: "s3://", S3: storage.S3Options{Region: "x"}}, "bucket"},
		{Options{Root: "s3://Upper_Case/x", S3: storage.S3Options{Region: "x"}}, "bucket"},
		{Options{Root: "s3://reckon-lake/../x", S3: storage.S3Options{Region: "x"}}, "prefix"},
		{Options{Root: "s3://reckon-lake"}, "Endpoint or S3.Region"},
		{Options{Root: "s3://reckon-lake", S3: storage.S3Options{Endpoint: "minio:9000"}}, "not an http(s)"},
		{Options{Root: "s3://reckon-lake", S3: storage.S3Options{Endpoint: "ftp://minio"}}, "not an http(s)"},
		{Options{Root: "s3://reckon-lake", S3: storage.S3Options{Endpoint: "https://minio/path"}}, "not an http(s)"},
		{Options{Root: "s3://reckon-lake", S3: storage.S3Options{Region: "x", AccessKeyID: "k"}}, "go together"},
		{Options{Root: "s3://reckon-lake", S3: storage.S3Options{Region: "x", SessionToken: "t"}}, "SessionToken"},
		{Options{Root: "s3://reckon-lake", S3: storage.S3Options{Region: "x", PartSize: 1 << 20}}, "PartSize"},
	} {
		err := c.opts.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.opts.Root, err, c.want)
		}
		if _, err := Open(c.opts); err == nil {
			t.Errorf("%s: Open accepted bad options", c.opts.Root)
		}
	}
}

func TestS3OptionsDoNotPrintSecrets(t *testing.T) {
	o := Options{Root: "s3://reckon-lake", S3: storage.S3Options{Region: "x", AccessKeyID: "AKIA-visible", SecretAccessKey: "wJalr-secret", SessionToken: "token-secret"}}
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		for _, v := range []any{o, &o, o.S3} {
			s := fmt.Sprintf(f, v)
			if strings.Contains(s, "secret") {
				t.Errorf("%s of %T prints a secret: %s", f, v, s)
			}
			if !strings.Contains(s, "AKIA-visible") {
				t.Errorf("%s of %T hides the access key id: %s", f, v, s)
			}
		}
	}
}

func TestValidKey(t *testing.T) {
	for _, k := range []string{"a", "zreports/close_date=2026-11-07/x.parquet", "_progress/x"} {
		if !storage.ValidKey(k) {
			t.Errorf("%q refused", k)
		}
	}
	for _, k := range []string{"", "/a", "a/", "a//b", "../a", "a/../b", "a/./b", ".", `a\b`} {
		if storage.ValidKey(k) {
			t.Errorf("%q accepted", k)
		}
	}
}

// TestFilesAPI: WriteFile, ReadFile and Files, for tables kept in the lake
// by other packages (Z-reports).
func TestFilesAPI(t *testing.T) {
	forEachStore(t, func(t *testing.T, opts Options) {
		l := mustOpen(t, opts)
		ctx := context.Background()
		if names, err := l.Files(ctx, "zreports/close_date=2026-11-07"); err != nil || len(names) != 0 {
			t.Fatalf("missing dir: %v, %v", names, err)
		}
		for _, n := range []string{"b-v1.parquet", "a-v2.parquet"} {
			if _, err := l.WriteFile(ctx, "zreports/close_date=2026-11-07/"+n, func(w io.Writer) error {
				_, err := io.WriteString(w, n)
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := l.WriteFile(ctx, "zreports/close_date=2026-11-07/c.parquet", func(io.Writer) error { return io.ErrUnexpectedEOF }); err == nil {
			t.Error("failed write reported success")
		}
		names, err := l.Files(ctx, "zreports/close_date=2026-11-07")
		if err != nil || !slices.Equal(names, []string{"a-v2.parquet", "b-v1.parquet"}) {
			t.Errorf("files = %v, %v", names, err)
		}
		if b, err := l.ReadFile(ctx, "zreports/close_date=2026-11-07/a-v2.parquet"); err != nil || string(b) != "a-v2.parquet" {
			t.Errorf("read %q, %v", b, err)
		}
		if _, err := l.ReadFile(ctx, "zreports/none"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("missing file: %v", err)
		}
		for _, bad := range []string{"../x", "/etc/passwd", ""} {
			if _, err := l.WriteFile(ctx, bad, func(io.Writer) error { return nil }); !errors.Is(err, ErrBadName) {
				t.Errorf("WriteFile(%q): %v", bad, err)
			}
		}
	})
}
