package activities

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/minio/minio-go/v7"
	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/sdk/temporal"

	"reckon/internal/testing/s3test"
	"reckon/lake"
	"reckon/lake/storage"
	"reckon/zreport"
	"reckon/zreport/ofd"
	"reckon/zreport/ofdsim"
)

var (
	zkey    = zreport.Key{FiscalDrive: "9960440300123456", Shift: 142}
	zclosed = time.Date(2026, 1, 1, 23, 0, 0, 0, time.UTC)
)

// finalOf builds a real aggregate through the state machine.
func finalOf(t *testing.T, parts ...zreport.Part) *zreport.Aggregate {
	t.Helper()
	s := zreport.New(zkey, zreport.Policy{})
	var last *zreport.Aggregate
	for i, p := range parts {
		out, err := s.Apply(p, zclosed.Add(time.Duration(i+1)*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if out.Final != nil {
			last = out.Final
		}
	}
	if last == nil {
		last = s.Fire(zreport.TimerRetention, zclosed.Add(720*time.Hour)).Final
	}
	return last
}

func zpart(src zreport.Source, id string, rc int64, total float64) zreport.Part {
	return zreport.Part{EventID: id, Source: src, Key: zkey, Figures: zreport.Figures{Receipts: rc, Total: total}, ShiftClosedAt: zclosed}
}

func TestZReportLakeRoundTrip(t *testing.T) {
	root := t.TempDir()
	lk := testLake(t, root)
	ctx := context.Background()
	v1 := finalOf(t, zpart(zreport.OFD, "o", 5, 50.5), zpart(zreport.RMS, "r", 5, 50.5))
	if v1.Status != zreport.StatusIncomplete {
		t.Fatalf("v1 %+v", v1)
	}
	rel, err := writeZReportFile(ctx, lk, v1)
	if err != nil {
		t.Fatal(err)
	}
	if want := "zreports/close_date=2026-01-01/9960440300123456-142-v1.parquet"; rel != want {
		t.Errorf("path %s, want %s", rel, want)
	}
	v2 := *finalOf(t, zpart(zreport.OFD, "o", 5, 50.5), zpart(zreport.DWH, "d", 4, 40), zpart(zreport.RMS, "r", 5, 50.5))
	v2.Version = 2
	if _, err := writeZReportFile(ctx, lk, &v2); err != nil {
		t.Fatal(err)
	}
	// A day either side of the close date is searched.
	got, err := ReadLatestZReport(ctx, lk, zkey, zclosed.Add(3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	v2.ShiftClosedAt, v2.FinalizedAt = v2.ShiftClosedAt.UTC(), v2.FinalizedAt.UTC()
	if !reflect.DeepEqual(got, &v2) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, &v2)
	}
	if none, err := ReadLatestZReport(ctx, lk, zreport.Key{FiscalDrive: "9960440300123456", Shift: 1}, zclosed); none != nil || err != nil {
		t.Errorf("other key: %v %v", none, err)
	}
	entries, _ := os.ReadDir(filepath.Join(root, "zreports", "close_date=2026-01-01"))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
	// Schema: TIMESTAMP(MICROS, UTC), zstd, NULL for the absent source.
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	schema := pf.Schema().String()
	for _, want := range []string{"int64 shift_closed_at (TIMESTAMP(isAdjustedToUTC=true,unit=MICROS))", "optional int64 dwh_receipts_count"} {
		if !strings.Contains(schema, want) {
			t.Errorf("schema lacks %q:\n%s", want, schema)
		}
	}
	if c := pf.Metadata().RowGroups[0].Columns[0].MetaData.Codec.String(); c != "ZSTD" {
		t.Errorf("codec %s", c)
	}
	back, err := readZReportFile(ctx, lk, rel)
	if err != nil || back.Sources.DWH != nil || back.Missing[0] != zreport.DWH {
		t.Errorf("v1 back: %+v %v", back, err)
	}
}

func TestZReportFileNameRejectsBadKeys(t *testing.T) {
	for _, k := range []zreport.Key{{FiscalDrive: "../../../etc/pa", Shift: 1}, {FiscalDrive: "9960440300123456", Shift: 0}, {FiscalDrive: "996044030012345x", Shift: 1}} {
		if _, err := zreportFileName(k, 1); !errors.Is(err, zreport.ErrInvalidPart) {
			t.Errorf("%+v: %v", k, err)
		}
	}
	if _, err := zreportFileName(zkey, 0); err == nil {
		t.Error("version 0 accepted")
	}
}

func TestRequestOFD(t *testing.T) {
	st := ofdsim.NewStore()
	st.Put(ofd.Document{EventID: "doc-1", FiscalDrive: zkey.FiscalDrive, Shift: zkey.Shift, Receipts: 5, Total: 50.5, ShiftClosedAt: zclosed})
	sim, err := ofdsim.New(ofdsim.Options{Documents: st})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()
	a := &ZReport{OFDURL: srv.URL}
	ans, err := a.RequestOFD(context.Background(), zkey)
	if err != nil || !ans.Found || ans.Document.EventID != "doc-1" || ans.Document.Source != zreport.OFD || ans.Document.Total != 50.5 {
		t.Fatalf("found: %+v %v", ans, err)
	}
	ans, err = a.RequestOFD(context.Background(), zreport.Key{FiscalDrive: zkey.FiscalDrive, Shift: 7})
	if err != nil || ans.Found || ans.Status != 404 {
		t.Fatalf("not found: %+v %v", ans, err)
	}

	for _, c := range []struct {
		status    int
		retryable bool
	}{{500, true}, {503, true}, {429, true}, {408, true}, {400, false}, {401, false}, {403, false}, {422, false}} {
		h := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(c.status) }))
		_, err := (&ZReport{OFDURL: h.URL}).RequestOFD(context.Background(), zkey)
		h.Close()
		var ae *temporal.ApplicationError
		nonRetryable := errors.As(err, &ae) && ae.NonRetryable()
		if err == nil || nonRetryable == c.retryable {
			t.Errorf("status %d: err %v, non-retryable %v", c.status, err, nonRetryable)
		}
	}
	// A 200 with garbage or another key's document is non-retryable.
	for _, body := range []string{`not json`, `{"fiscal_drive":"9960440300123456","shift":143,"receipts":1,"total":1,"shift_closed_at":"2026-01-01T23:00:00Z"}`} {
		h := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(body)) }))
		_, err := (&ZReport{OFDURL: h.URL}).RequestOFD(context.Background(), zkey)
		h.Close()
		var ae *temporal.ApplicationError
		if !errors.As(err, &ae) || !ae.NonRetryable() || ae.Type() != ErrTypeOFDBadDocument {
			t.Errorf("body %q: %v", body, err)
		}
	}
	// The operator unreachable: retryable.
	if _, err := (&ZReport{OFDURL: "http://127.0.0.1:1"}).RequestOFD(context.Background(), zkey); err == nil {
		t.Error("unreachable operator: no error")
	} else if ae := (*temporal.ApplicationError)(nil); errors.As(err, &ae) && ae.NonRetryable() {
		t.Errorf("unreachable operator non-retryable: %v", err)
	}
}

