package activities

import (
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"reckon/lake"
	"reckon/lake/storage"
	"reckon/lake/storage/errorfs"
	"reckon/zreport"
)

// TestZReportUnderLakeFaults: Z-report versions published
// (PublishZReport) and loaded (LoadZReport) on a lake whose storage fails
// about a third of its calls, on a directory and on S3, each call retried
// until it succeeds (docs/adr/0022-lake-fault-injection.md): every version
// is in the lake once, whole, and the load finds the highest; every failed
// attempt names the injected fault and is retryable (LakeError leaves it
// alone).
func TestZReportUnderLakeFaults(t *testing.T) {
	for _, store := range []string{"local", "s3", "s3-weed"} {
		t.Run(store, func(t *testing.T) {
			opts := lake.Options{Root: t.TempDir()}
			if store == "s3-weed" {
				opts = weedLakeOptions(t)
			}
			if store == "s3" {
				backend := s3mem.New()
				if err := backend.CreateBucket("reckon-lake"); err != nil {
					t.Fatal(err)
				}
				srv := httptest.NewServer(gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
				t.Cleanup(srv.Close)
				opts = lake.Options{Root: "s3://reckon-lake/prod", S3: storage.S3Options{
					Endpoint: srv.URL, Region: "us-east-1", AccessKeyID: "reckon", SecretAccessKey: "fake-secret"}}
			}
			clean, err := lake.Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			f := errorfs.UniformFaults(19, 0.3)
			f.Latency, f.Timeout = time.Millisecond, 20*time.Millisecond
			opts.Wrap = f.Wrap
			opts.Retry.MaxAttempts = 1 // every fault reaches the activity, as when the lake's retries give up
			faulty, err := lake.Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			a := &ZReport{Producer: discardProducer{}, CompleteTopic: "complete", IncompleteTopic: "incomplete", Lake: faulty}
			failed := 0
			retry := func(what string, fn func() error) {
				t.Helper()
				for try := 1; ; try++ {
					err := fn()
					if err == nil {
						return
					}
					failed++
					if LakeError(err) != err || !strings.Contains(err.Error(), "lake: injected ") {
						t.Fatalf("%s: %v: want a retryable error naming the injected fault", what, err)
					}
					if try == 30 {
						t.Fatalf("%s: still failing after %d attempts: %v", what, try, err)
					}
				}
			}
			var versions []*zreport.Aggregate
			for v := int64(1); v <= 12; v++ {
				agg := *finalOf(t, zpart(zreport.OFD, "o", 5, 50.5), zpart(zreport.DWH, "d", 5, 50.5), zpart(zreport.RMS, "r", 5, 50.5))
				agg.Version = v
				versions = append(versions, &agg)
				retry("PublishZReport", func() error {
					_, err := a.PublishZReport(t.Context(), []ZReportPublication{{Final: &agg}})
					return err
				})
			}
			var got *zreport.Aggregate
			retry("LoadZReport", func() (err error) { got, err = a.LoadZReport(t.Context(), zkey, zclosed); return err })
			if got == nil || got.Version != 12 {
				t.Fatalf("loaded %+v, want version 12", got)
			}
			names, err := clean.Files(t.Context(), zreportDateDir(zclosed))
			if err != nil {
				t.Fatal(err)
			}
			if len(names) != len(versions) {
				t.Errorf("zreports holds %q, want one file per version", names)
			}
			for _, v := range versions {
				name, _ := zreportFileName(v.Key(), v.Version)
				back, err := readZReportFile(t.Context(), clean, zreportDateDir(zclosed)+"/"+name)
				if err != nil || back.Version != v.Version || !reflect.DeepEqual(back, v) {
					t.Errorf("version %d read back %+v, %v", v.Version, back, err)
				}
			}
			t.Logf("%d failed attempts; %d faults injected", failed, faulty.FaultsInjected())
			if failed == 0 {
				t.Error("no attempt failed: the faults proved nothing")
			}
		})
	}
}
