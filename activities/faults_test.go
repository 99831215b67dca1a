package activities_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/minio/minio-go/v7"
	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"reckon/activities"
	"reckon/internal/config"
	"reckon/internal/kafkaconn"
	"reckon/internal/testing/s3test"
	"reckon/internal/testing/testenv"
	"reckon/lake"
	"reckon/lake/storage"
	"reckon/lake/storage/errorfs"
)

// The archive activity under injected lake storage faults
// (docs/adr/0022-lake-fault-injection.md): real Kafka reads (kfake), a lake
// whose storage fails, and the worker's error classification
// (activities.LakeErrors) between the activity and its caller.

// activityEnv returns an activity environment running a with the batch
// worker's lake error classification.
func activityEnv(a any) *testsuite.TestActivityEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&activities.LakeErrors{}}})
	return env
}

// archiveFixture produces n payments to partition 0 of the raw topic,
// every ninth one not JSON (rejected), and returns the configuration.
func archiveFixture(t *testing.T, n int) *config.Config {
	t.Helper()
	_, brokers := testenv.Kafka(t, 1, "", rawTopic)
	cfg, err := config.Load("", nil, []string{"kafka.brokers=" + brokers[0], "lake.root=" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "test"), kgo.ProducerLinger(0))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := range n {
		v := fmt.Sprintf(`{"event_id":%q,"event_type":"payment.checkout.completed","occurred_at":%q,"data":{"user_id":"u%d","amount":%d,"currency":"IDR","channel":"web"}}`,
			uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "fault%d", i)).String(), t0.Add(time.Duration(i)*time.Second).Format(time.RFC3339Nano), i%7, 1000+i)
		if i%9 == 4 {
			v = "{not json"
		}
		recs = append(recs, &kgo.Record{Topic: rawTopic, Partition: 0, Value: []byte(v), Timestamp: t0.Add(time.Duration(i) * time.Second)})
	}
	if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// testStore is a lake for the fault tests: a directory or an in-memory
// S3, with a way to read every file it holds, bypassing the lake.
type testStore struct {
	opts  lake.Options
	files func(t *testing.T) map[string][]byte // key → content
}

// testStores returns makers of a directory lake at dir, an S3 lake on an
// in-process fake and one on the real S3 server (internal/testing/s3test:
// skipped without ./bin/weed unless RECKON_TEST_REQUIRE_S3 is set).
func testStores(t *testing.T, dir string) map[string]func(t *testing.T) testStore {
	t.Helper()
	return map[string]func(t *testing.T) testStore{
		"local": func(t *testing.T) testStore {
			return testStore{opts: lake.Options{Root: dir}, files: func(t *testing.T) map[string][]byte { return dirFiles(t, dir) }}
		},
		"s3": fakeS3Store,
		"s3-weed": func(t *testing.T) testStore {
			srv, prefix := s3test.Server(t), s3test.Prefix(t)
			return testStore{opts: lake.Options{Root: "s3://" + s3test.Bucket + "/" + prefix, S3: storage.S3Options{
				Endpoint: srv.Endpoint, Region: "us-east-1", AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey}},
				files: func(t *testing.T) map[string][]byte {
					c := s3test.Client(t)
					out := map[string][]byte{}
					for o := range c.ListObjects(t.Context(), s3test.Bucket, minio.ListObjectsOptions{Prefix: prefix + "/", Recursive: true}) {
						if o.Err != nil {
							t.Fatal(o.Err)
						}
						obj, err := c.GetObject(t.Context(), s3test.Bucket, o.Key, minio.GetObjectOptions{})
						if err != nil {
							t.Fatal(err)
						}
						b, err := io.ReadAll(obj)
						obj.Close()
						if err != nil {
							t.Fatal(err)
						}
						out[strings.TrimPrefix(o.Key, prefix+"/")] = b
					}
					return out
				}}
		},
	}
}

