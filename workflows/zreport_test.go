package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"reckon/activities"
	"reckon/lake"
	"reckon/zreport"
	"reckon/zreport/ofd"
	"reckon/zreport/ofdsim"
)

// Fixtures (docs/requirements.md R-Z): one fiscal drive's shift 142, closed
// 23:00 UTC.
var (
	zKey    = zreport.Key{FiscalDrive: "9960440300123456", Shift: 142}
	zClosed = time.Date(2026, 1, 1, 23, 0, 0, 0, time.UTC)
)

func zPart(src zreport.Source, id string, rc int64, total float64) zreport.Part {
	return zreport.Part{EventID: id, Source: src, Key: zKey, Figures: zreport.Figures{Receipts: rc, Total: total}, ShiftClosedAt: zClosed}
}

// recorder is a fake Kafka producer that keeps what it was given.
type recorder struct {
	mu   sync.Mutex // protects recs
	recs []*kgo.Record
}

func (r *recorder) ProduceSync(_ context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(kgo.ProduceResults, len(rs))
	for i, rec := range rs {
		r.recs = append(r.recs, rec)
		out[i] = kgo.ProduceResult{Record: rec}
	}
	return out
}

// finals returns the complete-topic aggregates in order.
func (r *recorder) finals(t *testing.T) []zreport.Aggregate {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []zreport.Aggregate
	for _, rec := range r.recs {
		if rec.Topic == "complete" {
			var a zreport.Aggregate
			if err := json.Unmarshal(rec.Value, &a); err != nil {
				t.Fatal(err)
			}
			out = append(out, a)
		}
	}
	return out
}

// changelogs returns the incomplete-topic entries (tombstones as nil).
func (r *recorder) changelogs(t *testing.T) []*zreport.Changelog {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*zreport.Changelog
	for _, rec := range r.recs {
		if rec.Topic != "incomplete" {
			continue
		}
		if rec.Value == nil {
			out = append(out, nil)
			continue
		}
		var c zreport.Changelog
		if err := json.Unmarshal(rec.Value, &c); err != nil {
			t.Fatal(err)
		}
		out = append(out, &c)
	}
	return out
}

type zenv struct {
	*testsuite.TestWorkflowEnvironment
	rec  *recorder
	lake string
}

// newZEnv returns a test environment with the real Z-report activities
// (a recording producer, a temp lake, the operator at ofdURL) starting one
// hour after the shift closed.
func newZEnv(t *testing.T, ofdURL string) *zenv {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := NewTestEnv(&s)
	env.SetStartTime(zClosed.Add(time.Hour))
	env.RegisterWorkflowWithOptions(ZReport, workflow.RegisterOptions{Name: ZReportWorkflow})
	z := &zenv{TestWorkflowEnvironment: env, rec: &recorder{}, lake: t.TempDir()}
	env.RegisterActivity(&activities.ZReport{Producer: z.rec, CompleteTopic: "complete", IncompleteTopic: "incomplete", Lake: dirLake(t, z.lake), OFDURL: ofdURL})
	return z
}

// signalAt sends p d after the start.
func (z *zenv) signalAt(d time.Duration, p zreport.Part) {
	z.RegisterDelayedCallback(func() { z.SignalWorkflow(ZReportSignalPart, p) }, d)
}

func (z *zenv) run(t *testing.T, in ZReportInput) *zreport.State {
	t.Helper()
	if in.Key == (zreport.Key{}) {
		in.Key = zKey
	}
	z.ExecuteWorkflow(ZReportWorkflow, in)
	if !z.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	if err := z.GetWorkflowError(); err != nil {
		t.Fatalf("workflow error: %v", err)
	}
	var st zreport.State
	if err := z.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	return &st
}

func newOFD(t *testing.T, o ofdsim.Options) (*ofdsim.Server, string) {
	t.Helper()
	s, err := ofdsim.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts.URL
}

