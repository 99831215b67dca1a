package workflows_test

import (
	"context"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"reckon/activities"
	"reckon/internal/testing/testenv"
	"reckon/lake"
	"reckon/workflows"
	"reckon/zreport"
	"reckon/zreport/ofd"
	"reckon/zreport/ofdsim"
)

var recordZReport = flag.Bool("record-zreport", false, "record workflows/testdata/zreport_history.json and zreport_batch_history.json from runs on the dev server")

const (
	zreportHistory      = "testdata/zreport_history.json"
	zreportBatchHistory = "testdata/zreport_batch_history.json"
)

// TestZReportReplay replays recorded Z-report histories with today's
// workflow code: a change that would break running entities (a reordered
// activity, a new timer) fails here. Re-record after an intended change,
// with a versioning guard (workflow.GetVersion) for running entities:
//
//	go test ./workflows -run TestZReportRecordHistory -record-zreport
func TestZReportReplay(t *testing.T) {
	files, err := filepath.Glob("testdata/zreport*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded histories in testdata/ (%v)", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := workflows.NewTestReplayer(t)
			r.RegisterWorkflowWithOptions(workflows.ZReport, workflow.RegisterOptions{Name: workflows.ZReportWorkflow})
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatal(err)
			}
		})
	}
}

type discard struct{}

func (discard) ProduceSync(_ context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	out := make(kgo.ProduceResults, len(rs))
	for i, r := range rs {
		out[i] = kgo.ProduceResult{Record: r}
	}
	return out
}

// TestZReportRecordHistory records the histories the replay test checks:
// one entity on a real dev server with deadlines in seconds — DWH, a
// redelivery, RMS; the operator answers 404 on "day six", has the document
// a retry later (final v1); a corrected DWH after final (v2); then it
// closes. Subtest "single" sends each part alone (signal zreport.part, as
// bridges did before coalescing; testdata/zreport_history.json), "batch"
// sends the first three in one zreport.parts signal and the correction
// alone (testdata/zreport_batch_history.json: both signal names). Record one with
// -run TestZReportRecordHistory/batch.
func TestZReportRecordHistory(t *testing.T) {
	if !*recordZReport {
		t.Skip("run with -record-zreport to re-record " + zreportHistory + " and " + zreportBatchHistory)
	}
	t.Run("single", func(t *testing.T) { recordZReportHistory(t, zreportHistory, false) })
	t.Run("batch", func(t *testing.T) { recordZReportHistory(t, zreportBatchHistory, true) })
}

func recordZReportHistory(t *testing.T, file string, batch bool) {
	c, _ := testenv.Temporal(t)
	docs := ofdsim.NewStore()
	sim, err := ofdsim.New(ofdsim.Options{Documents: docs})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()
	const tq = "zreport-record"
	w := worker.New(c, tq, worker.Options{})
	w.RegisterWorkflowWithOptions(workflows.ZReport, workflow.RegisterOptions{Name: workflows.ZReportWorkflow})
	lk, err := lake.Open(lake.Options{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	w.RegisterActivity(&activities.ZReport{Producer: discard{}, CompleteTopic: "c", IncompleteTopic: "i", Lake: lk, OFDURL: srv.URL})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := zreport.Key{FiscalDrive: "9960440300123456", Shift: 142}
	closed := time.Now().UTC().Truncate(time.Millisecond)
	part := func(src zreport.Source, id string, rc int64, total float64) zreport.Part {
		return zreport.Part{EventID: id, Source: src, Key: key, Figures: zreport.Figures{Receipts: rc, Total: total}, ShiftClosedAt: closed}
	}
	in := workflows.ZReportInput{
		Key: key, ClosedHint: closed, HistoryLimit: 1000,
		Policy: zreport.Policy{OFDRequestAfter: 2 * time.Second, OFDRetry: time.Second, Retention: 5 * time.Second, Linger: time.Second},
		OFD:    workflows.ZReportOFDOptions{Timeout: 5 * time.Second, Attempts: 3, Backoff: 100 * time.Millisecond},
	}
	opts := client.StartWorkflowOptions{
		ID: key.WorkflowID(), TaskQueue: tq,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}
	signal := func(p zreport.Part) client.WorkflowRun {
		t.Helper()
		run, err := c.SignalWithStartWorkflow(ctx, opts.ID, workflows.ZReportSignalPart, p, opts, workflows.ZReportWorkflow, in)
		if err != nil {
			t.Fatal(err)
		}
		return run
	}
	first := []zreport.Part{part(zreport.DWH, "d1", 120, 78000.5), part(zreport.DWH, "d1", 120, 78000.5), part(zreport.RMS, "r1", 120, 78000.5)}
	var run client.WorkflowRun
	if batch {
		var err error
		if run, err = c.SignalWithStartWorkflow(ctx, opts.ID, workflows.ZReportSignalParts, first, opts, workflows.ZReportWorkflow, in); err != nil {
			t.Fatal(err)
		}
	} else {
		for _, p := range first {
			run = signal(p)
		}
	}
	waitFor(t, 2*time.Minute, "the entity to ask the operator", func() (bool, string) {
		return sim.Stats().NotFound >= 1, "the operator was never asked"
	})
	docs.Put(ofd.Document{EventID: "ofd-doc", FiscalDrive: key.FiscalDrive, Shift: key.Shift, Receipts: 120, Total: 78000.5, ShiftClosedAt: closed})
	waitFor(t, 2*time.Minute, "the entity's final report (version 1)", func() (bool, string) {
		v, err := c.QueryWorkflow(ctx, opts.ID, "", workflows.ZReportQueryState)
		if err != nil {
			return false, err.Error()
		}
		var view zreport.View
		if err := v.Get(&view); err != nil {
			return false, err.Error()
		}
		return view.Version == 1, fmt.Sprintf("version %d", view.Version)
	})
	signal(part(zreport.DWH, "d2", 119, 77350))
	var st zreport.State
	if err := run.Get(ctx, &st); err != nil {
		t.Fatal(err)
	}
	if st.Version != 2 || st.Status() != zreport.StatusMismatched {
		t.Fatalf("recorded run ended %s v%d", st.Status(), st.Version)
	}
	hist := &historypb.History{}
	it := c.GetWorkflowHistory(ctx, opts.ID, run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		hist.Events = append(hist.Events, e)
	}
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %d events into %s", len(hist.Events), file)
}
