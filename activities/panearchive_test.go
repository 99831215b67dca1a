package activities_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/activities"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
)

// TestArchivePanesIsIdempotent: a step archives exactly the committed panes
// of its fixed range (aborted ones never), named from the range, per stream
// and window date; the same step again rewrites the same files; records
// that are not panes are counted, not archived.
func TestArchivePanesIsIdempotent(t *testing.T) {
	if testing.Short() {
		t.Skip("kfake")
	}
	f := newTruthFixture(t)
	mk := func(stream, key string, win time.Time, v int64) *kgo.Record {
		p := event.Pane{Stream: stream, Key: key, WindowStart: win, WindowEnd: win.Add(5 * time.Minute), Count: v, Sum: float64(v), Version: v, Timing: event.TimingOnTime, ComputedBy: event.ComputedByStream, EmittedAt: win}
		return &kgo.Record{Topic: summaries, Partition: 0, Key: []byte(p.RecordKey()), Value: p.AppendJSON(nil)}
	}
	tx, err := kgo.NewClient(append(kafkaconn.Opts(f.cfg.Kafka, "test-txn"), kgo.TransactionalID("test-panes"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	txn := func(commit bool, recs ...*kgo.Record) {
		t.Helper()
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := tx.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := tx.EndTransaction(context.Background(), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	midnight := time.Date(2026, 11, 7, 23, 55, 0, 0, time.UTC)
	txn(true, mk("payments", "u1", t0, 1), mk("suhu", "sensor-01", t0, 1), mk("payments", "u1", midnight, 1))
	txn(false, mk("payments", "u1", t0, 2)) // aborted
	bad := &kgo.Record{Topic: summaries, Partition: 0, Value: []byte("not a pane")}
	txn(true, mk("payments", "u1", t0, 2), bad)

	end, err := run[activities.PaneEnd](t, f.a, f.a.PaneArchiveEnd, summaries, int32(0))
	if err != nil {
		t.Fatal(err)
	}
	in := activities.ArchivePanesInput{Topic: summaries, Partition: 0, From: 0, To: end.End, End: end.End, ObservedAt: end.ObservedAt}
	res, err := run[activities.ArchivePanesResult](t, f.a, f.a.ArchivePanes, in)
	if err != nil {
		t.Fatal(err)
	}
	if res.Panes != 4 || res.Skipped != 1 || len(res.Files) != 2 || res.Next != end.End {
		t.Fatalf("result %+v", res)
	}
	name := "m8-suhu-rangkuman-0-0-" + strconv.FormatInt(end.End-1, 10) + ".parquet"
	want := map[string]bool{
		"summaries/stream=payments/window_date=2026-11-07/" + name: true,
		"summaries/stream=suhu/window_date=2026-11-07/" + name:     true,
	}
	for _, p := range res.Files {
		if !want[p] {
			t.Errorf("unexpected file %s", p)
		}
	}
	panes, err := f.lk.ReadPanes(t.Context(), "payments", t0, t0.Add(24*time.Hour))
	if err != nil || len(panes) != 3 {
		t.Fatalf("payments history %d rows, %v", len(panes), err)
	}
	pr, err := f.lk.ReadProgress(t.Context(), summaries, 0)
	if err != nil || pr.NextOffset != end.End || !pr.ArchivedThrough.Equal(end.ObservedAt) {
		t.Fatalf("progress %+v %v", pr, err)
	}
	// The same step again: same files, same rows.
	res2, err := run[activities.ArchivePanesResult](t, f.a, f.a.ArchivePanes, in)
	if err != nil || len(res2.Files) != 2 {
		t.Fatalf("retry %+v %v", res2, err)
	}
	panes, _ = f.lk.ReadPanes(t.Context(), "payments", t0, t0.Add(24*time.Hour))
	if len(panes) != 3 {
		t.Fatalf("after retry %d rows", len(panes))
	}
	cur, err := run[int64](t, f.a, f.a.PaneCursor, summaries, int32(0))
	if err != nil || cur != end.End {
		t.Fatalf("cursor %d %v", cur, err)
	}
}