// fakeS3Store is a lake on an in-process S3 (gofakes3).
func fakeS3Store(t *testing.T) testStore {
	backend := s3mem.New()
	if err := backend.CreateBucket("reckon-lake"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	t.Cleanup(srv.Close)
	return testStore{opts: lake.Options{Root: "s3://reckon-lake/prod", S3: storage.S3Options{
		Endpoint: srv.URL, Region: "us-east-1", AccessKeyID: "reckon", SecretAccessKey: "fake-secret"}},
		files: func(t *testing.T) map[string][]byte {
			list, err := backend.ListBucket("reckon-lake", &gofakes3.Prefix{}, gofakes3.ListBucketPage{})
			if err != nil {
				t.Fatal(err)
			}
			out := map[string][]byte{}
			for _, o := range list.Contents {
				obj, err := backend.GetObject("reckon-lake", o.Key, nil)
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(obj.Contents)
				obj.Contents.Close()
				if err != nil {
					t.Fatal(err)
				}
				out[strings.TrimPrefix(o.Key, "prod/")] = b
			}
			return out
		}}
}

// lakeOffsets counts every offset of partition 0 in the raw and rejected
// files, read directly, and fails on a file that does not read whole or a
// temporary file left behind.
func lakeOffsets(t *testing.T, files map[string][]byte) map[int64]int {
	t.Helper()
	seen := map[int64]int{}
	for key, b := range files {
		if !strings.HasSuffix(key, ".parquet") {
			continue
		}
		if strings.HasPrefix(path.Base(key), ".") {
			t.Errorf("temporary file left behind: %s", key)
			continue
		}
		switch {
		case strings.HasPrefix(key, lake.RawDir+"/"):
			rows, err := parquet.Read[lake.RawRow](bytes.NewReader(b), int64(len(b)))
			if err != nil {
				t.Errorf("visible file does not read: %s: %v", key, err)
			}
			for _, r := range rows {
				seen[r.KafkaOffset]++
			}
		case strings.HasPrefix(key, lake.RejectedDir+"/"):
			rows, err := parquet.Read[lake.RejectedRow](bytes.NewReader(b), int64(len(b)))
			if err != nil {
				t.Errorf("visible file does not read: %s: %v", key, err)
			}
			for _, r := range rows {
				seen[r.KafkaOffset]++
			}
		}
	}
	return seen
}

// retrier runs activities as a retry policy would: each until it
// succeeds, at most bound times, counting the attempts.
type retrier struct {
	t                *testing.T
	env              *testsuite.TestActivityEnvironment
	bound            int
	attempts, failed int
}

// call runs fn until it succeeds and decodes its result into out. An
// attempt failed non-retryably, one whose error does not name the
// injected fault, or running out of attempts fails the test.
func (r *retrier) call(what string, out any, fn any, args ...any) {
	t := r.t
	t.Helper()
	for try := 1; ; try++ {
		r.attempts++
		v, err := r.env.ExecuteActivity(fn, args...)
		if err == nil {
			if err := v.Get(out); err != nil {
				t.Fatal(err)
			}
			return
		}
		r.failed++
		var ae *temporal.ApplicationError
		if errors.As(err, &ae) && ae.NonRetryable() {
			t.Fatalf("%s: a transient fault failed the activity for good: %v", what, err)
		}
		if !strings.Contains(err.Error(), "lake: injected ") {
			t.Fatalf("%s: %v, want an error naming the injected fault", what, err)
		}
		if try == r.bound {
			t.Fatalf("%s: still failing after %d attempts: %v", what, r.bound, err)
		}
	}
}

// TestArchiveActivityUnderLakeFaults: the archive activity, driven step
// after step as its workflow does (cursor from LoadCursor, then
// ArchiveRange from each step's Next) and retried as its retry policy
// would, on a lake whose storage fails about a tenth of its calls: every
// failed attempt is retryable and names the fault, the retries stay
// bounded, and at the end every offset is in the lake exactly once and
// the progress file is at the end of the partition; on a directory and on
// S3.
func TestArchiveActivityUnderLakeFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("kfake")
	}
	const n = 500
	cfg := archiveFixture(t, n)
	kc, err := activities.NewKafka(cfg.Kafka, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	for name, mk := range testStores(t, cfg.Lake.Root) {
		t.Run(name, func(t *testing.T) {
			st := mk(t)
			opts := st.opts
			f := errorfs.UniformFaults(7, 0.1)
			f.Latency, f.Timeout = 5*time.Millisecond, 30*time.Millisecond
			opts.Wrap = f.Wrap
			opts.Retry.MaxAttempts = 1 // every fault reaches the activity, as when the lake's retries give up
			faulty, err := lake.Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			a := &activities.Archive{Cfg: cfg, Lake: faulty, Kafka: kc}
			r := &retrier{t: t, env: activityEnv(a), bound: 30}
			var cursor int64
			r.call("LoadCursor", &cursor, a.LoadCursor, rawTopic, int32(0))
			steps := 0
			for cursor < n {
				var res activities.ArchiveRangeResult
				r.call(fmt.Sprintf("ArchiveRange from %d", cursor), &res, a.ArchiveRange,
					activities.ArchiveRangeInput{Topic: rawTopic, Partition: 0, From: cursor, MaxRecords: 40, MaxWait: 200 * time.Millisecond})
				if res.Next <= cursor && !res.CaughtUp {
					t.Fatalf("archive step from %d made no progress: %+v", cursor, res)
				}
				cursor = res.Next
				steps++
			}
			seen := lakeOffsets(t, st.files(t))
			for o := range int64(n) {
				if seen[o] != 1 {
					t.Errorf("offset %d archived %d times, want once", o, seen[o])
				}
			}
			clean, err := lake.Open(st.opts)
			if err != nil {
				t.Fatal(err)
			}
			if p, err := clean.ReadProgress(t.Context(), rawTopic, 0); err != nil || p.NextOffset != n {
				t.Errorf("progress after the archive: %+v, %v; want next offset %d", p, err, n)
			}
			t.Logf("%d steps, %d activity attempts (%d failed); %d faults injected", steps, r.attempts, r.failed, faulty.FaultsInjected())
			if r.failed == 0 {
				t.Error("no attempt failed: the faults proved nothing")
			}
		})
	}
}