func TestPublishZReport(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "complete", "incomplete"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("complete", "incomplete"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	root := t.TempDir()
	a := &ZReport{Producer: cl, CompleteTopic: "complete", IncompleteTopic: "incomplete", Lake: testLake(t, root)}

	s := zreport.New(zkey, zreport.Policy{})
	out1, _ := s.Apply(zpart(zreport.OFD, "o", 5, 50.5), zclosed)
	out2, _ := s.Apply(zpart(zreport.DWH, "d", 5, 50.5), zclosed)
	out3, _ := s.Apply(zpart(zreport.RMS, "r", 5, 50.5), zclosed)
	pubs := []ZReportPublication{{Changelog: out1.Changelog}, {Changelog: out2.Changelog}, {Final: out3.Final}}
	res, err := a.PublishZReport(context.Background(), pubs)
	if err != nil {
		t.Fatal(err)
	}
	if res.Records != 4 || len(res.Files) != 1 {
		t.Fatalf("published %+v", res)
	}
	if _, err := os.Stat(filepath.Join(root, res.Files[0])); err != nil {
		t.Fatal(err)
	}
	// A retry of the same batch is harmless: same file, repeated records.
	if _, err := a.PublishZReport(context.Background(), pubs); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var got []*kgo.Record
	for len(got) < 8 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got = append(got, fs.Records()...)
	}
	// The retry repeated the first publish record for record on each topic;
	// the two topics' records interleave in any order, so the first
	// publish is the first half of each topic's records by offset.
	byTopic := map[string][]*kgo.Record{}
	for _, r := range got {
		byTopic[r.Topic] = append(byTopic[r.Topic], r)
	}
	var first []*kgo.Record
	for _, rs := range byTopic {
		slices.SortFunc(rs, func(a, b *kgo.Record) int { return cmp.Compare(a.Offset, b.Offset) })
		first = append(first, rs[:len(rs)/2]...)
	}
	var inc, tomb, comp int
	for _, r := range first {
		if string(r.Key) != "9960440300123456/142" {
			t.Errorf("key %q", r.Key)
		}
		switch {
		case r.Topic == "complete":
			comp++
			var agg zreport.Aggregate
			if err := json.Unmarshal(r.Value, &agg); err != nil || agg.Status != zreport.StatusMatched || agg.Version != 1 {
				t.Errorf("complete record %s: %v", r.Value, err)
			}
			if string(r.Headers[0].Value) != "1" {
				t.Errorf("headers %v", r.Headers)
			}
		case r.Value == nil:
			tomb++
		default:
			inc++
		}
	}
	if inc != 2 || tomb != 1 || comp != 1 {
		t.Errorf("incomplete %d tombstones %d complete %d", inc, tomb, comp)
	}
}