// TestZReportAllOrders: the three parts in each of the six orders give two
// changelog entries, one final version (matched) and a tombstone; the
// entity ends after the retention.
func TestZReportAllOrders(t *testing.T) {
	parts := []zreport.Part{zPart(zreport.OFD, "o", 120, 78000.5), zPart(zreport.DWH, "d", 120, 78000.5), zPart(zreport.RMS, "r", 120, 78000.5)}
	for _, perm := range [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}} {
		name := ""
		for _, i := range perm {
			name += string(parts[i].Source)
		}
		t.Run(name, func(t *testing.T) {
			z := newZEnv(t, "http://127.0.0.1:1")
			for n, i := range perm {
				z.signalAt(time.Duration(n+1)*time.Minute, parts[i])
			}
			var mid zreport.View
			z.RegisterDelayedCallback(func() {
				v, err := z.QueryWorkflow(ZReportQueryState)
				if err != nil {
					t.Error(err)
					return
				}
				_ = v.Get(&mid)
			}, 150*time.Second)
			st := z.run(t, ZReportInput{ClosedHint: zClosed})
			if mid.Status != zreport.StatusWaiting || len(mid.Missing) != 1 || mid.Missing[0] != parts[perm[2]].Source {
				t.Errorf("query after two parts: %+v", mid)
			}
			finals := z.rec.finals(t)
			if len(finals) != 1 || finals[0].Status != zreport.StatusMatched || finals[0].Version != 1 {
				t.Fatalf("finals = %+v", finals)
			}
			if !finals[0].FinalizedAt.Equal(zClosed.Add(time.Hour + 3*time.Minute)) {
				t.Errorf("finalized at %v", finals[0].FinalizedAt)
			}
			cl := z.rec.changelogs(t)
			if len(cl) != 3 || cl[0] == nil || cl[1] == nil || cl[2] != nil || len(cl[1].Present) != 2 {
				t.Errorf("changelogs = %+v", cl)
			}
			if st.Version != 1 || st.OFD.Requests != 0 {
				t.Errorf("state = %+v", st)
			}
			if _, err := os.Stat(filepath.Join(z.lake, "zreports", "close_date=2026-01-01", "9960440300123456-142-v1.parquet")); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestZReportDaySixRequestsOFD: DWH and RMS arrive, OFD never does; on day
// six (closed + 144h) the timer fires and the operator's document
// completes the key.
func TestZReportDaySixRequestsOFD(t *testing.T) {
	docs := ofdsim.NewStore()
	docs.Put(ofd.Document{EventID: "ofd-doc", FiscalDrive: zKey.FiscalDrive, Shift: zKey.Shift, Receipts: 120, Total: 78000.5, ShiftClosedAt: zClosed})
	sim, url := newOFD(t, ofdsim.Options{Documents: docs})
	z := newZEnv(t, url)
	z.signalAt(time.Minute, zPart(zreport.DWH, "d", 120, 78000.5))
	z.signalAt(2*time.Minute, zPart(zreport.RMS, "r", 120, 78000.5))
	st := z.run(t, ZReportInput{})
	if got := sim.Requests(zKey); got != 1 {
		t.Errorf("operator asked %d times", got)
	}
	f := z.rec.finals(t)
	if len(f) != 1 || f[0].Status != zreport.StatusMatched || !f[0].FinalizedAt.Equal(zClosed.Add(144*time.Hour)) {
		t.Fatalf("finals = %+v", f)
	}
	if f[0].Sources.OFD == nil || f[0].Sources.OFD.EventID != "ofd-doc" || st.OFD.LastResult != "found" {
		t.Errorf("OFD from the operator: %+v, %+v", f[0].Sources.OFD, st.OFD)
	}
}

// TestZReportOFD4xxNonRetryable: a 403 is not retried by the activity; the
// workflow asks again after ofd_retry (once a day) until the retention and
// finalizes incomplete, naming OFD.
func TestZReportOFD4xxNonRetryable(t *testing.T) {
	var hits atomic.Int64
	h := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, `{"error":"forbidden"}`, http.StatusForbidden)
	}))
	defer h.Close()
	z := newZEnv(t, h.URL)
	z.signalAt(time.Minute, zPart(zreport.DWH, "d", 1, 1))
	z.signalAt(time.Minute, zPart(zreport.RMS, "r", 1, 1))
	st := z.run(t, ZReportInput{})
	// Requests on days 6, 7, …, 29 (every 24h while before day 30).
	if st.OFD.Requests != 24 || st.OFD.Failures != 24 || hits.Load() != 24 {
		t.Errorf("requests %d failures %d HTTP hits %d, want 24 each (no activity retries)", st.OFD.Requests, st.OFD.Failures, hits.Load())
	}
	f := z.rec.finals(t)
	if len(f) != 1 || f[0].Status != zreport.StatusIncomplete || !slices.Equal(f[0].Missing, []zreport.Source{zreport.OFD}) {
		t.Fatalf("finals = %+v", f)
	}
	if !f[0].FinalizedAt.Equal(zClosed.Add(720 * time.Hour)) {
		t.Errorf("finalized at %v", f[0].FinalizedAt)
	}
}