// TestPermanentLakeErrorIsNonRetryable: when the lake's storage refuses
// access for good, the archive activities fail at once with a
// non-retryable ErrTypeLakeAccess error naming the file and the cause;
// transient faults never do (TestArchiveActivityUnderLakeFaults).
func TestPermanentLakeErrorIsNonRetryable(t *testing.T) {
	if testing.Short() {
		t.Skip("kfake")
	}
	cfg := archiveFixture(t, 20)
	denied, err := lake.Open(lake.Options{Root: cfg.Lake.Root, Wrap: (&errorfs.Faults{Rules: []errorfs.FaultRule{{Kind: errorfs.FaultDenied, Rate: 1}}}).Wrap})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := activities.NewKafka(cfg.Kafka, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	a := &activities.Archive{Cfg: cfg, Lake: denied, Kafka: kc}
	env := activityEnv(a)
	for _, c := range []struct {
		name string
		fn   any
		args []any
	}{
		{"LoadCursor", a.LoadCursor, []any{rawTopic, int32(0)}},
		{"ArchiveRange", a.ArchiveRange, []any{activities.ArchiveRangeInput{Topic: rawTopic, Partition: 0, From: 0, MaxWait: 200 * time.Millisecond}}},
	} {
		_, err := env.ExecuteActivity(c.fn, c.args...)
		var ae *temporal.ApplicationError
		if !errors.As(err, &ae) || !ae.NonRetryable() || ae.Type() != activities.ErrTypeLakeAccess {
			t.Errorf("%s with access denied: %v, want a non-retryable %s error", c.name, err, activities.ErrTypeLakeAccess)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "permission denied") || !strings.Contains(msg, rawTopic) {
			t.Errorf("%s: %q does not name the cause and the file", c.name, msg)
		}
	}
	if err := activities.LakeError(fmt.Errorf("x: %w", os.ErrDeadlineExceeded)); errors.As(err, new(*temporal.ApplicationError)) {
		t.Errorf("a timeout was classified: %v", err)
	}
}

// TestRecomputeUnderLakeFaults: the batch truth's recompute (lake reads of
// raw rows and progress, the truth and report writes) and the pane archive
// (pane history writes, progress) on a lake whose storage fails about a
// seventh of its calls, each retried until it succeeds: the corrections
// published are exactly those of a run without faults (one per corrected
// window, no version published twice, even when an attempt failed after
// publishing), the truth rows and the pane history are each in the lake
// once, and a repeat under faults publishes nothing. "exhausted": the lake
// does not retry (as when its retries give up), so attempts fail and the
// activity's retries get past them; "lake retries": the same faults, and
// the lake's bounded retries absorb every one: no attempt fails.
func TestRecomputeUnderLakeFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("kfake")
	}
	t.Run("exhausted", func(t *testing.T) {
		// seeds 1-16 all pass; 7 fails 9 of 15 attempts
		recomputeUnderLakeFaults(t, errorfs.UniformFaults(7, 0.15), storage.RetryOptions{MaxAttempts: 1})
	})
	t.Run("lake retries", func(t *testing.T) {
		recomputeUnderLakeFaults(t, errorfs.UniformFaults(7, 0.15), storage.RetryOptions{InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond})
	})
}