// testLake opens a lake on dir.
func testLake(t *testing.T, dir string) *lake.Lake {
	t.Helper()
	lk, err := lake.Open(lake.Options{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	return lk
}

// TestZReportLakeOnS3: the zreports table works on an object-storage lake
// (an in-process S3 fake, and the real S3 server): versions written
// through PublishZReport are found by LoadZReport, highest version first.
func TestZReportLakeOnS3(t *testing.T) {
	t.Run("gofakes3", func(t *testing.T) {
		backend := s3mem.New()
		if err := backend.CreateBucket("reckon-lake"); err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
		defer srv.Close()
		testZReportLakeOnS3(t, lake.Options{Root: "s3://reckon-lake/prod", S3: storage.S3Options{
			Endpoint: srv.URL, Region: "us-east-1", AccessKeyID: "reckon", SecretAccessKey: "fake-secret"}},
			func() []string {
				list, err := backend.ListBucket("reckon-lake", &gofakes3.Prefix{}, gofakes3.ListBucketPage{})
				if err != nil {
					t.Fatal(err)
				}
				var keys []string
				for _, o := range list.Contents {
					keys = append(keys, strings.TrimPrefix(o.Key, "prod/"))
				}
				return keys
			})
	})
	t.Run("weed", func(t *testing.T) {
		opts := weedLakeOptions(t)
		prefix := strings.TrimPrefix(opts.Root, "s3://"+s3test.Bucket+"/") + "/"
		testZReportLakeOnS3(t, opts, func() []string {
			var keys []string
			for o := range s3test.Client(t).ListObjects(t.Context(), s3test.Bucket,
				minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
				if o.Err != nil {
					t.Fatal(o.Err)
				}
				keys = append(keys, strings.TrimPrefix(o.Key, prefix))
			}
			return keys
		})
	})
}

// weedLakeOptions are a lake on the real S3 server under a prefix of the
// test's own (skipped without ./bin/weed unless RECKON_TEST_REQUIRE_S3).
func weedLakeOptions(t *testing.T) lake.Options {
	srv := s3test.Server(t)
	return lake.Options{Root: "s3://" + s3test.Bucket + "/" + s3test.Prefix(t), S3: storage.S3Options{
		Endpoint: srv.Endpoint, Region: "us-east-1", AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey}}
}

// testZReportLakeOnS3 runs TestZReportLakeOnS3 on a lake at opts; keys
// lists the bucket's keys under the lake's prefix, relative to it.
func testZReportLakeOnS3(t *testing.T, opts lake.Options, keys func() []string) {
	lk, err := lake.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a := &ZReport{Producer: discardProducer{}, CompleteTopic: "complete", IncompleteTopic: "incomplete", Lake: lk}
	v1 := finalOf(t, zpart(zreport.OFD, "o", 5, 50.5), zpart(zreport.RMS, "r", 5, 50.5))
	v2 := *finalOf(t, zpart(zreport.OFD, "o", 5, 50.5), zpart(zreport.DWH, "d", 5, 50.5), zpart(zreport.RMS, "r", 5, 50.5))
	v2.Version = 2
	for _, f := range []*zreport.Aggregate{v1, &v2} {
		res, err := a.PublishZReport(ctx, []ZReportPublication{{Final: f}})
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("zreports/close_date=2026-01-01/9960440300123456-142-v%d.parquet", f.Version); len(res.Files) != 1 || res.Files[0] != want {
			t.Fatalf("files %v, want %s", res.Files, want)
		}
	}
	got, err := a.LoadZReport(ctx, zkey, zclosed)
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || got.Version != 2 || got.Status != zreport.StatusMatched {
		t.Fatalf("loaded %+v, want version 2 matched", got)
	}
	// The objects live under the lake's prefix in the bucket.
	if k := keys(); len(k) != 2 || k[1] != "zreports/close_date=2026-01-01/9960440300123456-142-v2.parquet" {
		t.Errorf("bucket holds %v", k)
	}
}

// discardProducer accepts every record.
type discardProducer struct{}

func (discardProducer) ProduceSync(_ context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	out := make(kgo.ProduceResults, len(rs))
	for i, r := range rs {
		out[i] = kgo.ProduceResult{Record: r}
	}
	return out
}