// TestZReportOFD5xxRetriesWithBackoff: the operator fails twice with 503;
// the activity's retry policy tries again and the third attempt finds it.
func TestZReportOFD5xxRetriesWithBackoff(t *testing.T) {
	docs := ofdsim.DocumentsFunc(func(k zreport.Key) (ofd.Document, bool) {
		return ofd.Document{FiscalDrive: k.FiscalDrive, Shift: k.Shift, Receipts: 3, Total: 30, ShiftClosedAt: zClosed}, true
	})
	sim, url := newOFD(t, ofdsim.Options{Documents: docs, FailFirst: 2})
	z := newZEnv(t, url)
	z.signalAt(time.Minute, zPart(zreport.DWH, "d", 3, 30))
	z.signalAt(time.Minute, zPart(zreport.RMS, "r", 3, 30))
	st := z.run(t, ZReportInput{OFD: ZReportOFDOptions{Backoff: time.Second, Attempts: 5}})
	if sim.Requests(zKey) != 3 || st.OFD.Requests != 1 || st.OFD.Failures != 0 {
		t.Errorf("HTTP requests %d, workflow requests %d, failures %d", sim.Requests(zKey), st.OFD.Requests, st.OFD.Failures)
	}
	if f := z.rec.finals(t); len(f) != 1 || f[0].Status != zreport.StatusMatched || f[0].Sources.OFD.EventID != "ofd-9960440300123456-142" {
		t.Fatalf("finals = %+v", f)
	}
	// Attempts exhausted: a failure the workflow retries a day later.
	sim2, url2 := newOFD(t, ofdsim.Options{Documents: docs, FailFirst: 3})
	z2 := newZEnv(t, url2)
	z2.signalAt(time.Minute, zPart(zreport.DWH, "d", 3, 30))
	z2.signalAt(time.Minute, zPart(zreport.RMS, "r", 3, 30))
	st2 := z2.run(t, ZReportInput{OFD: ZReportOFDOptions{Backoff: time.Second, Attempts: 2}})
	if sim2.Requests(zKey) != 4 || st2.OFD.Requests != 2 || st2.OFD.Failures != 1 {
		t.Errorf("HTTP requests %d, workflow requests %d, failures %d", sim2.Requests(zKey), st2.OFD.Requests, st2.OFD.Failures)
	}
	// Given up at 144h+1s (one backoff), asked again 24h later; its second
	// attempt, one more backoff later, succeeds.
	if f := z2.rec.finals(t); len(f) != 1 || !f[0].FinalizedAt.Equal(zClosed.Add(168*time.Hour+2*time.Second)) {
		t.Fatalf("finals = %+v", f)
	}
}

