package workers

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"

	"reckon/internal/config"
	"reckon/internal/kafkaconn"
	"reckon/internal/testing/testenv"
	"reckon/workflows"
	"reckon/zreport"
	"reckon/zreport/bridge"
)

// TestZReportRedriveAfterTermination terminates two entity runs in the
// middle — each holding two of its three parts, their offsets committed by
// the bridge — over the wire (kfake broker, real Temporal dev server, the
// workers' activities and lake). Key A gets nothing more until the sweep:
// the sweep starts a new run with the terminated run's parts. Key B gets
// its third part first, so the bridge starts a new run that holds only
// that part; the sweep signals the lost two into it. Both keys then
// finalize matched, version 1, with every part and no duplicates; a second
// sweep finds nothing left to do (docs/adr/0037-zreport-parts-recoverable.md).
func TestZReportRedriveAfterTermination(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	testZReportRedrive(t, 0)
}

// TestZReportRedriveCarriedState is TestZReportRedriveAfterTermination
// with entities that continue as new after every signal: the run
// terminated holds its parts only in the state it continued from, not in
// signals. Key A's new run takes that state over; key B's later run gets
// the parts the state held.
func TestZReportRedriveCarriedState(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	testZReportRedrive(t, 4)
}

// testZReportRedrive runs the scenario; historyLimit > 0 makes entities
// continue as new past it, and the runs terminated are continued ones.
func testZReportRedrive(t *testing.T, historyLimit int) {
	tc, hostport := testenv.Temporal(t)
	topicNames := []string{"zreport-parts", "zreport-complete", "zreport-incomplete", "reckon-dlq"}
	_, brokers := testenv.Kafka(t, 3, "", topicNames...)
	cfg, err := config.Load("", nil, []string{
		"kafka.brokers=" + brokers[0], "temporal.address=" + hostport, "temporal.task_queue=zreport-redrive",
		"lake.root=" + t.TempDir(),
		// No deadline fires during the test: only the parts finalize a key.
		"zreport.ofd_request_after=1h", "zreport.retention=2h",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	w := worker.New(tc, cfg.Temporal.TaskQueue, worker.Options{})
	lk, err := openConfiguredLake(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	prod, err := kafkaconn.NewClient(cfg.Kafka, "zreport", kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	registerZReport(w, zreportActivities(cfg, prod, lk))
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	bopts, err := kafkaconn.Options(cfg.Kafka, "zreport-bridge")
	if err != nil {
		t.Fatal(err)
	}
	o := bridgeOptions(cfg, slog.Default())
	o.RedriveInterval = 0 // the test sweeps itself, at the points it chooses
	o.MaxRedrives = 1     // a re-driven run that ends unfinished again is given up
	if historyLimit > 0 {
		o.Start.HistoryLimit = historyLimit // below the configuration's floor, on purpose
	}
	br, err := bridge.New(bopts, tc, o)
	if err != nil {
		t.Fatal(err)
	}
	bctx, stopBridge := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- br.Run(bctx) }()
	defer func() {
		stopBridge()
		if err := <-done; err != nil {
			t.Errorf("bridge: %v", err)
		}
		br.Close()
	}()

	cl, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "test"),
		kgo.ConsumeTopics("zreport-complete"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	closed := time.Now().UTC().Truncate(time.Millisecond)
	keyA := zreport.Key{FiscalDrive: "9960440300000031", Shift: 5}
	keyB := zreport.Key{FiscalDrive: "9960440300000032", Shift: 6}
	ids := map[zreport.Key]map[zreport.Source]string{}
	produce := func(k zreport.Key, n int, typ string, src zreport.Source) {
		t.Helper()
		id := zid(1000 + n)
		if ids[k] == nil {
			ids[k] = map[zreport.Source]string{}
		}
		ids[k][src] = id
		r := &kgo.Record{Topic: "zreport-parts", Key: []byte(k.String()),
			Value: zpartJSON(id, typ, k.FiscalDrive, int(k.Shift), 40, 12345.67, closed)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// view queries the key's latest run: its run id and what it holds.
	view := func(k zreport.Key) (string, zreport.View, error) {
		d, err := tc.DescribeWorkflowExecution(ctx, k.WorkflowID(), "")
		if err != nil {
			return "", zreport.View{}, err
		}
		run := d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
		v, err := tc.QueryWorkflow(ctx, k.WorkflowID(), run, workflows.ZReportQueryState)
		if err != nil {
			return run, zreport.View{}, err
		}
		var vw zreport.View
		return run, vw, v.Get(&vw)
	}
	// waitHolds waits until the key's latest run, not one of notRuns,
	// holds exactly the sources want (with historyLimit, in a continued
	// run); it returns that run.
	waitHolds := func(k zreport.Key, want []zreport.Source, notRuns ...string) string {
		t.Helper()
		var run string
		ok, why := pollUntil(time.Minute, func() (bool, string) {
			r, v, err := view(k)
			if err != nil {
				return false, err.Error()
			}
			run = r
			continued := true
			if historyLimit > 0 {
				d, err := tc.DescribeWorkflowExecution(ctx, k.WorkflowID(), r)
				if err != nil {
					return false, err.Error()
				}
				continued = d.GetWorkflowExecutionInfo().GetFirstRunId() != r
			}
			return continued && !slices.Contains(notRuns, r) && slices.Equal(v.Present, want),
				fmt.Sprintf("run %s (continued %v) present %v", r, continued, v.Present)
		})
		if !ok {
			t.Fatalf("%s never held %v: %s", k, want, why)
		}
		return run
	}

	produce(keyA, 1, zreport.TypeDWH, zreport.DWH)
	produce(keyA, 2, zreport.TypeRMS, zreport.RMS)
	produce(keyB, 3, zreport.TypeDWH, zreport.DWH)
	produce(keyB, 4, zreport.TypeRMS, zreport.RMS)
	twoParts := []zreport.Source{zreport.DWH, zreport.RMS}
	runA := waitHolds(keyA, twoParts)
	runB := waitHolds(keyB, twoParts)
	// The bridge has committed the four parts: nothing in Kafka would
	// bring them back to a new run by itself.
	adm := kadm.NewClient(cl)
	if ok, why := pollUntil(time.Minute, func() (bool, string) {
		ends, err := adm.ListEndOffsets(ctx, "zreport-parts")
		if err != nil {
			return false, err.Error()
		}
		offs, err := adm.FetchOffsets(ctx, cfg.ZReport.BridgeGroup)
		if err != nil {
			return false, err.Error()
		}
		var lag int64
		ends.Each(func(o kadm.ListedOffset) {
			c, _ := offs.Lookup(o.Topic, o.Partition)
			lag += o.Offset - c.At
		})
		return lag == 0, fmt.Sprintf("lag %d", lag)
	}); !ok {
		t.Fatalf("bridge never committed the parts: %s", why)
	}
	for k, run := range map[zreport.Key]string{keyA: runA, keyB: runB} {
		if err := tc.TerminateWorkflow(ctx, k.WorkflowID(), run, "test: the entity run dies in the middle"); err != nil {
			t.Fatal(err)
		}
	}
	// B's third part arrives before any sweep: a new run holds only it.
	produce(keyB, 5, zreport.TypeOFD, zreport.OFD)
	waitHolds(keyB, []zreport.Source{zreport.OFD}, runB)

	var total bridge.SweepResult
	if ok, why := pollUntil(time.Minute, func() (bool, string) {
		res, err := br.Sweep(ctx)
		if err != nil {
			return false, err.Error()
		}
		total.Found += res.Found
		total.Redriven += res.Redriven
		total.Parts += res.Parts
		total.GivenUp += res.GivenUp
		return total.Redriven >= 2, fmt.Sprintf("%+v", total)
	}); !ok {
		t.Fatalf("the sweep never re-drove both runs: %s", why)
	}
	// Fresh runs: each terminated run had received its two parts. Continued
	// ones: A's new run takes the state (no parts sent), B's later run gets
	// the two parts the state held.
	wantParts := 4
	if historyLimit > 0 {
		wantParts = 2
	}
	if total.Redriven != 2 || total.Parts != wantParts || total.GivenUp != 0 {
		t.Errorf("sweeps %+v, want 2 runs and %d parts re-driven", total, wantParts)
	}
	newA := waitHolds(keyA, twoParts, runA)
	d, err := tc.DescribeWorkflowExecution(ctx, keyA.WorkflowID(), newA)
	if err != nil {
		t.Fatal(err)
	}
	var of string
	if p := d.GetWorkflowExecutionInfo().GetMemo().GetFields()[bridge.MemoRedriveOf]; p == nil {
		t.Errorf("A's new run has no %s memo", bridge.MemoRedriveOf)
	} else if err := converter.GetDefaultDataConverter().FromPayload(p, &of); err != nil || of != runA {
		t.Errorf("A's new run: %s = %q (%v), want %s", bridge.MemoRedriveOf, of, err, runA)
	}
	produce(keyA, 6, zreport.TypeOFD, zreport.OFD)

	finals := map[zreport.Key]zreport.Aggregate{}
	for len(finals) < 2 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("timed out; finals %v", finals)
		}
		fs.EachRecord(func(r *kgo.Record) {
			var a zreport.Aggregate
			if err := json.Unmarshal(r.Value, &a); err != nil {
				t.Fatal(err)
			}
			if _, seen := finals[a.Key()]; seen {
				t.Errorf("%s: a second version %d", a.Key(), a.Version)
			}
			finals[a.Key()] = a
		})
	}
	for _, k := range []zreport.Key{keyA, keyB} {
		a := finals[k]
		if a.Status != zreport.StatusMatched || a.Version != 1 || len(a.Missing) != 0 {
			t.Errorf("%s: status %s v%d missing %v, want matched v1", k, a.Status, a.Version, a.Missing)
		}
		for _, src := range []zreport.Source{zreport.OFD, zreport.DWH, zreport.RMS} {
			if f := a.Sources.Get(src); f == nil || f.EventID != ids[k][src] {
				t.Errorf("%s %s: %+v, want event %s", k, src, f, ids[k][src])
			}
		}
		if a.Duplicates != (zreport.Counts{}) || a.Corrections != (zreport.Counts{}) {
			t.Errorf("%s: duplicates %+v corrections %+v, want none", k, a.Duplicates, a.Corrections)
		}
	}
	if res, err := br.Sweep(ctx); err != nil || res.Redriven != 0 || res.Parts != 0 {
		t.Errorf("a second sweep: %+v %v, want nothing re-driven", res, err)
	}
	// The run started by the re-drive ends unfinished too: past
	// MaxRedrives it is given up, visible, and no run is started.
	// (The latest run, whichever it is by then: a continued entity may
	// continue once more after its final version.)
	if err := tc.TerminateWorkflow(ctx, keyA.WorkflowID(), "", "test: the re-driven run dies too"); err != nil {
		t.Fatal(err)
	}
	d, err = tc.DescribeWorkflowExecution(ctx, keyA.WorkflowID(), "")
	if err != nil {
		t.Fatal(err)
	}
	lastA := d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	var again bridge.SweepResult
	if ok, why := pollUntil(time.Minute, func() (bool, string) {
		res, err := br.Sweep(ctx)
		if err != nil {
			return false, err.Error()
		}
		again.GivenUp += res.GivenUp
		again.Redriven += res.Redriven
		return again.GivenUp > 0, fmt.Sprintf("%+v", again)
	}); !ok || again.Redriven != 0 {
		t.Errorf("sweeps after the re-driven run was terminated: %+v (%s), want it given up", again, why)
	}
	if d, err := tc.DescribeWorkflowExecution(ctx, keyA.WorkflowID(), ""); err != nil ||
		d.GetWorkflowExecutionInfo().GetExecution().GetRunId() != lastA {
		t.Errorf("a run was started after giving up: %v", err)
	}
}

// TestZReportBridgeRedrivesByItself: the bridge of zreportBatch, as
// `reckon batch` runs it, sweeps on its own every
// zreport.bridge_redrive_interval: a terminated run holding two parts is
// re-driven without the test calling Sweep, and the key finalizes with its
// third part.
func TestZReportBridgeRedrivesByItself(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	tc, hostport := testenv.Temporal(t)
	_, brokers := testenv.Kafka(t, 1, "", "zreport-parts", "zreport-complete", "zreport-incomplete", "reckon-dlq")
	cfg, err := config.Load("", nil, []string{
		"kafka.brokers=" + brokers[0], "temporal.address=" + hostport, "temporal.task_queue=zreport-redrive-self",
		"lake.root=" + t.TempDir(), "zreport.ofd_request_after=1h", "zreport.retention=2h",
		"zreport.bridge_redrive_interval=200ms",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := worker.New(tc, cfg.Temporal.TaskQueue, worker.Options{})
	run, closeFn, err := zreportBatch(cfg, tc, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	bctx, stopBridge := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(bctx) }()
	defer func() {
		stopBridge()
		if err := <-done; err != nil {
			t.Errorf("bridge: %v", err)
		}
		closeFn()
		w.Stop()
	}()
	cl, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "test"),
		kgo.ConsumeTopics("zreport-complete"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	k := zreport.Key{FiscalDrive: "9960440300000041", Shift: 3}
	closed := time.Now().UTC().Truncate(time.Millisecond)
	produce := func(n int, typ string) {
		t.Helper()
		r := &kgo.Record{Topic: "zreport-parts", Key: []byte(k.String()),
			Value: zpartJSON(zid(2000+n), typ, k.FiscalDrive, int(k.Shift), 7, 700, closed)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	holds := func(notRun string) (string, bool, string) {
		d, err := tc.DescribeWorkflowExecution(ctx, k.WorkflowID(), "")
		if err != nil {
			return "", false, err.Error()
		}
		r := d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
		v, err := tc.QueryWorkflow(ctx, k.WorkflowID(), r, workflows.ZReportQueryState)
		if err != nil {
			return r, false, err.Error()
		}
		var vw zreport.View
		if err := v.Get(&vw); err != nil {
			return r, false, err.Error()
		}
		ok := r != notRun && slices.Equal(vw.Present, []zreport.Source{zreport.DWH, zreport.RMS})
		return r, ok, fmt.Sprintf("run %s present %v", r, vw.Present)
	}
	produce(1, zreport.TypeDWH)
	produce(2, zreport.TypeRMS)
	var first string
	if ok, why := pollUntil(time.Minute, func() (bool, string) {
		r, ok, why := holds("")
		first = r
		return ok, why
	}); !ok {
		t.Fatalf("the entity never held its two parts: %s", why)
	}
	if err := tc.TerminateWorkflow(ctx, k.WorkflowID(), first, "test: the entity run dies in the middle"); err != nil {
		t.Fatal(err)
	}
	if ok, why := pollUntil(time.Minute, func() (bool, string) {
		_, ok, why := holds(first)
		return ok, why
	}); !ok {
		t.Fatalf("no new run got the terminated run's parts: %s", why)
	}
	produce(3, zreport.TypeOFD)
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("timed out waiting for the final version")
		}
		var a zreport.Aggregate
		found := false
		fs.EachRecord(func(r *kgo.Record) {
			if err := json.Unmarshal(r.Value, &a); err != nil {
				t.Fatal(err)
			}
			found = true
		})
		if !found {
			continue
		}
		if a.Status != zreport.StatusMatched || a.Version != 1 || a.Sources.DWH == nil || a.Sources.RMS == nil ||
			a.Sources.DWH.EventID != zid(2001) || a.Sources.RMS.EventID != zid(2002) {
			t.Errorf("final %+v, want matched v1 with the re-driven DWH and RMS parts", a)
		}
		return
	}
}
