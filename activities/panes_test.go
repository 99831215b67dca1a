package activities_test

import (
	"context"
	"strconv"
	"sync"
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

// TestReadLateSignalsTheAffectedWindows: late records become (stream, key,
// window) items with the raw offset the lake must reach; a fresh watcher
// starts at the end; records without a known stream are skipped.
func TestReadLateSignalsTheAffectedWindows(t *testing.T) {
	if testing.Short() {
		t.Skip("kfake")
	}
	f := newTruthFixture(t)
	var mu sync.Mutex
	got := map[string][]activities.LateItem{}
	f.a.SignalLate = func(_ context.Context, stream string, items []activities.LateItem) error {
		mu.Lock()
		defer mu.Unlock()
		got[stream] = append(got[stream], items...)
		return nil
	}
	first, err := run[activities.ReadLateResult](t, f.a, f.a.ReadLate, activities.ReadLateInput{Topic: lateTopic, Partition: 0, From: -1, Wait: 100 * time.Millisecond})
	if err != nil || first.Next != 0 || first.Records != 0 {
		t.Fatalf("fresh watcher %+v %v", first, err)
	}
	f.event(1, "u7", t0.Add(7*time.Minute), t0.Add(time.Hour), 42)
	raw := f.raw[1][0]
	lateRec := func(stream string, offset int) *kgo.Record {
		return &kgo.Record{Topic: lateTopic, Partition: 0, Key: raw.Key, Value: raw.Value, Headers: []kgo.RecordHeader{
			{Key: event.HeaderReason, Value: []byte("late")},
			{Key: "reckon.stream", Value: []byte(stream)},
			{Key: event.HeaderSourceTopic, Value: []byte(rawTopic)},
			{Key: event.HeaderSourcePartition, Value: []byte("1")},
			{Key: event.HeaderSourceOffset, Value: []byte(strconv.Itoa(offset))},
		}}
	}
	cl, err := kgo.NewClient(append(kafkaconn.Opts(f.cfg.Kafka, "test-late"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), lateRec("payments", 17), lateRec("nope", 18)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	res, err := run[activities.ReadLateResult](t, f.a, f.a.ReadLate, activities.ReadLateInput{Topic: lateTopic, Partition: 0, From: first.Next, Wait: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Records != 2 || res.Items != 1 || res.Skipped != 1 || res.Next != 2 || !res.CaughtUp {
		t.Fatalf("result %+v", res)
	}
	items := got["payments"]
	if len(items) != 1 {
		t.Fatalf("signalled %v", got)
	}
	it := items[0]
	if it.Key != "u7" || !it.WindowStart.Equal(t0.Add(5*time.Minute)) || !it.WindowEnd.Equal(t0.Add(10*time.Minute)) || it.SourcePartition != 1 || it.SourceOffset != 17 {
		t.Fatalf("item %+v", it)
	}
}