// TestZReportMissingDWHUntilRetention: OFD and RMS in, DWH never: final
// incomplete on day 30, naming DWH; the operator is never asked.
func TestZReportMissingDWHUntilRetention(t *testing.T) {
	z := newZEnv(t, "http://127.0.0.1:1")
	z.signalAt(time.Minute, zPart(zreport.RMS, "r", 1, 1))
	z.signalAt(48*time.Hour, zPart(zreport.OFD, "o", 1, 1))
	st := z.run(t, ZReportInput{})
	f := z.rec.finals(t)
	if len(f) != 1 || f[0].Status != zreport.StatusIncomplete || !slices.Equal(f[0].Missing, []zreport.Source{zreport.DWH}) || f[0].Reason != "retention expired" {
		t.Fatalf("finals = %+v", f)
	}
	if st.OFD.Requests != 0 {
		t.Errorf("operator asked %d times with OFD present", st.OFD.Requests)
	}
}

// TestZReportPartAfterFinalization: duplicates are counted, a corrected
// resend after the final version yields version 2 (mismatched), never a
// silent second run.
func TestZReportPartAfterFinalization(t *testing.T) {
	z := newZEnv(t, "http://127.0.0.1:1")
	z.signalAt(time.Minute, zPart(zreport.OFD, "o", 10, 100))
	z.signalAt(2*time.Minute, zPart(zreport.DWH, "d", 10, 100))
	z.signalAt(3*time.Minute, zPart(zreport.DWH, "d", 10, 100)) // redelivery
	z.signalAt(4*time.Minute, zPart(zreport.RMS, "r", 10, 100))
	z.signalAt(5*time.Minute, zPart(zreport.RMS, "r", 10, 100)) // redelivery after final
	z.signalAt(240*time.Hour, zPart(zreport.DWH, "d2", 9, 90))  // correction after final
	st := z.run(t, ZReportInput{})
	f := z.rec.finals(t)
	if len(f) != 2 || f[0].Version != 1 || f[0].Status != zreport.StatusMatched || f[1].Version != 2 || f[1].Status != zreport.StatusMismatched {
		t.Fatalf("finals = %+v", f)
	}
	if f[0].Duplicates.DWH != 1 || f[1].Duplicates.RMS != 1 || f[1].Corrections.DWH != 1 || len(f[1].Differences) != 2 {
		t.Errorf("counters v1 %+v v2 %+v", f[0], f[1])
	}
	if st.Version != 2 {
		t.Errorf("state version %d", st.Version)
	}
	for _, v := range []string{"v1", "v2"} {
		if _, err := os.Stat(filepath.Join(z.lake, "zreports", "close_date=2026-01-01", "9960440300123456-142-"+v+".parquet")); err != nil {
			t.Error(err)
		}
	}
}

// TestZReportRestartedAfterClose: an entity started again after its run
// ended (a part after the retention) restores the latest version from the
// lake and publishes the next one.
func TestZReportRestartedAfterClose(t *testing.T) {
	z := newZEnv(t, "http://127.0.0.1:1")
	z.signalAt(time.Minute, zPart(zreport.OFD, "o", 10, 100))
	z.signalAt(time.Minute, zPart(zreport.RMS, "r", 10, 100))
	z.run(t, ZReportInput{ClosedHint: zClosed})

	var s testsuite.WorkflowTestSuite
	env := NewTestEnv(&s)
	env.SetStartTime(zClosed.Add(40 * 24 * time.Hour))
	env.RegisterWorkflowWithOptions(ZReport, workflow.RegisterOptions{Name: ZReportWorkflow})
	rec := &recorder{}
	env.RegisterActivity(&activities.ZReport{Producer: rec, CompleteTopic: "complete", IncompleteTopic: "incomplete", Lake: dirLake(t, z.lake)})
	z2 := &zenv{TestWorkflowEnvironment: env, rec: rec, lake: z.lake}
	z2.signalAt(0, zPart(zreport.DWH, "d", 10, 100))
	z2.signalAt(time.Second, zPart(zreport.RMS, "r", 10, 100)) // redelivery of a restored part
	st := z2.run(t, ZReportInput{ClosedHint: zClosed})
	f := rec.finals(t)
	if len(f) != 1 || f[0].Version != 2 || f[0].Status != zreport.StatusMatched {
		t.Fatalf("finals after restart = %+v", f)
	}
	if st.Version != 2 || st.Sources[2].Duplicates != 1 {
		t.Errorf("version %d, RMS duplicates %d", st.Version, st.Sources[2].Duplicates)
	}
}

