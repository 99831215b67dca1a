package workers

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
	"reckon/internal/testing/testenv"
	"reckon/lake"
	"reckon/workflows"
)

var recordLongRunning = flag.Bool("record-long-running", false,
	"record the Archive, PaneArchive, FeatureArchive and LateWatch histories into ../workflows/testdata for the replay tests")

// TestRecordLongRunningHistories records the histories
// workflows.TestLongRunningHistoriesReplay replays: the workflows that run
// for ever and so are always running during a deploy — Archive,
// PaneArchive, FeatureArchive, LateWatch — with the real activities on a dev server and a
// kfake broker. The dev server suggests continuing as new after 100
// events, so each workflow's first two runs are short and end in
// continue-as-new; both are recorded: the first starts fresh (cursor from
// the lake or the topic's end), the second from the carried state. Every
// run reads records (raw events, pane transactions, late records that
// signal the correction workflow) and idles.
//
//	go test ./workers -run TestRecordLongRunningHistories -args -record-long-running
func TestRecordLongRunningHistories(t *testing.T) {
	if !*recordLongRunning {
		t.Skip("run with -record-long-running to re-record ../workflows/testdata/{archive,pane_archive,late_watch}*_history.json")
	}
	t.Setenv(testenv.EnvTemporalArgs, "--dynamic-config-value limit.historyCount.suggestContinueAsNew=100")
	tc, hostport := testenv.Temporal(t)
	_, brokers := testenv.Kafka(t, 1, "")
	const tq = "record-long-running"
	cfg, err := config.Load("", nil, []string{
		"kafka.brokers=" + brokers[0], "temporal.address=" + hostport, "temporal.task_queue=" + tq,
		"lake.root=" + lakeDir(t), "metrics.addr=",
		// The correction workflow the late watcher signals only collects.
		"batch.correct_debounce=1h", "batch.correct_max_delay=1h",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	applyTopicMap(t, ctx, cfg)
	lk, err := lake.Open(lake.Options{Root: cfg.Lake.Root})
	if err != nil {
		t.Fatal(err)
	}
	w := worker.New(tc, tq, worker.Options{})
	registerBatchAndTruth(t, w, cfg, lk)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// Records for partition 0 of the raw, summaries and late topics.
	const raw = "m8-suhu-kejadian"
	summaries, late := cfg.Topics.Summaries, cfg.Topics.Late
	cl, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "test"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	txn, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "test-panes"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID("record-panes"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	base := time.Date(2026, 11, 7, 8, 0, 0, 0, time.UTC)
	rawN, paneN := 0, 0
	produceRaw := func(n int) {
		var recs []*kgo.Record
		for ; n > 0; n-- {
			r := sensorReading(raw, fmt.Sprintf("rec%d", rawN), base.Add(time.Duration(rawN)*time.Minute), rawN, 20+rawN%10)
			recs = append(recs, r)
			rawN++
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// producePanes commits n stream panes in one transaction, as the
	// stream worker does.
	producePanes := func(n int) {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for ; n > 0; n-- {
			ws := base.Add(time.Duration(paneN/20) * time.Hour)
			p := event.Pane{Stream: "suhu", Key: fmt.Sprintf("sensor-%02d", paneN%20+1), WindowStart: ws, WindowEnd: ws.Add(time.Hour),
				Count: 1, Sum: 21, Min: 21, Max: 21, Version: 1, Timing: event.TimingOnTime, ComputedBy: event.ComputedByStream, EmittedAt: base}
			v, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := txn.ProduceSync(ctx, &kgo.Record{Topic: summaries, Key: []byte(p.RecordKey()), Value: v}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			paneN++
		}
		if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	// produceFeatures commits n served features in one transaction, as
	// the stream worker does.
	featureN := 0
	produceFeatures := func(n int) {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for ; n > 0; n-- {
			et := base.Add(time.Duration(featureN) * time.Second)
			f := event.Feature{Stream: "payments", Key: fmt.Sprintf("u%d", featureN%7), EventID: fmt.Sprintf("ev%d", featureN),
				EventTime: et, Size: time.Minute, Count: 1, Sum: 100, EmittedAt: et, ArrivedAt: et,
				SourceTopic: "payments-kejadian", SourceOffset: int64(featureN)}
			r := &kgo.Record{Topic: cfg.Topics.Features, Key: []byte(f.Key), Value: f.AppendJSON(nil)}
			if err := txn.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
			featureN++
		}
		if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	// produceLate sends n raw records to the late topic as the stream
	// worker does for events beyond allowed lateness.
	produceLate := func(n int) {
		var recs []*kgo.Record
		for i := 0; i < n; i++ {
			r := sensorReading(late, fmt.Sprintf("rec%d", i), base.Add(time.Duration(i)*time.Minute), i, 20)
			r.Headers = []kgo.RecordHeader{
				{Key: event.HeaderReason, Value: []byte("late")},
				{Key: "reckon.stream", Value: []byte("suhu")},
				{Key: event.HeaderSourceTopic, Value: []byte(raw)},
				{Key: event.HeaderSourcePartition, Value: []byte("0")},
				{Key: event.HeaderSourceOffset, Value: []byte(strconv.Itoa(i))},
			}
			recs = append(recs, r)
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	produceRaw(50)
	producePanes(25)
	produceFeatures(25)
	type recorded struct {
		name   string
		burst  func() // new records for the run after the first
		runs   []string
		closed int // runs known to have continued as new
	}
	start := func(id, wf string, arg any) string {
		run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: tq}, wf, arg)
		if err != nil {
			t.Fatal(err)
		}
		return run.GetRunID()
	}
	ids := map[string]string{
		"archive":         workflows.ArchiveWorkflowID(raw, 0),
		"pane_archive":    workflows.PaneArchiveWorkflowID(summaries, 0),
		"late_watch":      workflows.LateWatchWorkflowID(late, 0),
		"feature_archive": workflows.FeatureArchiveWorkflowID(cfg.Topics.Features, 0),
	}
	recs := []*recorded{
		{name: "archive", burst: func() { produceRaw(30) }, runs: []string{start(ids["archive"], "Archive",
			workflows.ArchiveState{Topic: raw, Partition: 0, Cursor: -1, MaxRecords: 20, Idle: 300 * time.Millisecond})}},
		{name: "pane_archive", burst: func() { producePanes(15) }, runs: []string{start(ids["pane_archive"], workflows.PaneArchiveWorkflow,
			workflows.PaneArchiveState{Topic: summaries, Partition: 0, Cursor: -1, MaxRecords: 20, Idle: 300 * time.Millisecond})}},
		{name: "feature_archive", burst: func() { produceFeatures(15) }, runs: []string{start(ids["feature_archive"],
			workflows.FeatureArchiveWorkflow, workflows.FeatureArchiveState{Topic: cfg.Topics.Features, Partition: 0, Cursor: -1,
				MaxRecords: 20, Idle: 300 * time.Millisecond})}},
		{name: "late_watch", burst: func() { produceLate(3) }, runs: []string{start(ids["late_watch"], workflows.LateWatchWorkflow,
			workflows.LateWatchState{Topic: late, Partition: 0, Cursor: -1, Wait: 300 * time.Millisecond})}},
	}
	// A fresh late watcher starts at the topic's end: late records for its
	// first run go out once it has read that end.
	waitFor(t, time.Minute, "the late watcher's first step", func() (bool, string) {
		v, err := tc.QueryWorkflow(ctx, ids["late_watch"], "", workflows.LateWatchQueryProgress)
		if err != nil {
			return false, err.Error()
		}
		var st workflows.LateWatchState
		if err := v.Get(&st); err != nil {
			return false, err.Error()
		}
		return st.Steps > 0, fmt.Sprintf("%d steps", st.Steps)
	})
	produceLate(3)
	produceRaw(30)
	producePanes(15)
	produceFeatures(15)

	// Each workflow's first run ends in continue-as-new; then its second
	// run gets new records and ends the same way.
	waitFor(t, 2*time.Minute, "two runs of each workflow to continue as new", func() (bool, string) {
		why := ""
		for _, r := range recs {
			if r.closed == 2 {
				continue
			}
			run := r.runs[len(r.runs)-1]
			d, err := tc.DescribeWorkflowExecution(ctx, ids[r.name], run)
			if err != nil {
				return false, err.Error()
			}
			st := d.GetWorkflowExecutionInfo().GetStatus()
			if st != enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
				if st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
					t.Fatalf("%s run %s ended %s", r.name, run, st)
				}
				why += fmt.Sprintf("%s run %d: %d events; ", r.name, len(r.runs), d.GetWorkflowExecutionInfo().GetHistoryLength())
				continue
			}
			r.closed++
			if r.closed == 1 {
				r.runs = append(r.runs, nextRun(t, ctx, tc, ids[r.name], run))
				r.burst()
			}
		}
		return why == "", why
	})
	for _, r := range recs {
		recordRun(t, ctx, tc, ids[r.name], r.runs[0], "../workflows/testdata/"+r.name+"_history.json")
		recordRun(t, ctx, tc, ids[r.name], r.runs[1], "../workflows/testdata/"+r.name+"_continued_history.json")
	}
}

// nextRun is the run that run of workflow id continued as new into.
func nextRun(t *testing.T, ctx context.Context, c client.Client, id, run string) string {
	t.Helper()
	it := c.GetWorkflowHistory(ctx, id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
			return a.GetNewExecutionRunId()
		}
	}
	t.Fatalf("%s run %s did not continue as new", id, run)
	return ""
}