func recomputeUnderLakeFaults(t *testing.T, fl *errorfs.Faults, retry storage.RetryOptions) {
	exhausted := retry.MaxAttempts == 1
	f := newTruthFixture(t)
	scenario(t, f)
	fl.Latency, fl.Timeout = 5*time.Millisecond, 30*time.Millisecond
	faulty, err := lake.Open(lake.Options{Root: f.cfg.Lake.Root, Wrap: fl.Wrap, Retry: retry})
	if err != nil {
		t.Fatal(err)
	}
	a := &activities.BatchTruth{Cfg: f.cfg, Lake: faulty, Kafka: f.a.Kafka, Now: f.a.Now}
	r := &retrier{t: t, env: activityEnv(a), bound: 30}

	var res activities.RecomputeResult
	r.call("RecomputeWindows", &res, a.RecomputeWindows, recomputeInput(activities.TriggerReconcile))
	hi, all := latest(f.published(t))
	want := map[string]int64{"u1|08:00": 1, "u2|08:00": 2, "u3|08:05": 1, "u4|08:10": 3, "u5|08:10": 2}
	for k, v := range want {
		if hi[k].Version != v {
			t.Errorf("%s: latest version %d, want %d", k, hi[k].Version, v)
		}
	}
	for k, vs := range all {
		for i := 1; i < len(vs); i++ {
			if vs[i] <= vs[i-1] {
				t.Errorf("%s: versions %v: one published twice (or out of order)", k, vs)
			}
		}
	}
	truth, err := f.lk.ReadTruth(t.Context(), "payments", t0, t0.Add(time.Hour))
	if err != nil || len(truth) != 5 {
		t.Errorf("truth rows %d, %v; want 5", len(truth), err)
	}

	for p := int32(0); p < 2; p++ {
		var end activities.PaneEnd
		r.call("PaneArchiveEnd", &end, a.PaneArchiveEnd, summaries, p)
		var ar activities.ArchivePanesResult
		r.call("ArchivePanes", &ar, a.ArchivePanes, activities.ArchivePanesInput{Topic: summaries, Partition: p, From: 0, To: end.End, End: end.End, ObservedAt: end.ObservedAt})
		if ar.Next != end.End {
			t.Errorf("pane archive %d: %+v, want next %d", p, ar, end.End)
		}
	}
	hist, err := f.lk.ReadPanes(t.Context(), "payments", t0, t0.Add(time.Hour))
	if err != nil || len(hist) != 9 { // 5 stream panes + 4 corrections
		t.Errorf("pane history %d rows, %v; want 9", len(hist), err)
	}

	r.call("RecomputeWindows (repeat)", &res, a.RecomputeWindows, recomputeInput(activities.TriggerReplay))
	if res.Report.Corrected != 0 {
		t.Errorf("a repeat under faults corrected %d windows", res.Report.Corrected)
	}
	if _, all2 := latest(f.published(t)); fmt.Sprint(all) != fmt.Sprint(all2) {
		t.Errorf("a repeat under faults published:\n%v\n%v", all, all2)
	}
	retries := storageRetries(faulty)
	t.Logf("%d activity attempts (%d failed); %d faults injected, %d storage calls retried", r.attempts, r.failed, faulty.FaultsInjected(), retries)
	switch {
	case exhausted && r.failed == 0:
		t.Error("no attempt failed: the faults proved nothing")
	case !exhausted && r.failed != 0:
		t.Errorf("%d attempts failed: the lake's retries did not absorb the faults", r.failed)
	case !exhausted && retries == 0:
		t.Error("no storage call was retried: the faults proved nothing")
	}
}

// storageRetries is l's retried storage calls so far, every op.
func storageRetries(l *lake.Lake) int64 {
	var n int64
	for _, s := range l.StorageStats() {
		n += s.Retries
	}
	return n
}