// TestZReportContinueAsNew: many corrected resends exceed the history
// limit; the entity continues as new carrying every applied part.
func TestZReportContinueAsNew(t *testing.T) {
	z := newZEnv(t, "http://127.0.0.1:1")
	for i := 0; i < 40; i++ {
		z.signalAt(time.Duration(i+1)*time.Minute, zPart(zreport.DWH, "d"+string(rune('a'+i%26))+string(rune('a'+i/26)), int64(i), float64(i)))
	}
	// The test environment keeps no history; pretend it grew past the
	// limit after the 20th part.
	z.RegisterDelayedCallback(func() { z.SetCurrentHistoryLength(100) }, 20*time.Minute+time.Second)
	z.ExecuteWorkflow(ZReportWorkflow, ZReportInput{Key: zKey, HistoryLimit: 60})
	err := z.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		t.Fatalf("want continue-as-new, got %v", err)
	}
	var next ZReportInput
	if err := json.Unmarshal(can.Input.Payloads[0].Data, &next); err != nil {
		t.Fatal(err)
	}
	if next.State == nil || next.HistoryLimit != 60 || next.State.Seq != 21 { // noticed at the next wake-up, the 21st part
		t.Fatalf("carried state: %+v", next.State)
	}
	dwh := next.State.Sources[1]
	if int64(dwh.Corrections) != next.State.Seq-1 || dwh.Receipts != next.State.Seq-1 {
		t.Errorf("dwh %+v seq %d", dwh, next.State.Seq)
	}
}

// TestZReportLateFirstPartAnswerBeforeRetention: parts that arrive after
// both deadlines passed: the overdue OFD request is answered before the
// overdue retention fires, so the key is matched, not incomplete then v2.
func TestZReportLateFirstPartAnswerBeforeRetention(t *testing.T) {
	docs := ofdsim.NewStore()
	docs.Put(ofd.Document{EventID: "ofd-doc", FiscalDrive: zKey.FiscalDrive, Shift: zKey.Shift, Receipts: 4, Total: 40, ShiftClosedAt: zClosed})
	_, url := newOFD(t, ofdsim.Options{Documents: docs})
	z := newZEnv(t, url)
	z.SetStartTime(zClosed.Add(40 * 24 * time.Hour))
	z.signalAt(0, zPart(zreport.DWH, "d", 4, 40))
	z.signalAt(0, zPart(zreport.RMS, "r", 4, 40))
	z.run(t, ZReportInput{})
	if f := z.rec.finals(t); len(f) != 1 || f[0].Status != zreport.StatusMatched || f[0].Version != 1 {
		t.Fatalf("finals = %+v", f)
	}
}

