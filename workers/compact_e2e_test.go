package workers

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/worker"

	"reckon/internal/config"
	"reckon/internal/testing/testenv"
	"reckon/lake"
	"reckon/workflows"
)

// TestCompactionWorkflowEndToEnd: `reckon batch`'s start of the compaction
// workflows on the Temporal dev server is idempotent; the workflow of
// zreport-parts (a topic no stream reads: the archive's progress decides)
// compacts the closed hour — redeliveries dropped, one file — leaves the
// open one, sets ReckonClosedThrough and says in its details what it did.
func TestCompactionWorkflowEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("temporal dev server")
	}
	tc, hostPort := testenv.Temporal(t)
	root := t.TempDir()
	cfg, err := config.Load("", nil, []string{"temporal.address=" + hostPort, "lake.root=" + root, "lake.compaction.poll=1s",
		"lake.compaction.lookback=100000h"}) // the test hours are in the past
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lake.Open(lake.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	topic := cfg.Topics.ZReportParts
	h := time.Date(2026, 11, 7, 8, 0, 0, 0, time.UTC)
	var rows []lake.RawRow
	for i := int64(0); i < 40; i++ {
		at := h.Add(time.Duration(i) * 3 * time.Minute) // 08:00 .. 09:57
		rows = append(rows, lake.RawRow{EventID: fmt.Sprintf("e%02d", i), EventType: "zreport.part", Key: "k", OccurredAt: at.UnixMicro(), IngestedAt: at.UnixMicro(), Data: "{}", KafkaOffset: i})
	}
	dup := rows[1]
	dup.KafkaOffset, dup.IngestedAt = 40, dup.IngestedAt+1
	rows = append(rows, dup)
	for lo := 0; lo < len(rows); lo += 5 {
		if _, err := lk.WriteRaw(ctx, topic, 0, int64(lo), int64(min(lo+4, len(rows)-1)), rows[lo:min(lo+5, len(rows))]); err != nil {
			t.Fatal(err)
		}
	}
	// Archived through 09:06: with the 5m margin 08:00-09:00 is closed.
	if _, err := lk.WriteProgress(ctx, lake.Progress{Topic: topic, NextOffset: 41, ArchivedThrough: h.Add(time.Hour + 6*time.Minute)}); err != nil {
		t.Fatal(err)
	}

	w := worker.New(tc, cfg.Temporal.TaskQueue, worker.Options{})
	registerCompaction(w, cfg, lk, nil)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for range 2 { // idempotent
		if err := startCompactions(ctx, cfg, tc, quiet); err != nil {
			t.Fatal(err)
		}
	}
	id := workflows.CompactionWorkflowID(topic)
	hourFiles := func(hour time.Time) []string {
		names, err := lk.Files(ctx, strings.TrimPrefix(lake.RawHourDir("", topic, hour), "/"))
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	waitFor(t, time.Minute, "the closed hour compacted", func() (bool, string) {
		got := hourFiles(h)
		return len(got) == 1 && got[0] == lake.CompactedName(topic, 1, 0), fmt.Sprint(got)
	})
	if got := hourFiles(h.Add(time.Hour)); len(got) != 4 {
		t.Errorf("the open hour: %v, want its 4 archive files untouched (below half of 64)", got)
	}
	var details string
	waitFor(t, time.Minute, "search attribute and details", func() (bool, string) {
		d, err := tc.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			return false, err.Error()
		}
		sa := d.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()
		v, err := tc.QueryWorkflow(ctx, id, "", "__temporal_workflow_metadata")
		if err != nil {
			return false, err.Error()
		}
		var md sdkpb.WorkflowMetadata
		if err := v.Get(&md); err != nil {
			return false, err.Error()
		}
		details = md.GetCurrentDetails()
		_, ok := sa["ReckonClosedThrough"]
		return ok && strings.Contains(details, "hours closed through 2026-11-07 09:00"), fmt.Sprintf("%v %s", sa, details)
	})
	if !strings.Contains(details, "archive progress") || !strings.Contains(details, "zreport-parts/0: archived through") {
		t.Errorf("details %s", details)
	}
	_, st, err := lk.Aggregate(ctx, lake.Query{Topic: topic, From: h, To: h.Add(2 * time.Hour)}, time.Hour)
	if err != nil || st.Rows != 40 || st.Duplicates != 0 {
		t.Errorf("read after compaction: %+v, %v", st, err)
	}
}

