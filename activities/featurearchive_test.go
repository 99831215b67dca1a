package activities_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/activities"
	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
	"reckon/internal/testing/testenv"
	"reckon/lake"
)

// TestArchiveFeaturesExactlyOnce: a step archives exactly the committed
// features of its fixed range (aborted ones never, records that are not
// features counted, not archived), per stream and event date; the same
// step again rewrites the same files; and a step whose earlier attempt
// died between its files and its progress, redone from a fresh cursor
// with another end (a workflow started afresh), redoes the earlier range
// instead of doubling its offsets.
func TestArchiveFeaturesExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("kfake")
	}
	const topic = "reckon-features"
	_, brokers := testenv.Kafka(t, 1, "", topic)
	cfg, err := config.Load("", nil, []string{"kafka.brokers=" + brokers[0], "lake.root=" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lake.Open(lake.Options{Root: cfg.Lake.Root})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := activities.NewKafka(cfg.Kafka, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	a := &activities.BatchTruth{Cfg: cfg, Lake: lk, Kafka: kc, Now: func() time.Time { return t0.Add(48 * time.Hour) }}
	tx, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "test-txn"), kgo.TransactionalID("test-features"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	seq := 0
	committed := map[string]bool{} // event ids of committed features
	txn := func(commit bool, n int, extra ...*kgo.Record) {
		t.Helper()
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		recs := extra
		for range n {
			seq++
			stream := "payments"
			if seq%3 == 0 {
				stream = "m8-suhu"
			}
			et := time.Date(2026, 11, 7, 23, 59, 50, 0, time.UTC).Add(time.Duration(seq) * time.Second) // across midnight
			f := event.Feature{Stream: stream, Key: fmt.Sprintf("u%d", seq%4), EventID: fmt.Sprintf("ev-%03d", seq), EventTime: et,
				Size: time.Minute, Count: int64(seq), Sum: float64(seq) * 10, Watermark: et.Add(-5 * time.Second),
				EmittedAt: et.Add(time.Second), ArrivedAt: et, SourceTopic: "payments-kejadian", SourceOffset: int64(seq)}
			recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Key: []byte(f.Key), Value: f.AppendJSON(nil)})
			if commit {
				committed[f.EventID] = true
			}
		}
		if err := tx.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := tx.EndTransaction(context.Background(), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	txn(true, 12)
	txn(false, 5) // aborted
	txn(true, 9, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("not a feature")})

	// archived checks the table holds every committed feature once, each at
	// its own offset.
	archived := func(when string) {
		t.Helper()
		seen, offsets := map[string]bool{}, map[int64]bool{}
		for _, s := range []string{"payments", "m8-suhu"} {
			rows, err := lk.ReadFeatures(t.Context(), s, t0.Add(-48*time.Hour), t0.Add(48*time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				if seen[r.EventID] || offsets[r.KafkaOffset] || !committed[r.EventID] {
					t.Fatalf("%s: %s at offset %d archived twice or never committed", when, r.EventID, r.KafkaOffset)
				}
				seen[r.EventID], offsets[r.KafkaOffset] = true, true
				if r.Count == 0 || r.SourceTopic != "payments-kejadian" || r.SourceOffset == 0 {
					t.Errorf("%s: row %+v lost fields", when, r)
				}
			}
		}
		if len(seen) != len(committed) {
			t.Fatalf("%s: %d of %d committed features archived", when, len(seen), len(committed))
		}
	}

	end, err := run[activities.PaneEnd](t, a, a.FeatureArchiveEnd, topic, int32(0))
	if err != nil {
		t.Fatal(err)
	}
	// An earlier run's step [0, 10) wrote its intent and files and died
	// before its progress.
	in := activities.ArchiveFeaturesInput{Topic: topic, Partition: 0, From: 0, To: 10, End: end.End, ObservedAt: end.ObservedAt}
	if _, err := run[activities.ArchiveFeaturesResult](t, a, a.ArchiveFeatures, in); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(cfg.Lake.Root, "_progress", "topic="+topic, "partition=0.json")); err != nil {
		t.Fatal(err)
	}
	cur, err := run[int64](t, a, a.FeatureCursor, topic, int32(0))
	if err != nil {
		t.Fatal(err)
	}
	// The fresh run cuts [cursor, end) in one step: the activity redoes
	// [0, 10) first.
	in = activities.ArchiveFeaturesInput{Topic: topic, Partition: 0, From: cur, To: end.End, End: end.End, ObservedAt: end.ObservedAt}
	res, err := run[activities.ArchiveFeaturesResult](t, a, a.ArchiveFeatures, in)
	if err != nil {
		t.Fatal(err)
	}
	if cur != 0 || res.Next != 10 || res.Features != 10 {
		t.Fatalf("cursor %d, redone step %+v, want [0, 10) again", cur, res)
	}
	in.From = res.Next
	if res, err = run[activities.ArchiveFeaturesResult](t, a, a.ArchiveFeatures, in); err != nil {
		t.Fatal(err)
	}
	if res.Next != end.End || res.Skipped != 1 || res.Features != int64(len(committed))-10 {
		t.Fatalf("second step %+v (end %d, %d committed)", res, end.End, len(committed))
	}
	archived("after the redone step")
	pr, err := lk.ReadProgress(t.Context(), topic, 0)
	if err != nil || pr.NextOffset != end.End || !pr.ArchivedThrough.Equal(end.ObservedAt) {
		t.Fatalf("progress %+v %v", pr, err)
	}
	// The same step again (a retry after its progress was recorded).
	if res, err = run[activities.ArchiveFeaturesResult](t, a, a.ArchiveFeatures, in); err != nil || res.Next != end.End {
		t.Fatalf("retry %+v %v", res, err)
	}
	archived("after a retry")
	if res.Files[0] != "features/stream=m8-suhu/event_date=2026-11-08/reckon-features-0-10-"+fmt.Sprint(end.End-1)+".parquet" {
		t.Errorf("files %v", res.Files)
	}
}