// dirLake opens a lake on dir.
func dirLake(t *testing.T, dir string) *lake.Lake {
	t.Helper()
	lk, err := lake.Open(lake.Options{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	return lk
}

// TestZReportBatchSameAsOneByOne: the parts of a key in one
// ZReportSignalParts batch — a redelivery inside it, the final part, a
// redelivery and a correction after it — publish the same changelog
// entries and versions as the same parts signalled one by one, and count
// the same duplicates and corrections (docs/adr/0021-zreport-coalescing.md).
// Only the times differ: the batch is applied at one instant.
func TestZReportBatchSameAsOneByOne(t *testing.T) {
	parts := []zreport.Part{
		zPart(zreport.OFD, "o", 10, 100),
		zPart(zreport.DWH, "d", 10, 100),
		zPart(zreport.DWH, "d", 10, 100), // redelivery inside the batch
		zPart(zreport.RMS, "r", 10, 100), // final v1
		zPart(zreport.RMS, "r", 10, 100), // redelivery after final
		zPart(zreport.DWH, "d2", 9, 90),  // correction after final: v2
	}
	type published struct {
		Changelogs []*zreport.Changelog
		Finals     []zreport.Aggregate
		Version    int64
		Duplicates []int64
	}
	result := func(z *zenv, st *zreport.State) published {
		p := published{Changelogs: z.rec.changelogs(t), Finals: z.rec.finals(t), Version: st.Version}
		for _, c := range p.Changelogs {
			if c != nil {
				c.At = time.Time{}
			}
		}
		for i := range p.Finals {
			p.Finals[i].FinalizedAt = time.Time{}
		}
		for _, s := range st.Sources {
			p.Duplicates = append(p.Duplicates, s.Duplicates, s.Corrections)
		}
		return p
	}

	one := newZEnv(t, "http://127.0.0.1:1")
	for i, p := range parts {
		one.signalAt(time.Duration(i+1)*time.Minute, p)
	}
	want := result(one, one.run(t, ZReportInput{ClosedHint: zClosed}))

	batched := newZEnv(t, "http://127.0.0.1:1")
	batched.RegisterDelayedCallback(func() { batched.SignalWorkflow(ZReportSignalParts, parts) }, time.Minute)
	got := result(batched, batched.run(t, ZReportInput{ClosedHint: zClosed}))

	if len(want.Finals) != 2 || want.Finals[1].Version != 2 || want.Finals[1].Duplicates.DWH != 1 || want.Finals[1].Duplicates.RMS != 1 {
		t.Fatalf("one by one: finals %+v", want.Finals) // the reference itself is not what this test assumes
	}
	wj, _ := json.Marshal(want)
	gj, _ := json.Marshal(got)
	if string(wj) != string(gj) {
		t.Errorf("batched:\n%s\none by one:\n%s", gj, wj)
	}
}

// flaky is a producer that fails its first calls: Kafka down.
type flaky struct {
	*recorder
	mu    sync.Mutex // protects fails
	fails int
}

func (f *flaky) ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	f.mu.Lock()
	down := f.fails > 0
	if down {
		f.fails--
	}
	f.mu.Unlock()
	if down {
		out := make(kgo.ProduceResults, len(rs))
		for i, rec := range rs {
			out[i] = kgo.ProduceResult{Record: rec, Err: errors.New("unable to dial: connection refused")}
		}
		return out
	}
	return f.recorder.ProduceSync(ctx, rs...)
}

// TestZReportPublishOutlastsKafkaOutage: a publication that keeps failing
// for minutes (the broker down; tools/outages holds it down 2m) stalls the
// entity and is retried until it works. It must not fail the run: the
// bridge has committed the parts the run holds, and a new run would start
// without them (a part lost; the local activity's retries were capped at
// its 30s StartToClose, the SDK's default ScheduleToClose).
func TestZReportPublishOutlastsKafkaOutage(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := NewTestEnv(&s)
	env.SetStartTime(zClosed.Add(time.Hour))
	env.RegisterWorkflowWithOptions(ZReport, workflow.RegisterOptions{Name: ZReportWorkflow})
	z := &zenv{TestWorkflowEnvironment: env, rec: &recorder{}, lake: t.TempDir()}
	// 1+2+4+…+60 s of backoff: over three minutes of failures.
	p := &flaky{recorder: z.rec, fails: 8}
	env.RegisterActivity(&activities.ZReport{Producer: p, CompleteTopic: "complete", IncompleteTopic: "incomplete", Lake: dirLake(t, z.lake), OFDURL: "http://127.0.0.1:1"})
	z.signalAt(time.Minute, zPart(zreport.RMS, "r", 1, 1))
	z.signalAt(10*time.Minute, zPart(zreport.DWH, "d", 1, 1))
	z.signalAt(20*time.Minute, zPart(zreport.OFD, "o", 1, 1))
	z.run(t, ZReportInput{})
	if p.fails != 0 {
		t.Fatalf("%d failures left: the outage did not happen", p.fails)
	}
	f := z.rec.finals(t)
	if len(f) != 1 || f[0].Status != zreport.StatusMatched || len(f[0].Missing) != 0 {
		t.Fatalf("finals = %+v", f)
	}
	if c := z.rec.changelogs(t); len(c) < 2 || c[0] == nil || c[0].Status == "" {
		t.Errorf("changelogs = %+v", c)
	}
}