var recordCompaction = flag.Bool("record-compaction", false, "record the Compaction histories into ../workflows/testdata for the replay tests")

// TestRecordCompactionHistories records the two Compaction runs
// workflows.TestLongRunningHistoriesReplay replays (the workflow runs for
// ever, so it is running during every deploy): with the dev server
// suggesting continue-as-new after 100 events, the first run (fresh start)
// compacts a closed hour, the second (started by continue-as-new) compacts
// the late files that arrived meanwhile; both idle between passes.
//
//	go test ./workers -run TestRecordCompactionHistories -args -record-compaction
func TestRecordCompactionHistories(t *testing.T) {
	if !*recordCompaction {
		t.Skip("run with -record-compaction to re-record ../workflows/testdata/compaction*_history.json")
	}
	t.Setenv(testenv.EnvTemporalArgs, "--dynamic-config-value limit.historyCount.suggestContinueAsNew=100")
	tc, hostPort := testenv.Temporal(t)
	root := t.TempDir()
	cfg, err := config.Load("", nil, []string{"temporal.address=" + hostPort, "lake.root=" + root, "lake.compaction.poll=1s",
		"lake.compaction.lookback=100000h"})
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lake.Open(lake.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topic := cfg.Topics.ZReportParts
	h := time.Date(2026, 11, 7, 8, 0, 0, 0, time.UTC)
	batch := func(first int64, n int) {
		t.Helper()
		var rows []lake.RawRow
		for i := range int64(n) {
			at := h.Add(time.Duration(first+i) * time.Second)
			rows = append(rows, lake.RawRow{EventID: fmt.Sprintf("e%04d", first+i), EventType: "zreport.part", Key: "k", OccurredAt: at.UnixMicro(), IngestedAt: at.UnixMicro(), Data: "{}", KafkaOffset: first + i})
		}
		if _, err := lk.WriteRaw(ctx, topic, 0, first, first+int64(n)-1, rows); err != nil {
			t.Fatal(err)
		}
		if _, err := lk.WriteProgress(ctx, lake.Progress{Topic: topic, NextOffset: first + int64(n), ArchivedThrough: h.Add(2 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	batch(0, 10)
	batch(10, 10)
	w := worker.New(tc, cfg.Temporal.TaskQueue, worker.Options{})
	registerCompaction(w, cfg, lk, nil)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := startCompactions(ctx, cfg, tc, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	id := workflows.CompactionWorkflowID(topic)
	d, err := tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	runs := []string{d.GetWorkflowExecutionInfo().GetExecution().GetRunId()}
	waitFor(t, 2*time.Minute, "two runs of the compaction workflow", func() (bool, string) {
		run := runs[len(runs)-1]
		d, err := tc.DescribeWorkflowExecution(ctx, id, run)
		if err != nil {
			return false, err.Error()
		}
		if st := d.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
			if st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				t.Fatalf("run %s ended %s", run, st)
			}
			return false, fmt.Sprintf("run %d: %d events", len(runs), d.GetWorkflowExecutionInfo().GetHistoryLength())
		}
		if len(runs) == 2 {
			return true, ""
		}
		runs = append(runs, nextRun(t, ctx, tc, id, run))
		batch(20, 10) // late files for the closed hour: the second run compacts them
		return false, "second run started"
	})
	recordRun(t, ctx, tc, id, runs[0], "../workflows/testdata/compaction_history.json")
	recordRun(t, ctx, tc, id, runs[1], "../workflows/testdata/compaction_continued_history.json")
}
