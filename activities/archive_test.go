package activities_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/activities"
	"reckon/internal/config"
	"reckon/internal/kafkaconn"
	"reckon/internal/testing/testenv"
	"reckon/lake"
)

// TestArchiveRangeCatchesUpPastTransactionMarkers: on a raw partition
// written by a transactional producer every transaction ends with a
// marker that takes an offset but is no record, and an aborted
// transaction's records are no records either. The archive, driven step
// after step as its workflow does, archives exactly the committed records
// (never a marker, never an aborted record), and reports caught up once
// only markers and aborted records are left: its cursor and progress reach
// the partition's last stable offset and the partition counts as archived
// through the last step's observation. "commit": the partition ends with
// a commit marker; "abort": with an aborted transaction and its marker.
func TestArchiveRangeCatchesUpPastTransactionMarkers(t *testing.T) {
	if testing.Short() {
		t.Skip("kfake")
	}
	for _, tc := range []struct {
		name string
		txns []bool // commit (true) or abort (false) each transaction, 4 records each
	}{
		{"commit", []bool{true, false, true}},
		{"abort", []bool{true, true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, brokers := testenv.Kafka(t, 1, "", rawTopic)
			cfg, err := config.Load("", nil, []string{"kafka.brokers=" + brokers[0], "lake.root=" + t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			want, end := produceTransactions(t, cfg, tc.txns, 4)
			lk, err := lake.Open(lake.Options{Root: cfg.Lake.Root})
			if err != nil {
				t.Fatal(err)
			}
			kc, err := activities.NewKafka(cfg.Kafka, "test")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(kc.Close)
			a := &activities.Archive{Cfg: cfg, Lake: lk, Kafka: kc}
			env := activityEnv(a)
			var (
				cursor int64
				res    activities.ArchiveRangeResult
			)
			// Three records a step: steps end beside markers and aborted
			// records, and at most one step per record and marker is needed.
			for step := 0; !res.CaughtUp; step++ {
				if step > int(end) {
					t.Fatalf("not caught up after %d steps: cursor %d, end %d, last step %+v", step, cursor, end, res)
				}
				v, err := env.ExecuteActivity(a.ArchiveRange, activities.ArchiveRangeInput{Topic: rawTopic, Partition: 0, From: cursor, MaxRecords: 3, MaxWait: 200 * time.Millisecond})
				if err != nil {
					t.Fatalf("step from %d: %v", cursor, err)
				}
				res = activities.ArchiveRangeResult{}
				if err := v.Get(&res); err != nil {
					t.Fatal(err)
				}
				if res.Next < cursor {
					t.Fatalf("step from %d went back: %+v", cursor, res)
				}
				cursor = res.Next
			}
			if res.Next != end || res.End != end {
				t.Errorf("caught up at %d (end %d), want both at the last stable offset %d", res.Next, res.End, end)
			}
			seen := lakeOffsets(t, dirFiles(t, cfg.Lake.Root))
			var got []int64
			for o, n := range seen {
				if n != 1 {
					t.Errorf("offset %d archived %d times, want once", o, n)
				}
				got = append(got, o)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("archived offsets %v, want the committed records' %v", got, want)
			}
			p, err := lk.ReadProgress(t.Context(), rawTopic, 0)
			if err != nil || p.NextOffset != end || !p.ArchivedThrough.Equal(res.ObservedAt) {
				t.Errorf("progress %+v, %v; want next offset %d, archived through %s", p, err, end, res.ObservedAt)
			}
			// A further step from the end stays caught up and archives
			// nothing.
			v, err := env.ExecuteActivity(a.ArchiveRange, activities.ArchiveRangeInput{Topic: rawTopic, Partition: 0, From: cursor, MaxWait: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			var again activities.ArchiveRangeResult
			if err := v.Get(&again); err != nil {
				t.Fatal(err)
			}
			if !again.CaughtUp || again.Next != end || again.Records != 0 {
				t.Errorf("step from the end: %+v", again)
			}
		})
	}
}

// produceTransactions produces n payments to partition 0 of the raw topic
// in each of a transactional producer's transactions, committing or
// aborting each as commits says, and returns the offsets of the committed
// records and the partition's last stable offset (one past the last
// transaction's marker).
func produceTransactions(t *testing.T, cfg *config.Config, commits []bool, n int) (committed []int64, end int64) {
	t.Helper()
	cl, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "test"),
		kgo.TransactionalID("test-archive-"+t.Name()), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	i := 0
	for _, commit := range commits {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for range n {
			ts := t0.Add(time.Duration(i) * time.Second)
			v := fmt.Sprintf(`{"event_id":%q,"event_type":"payment.checkout.completed","occurred_at":%q,"data":{"user_id":"u%d","amount":%d,"currency":"IDR","channel":"web"}}`,
				uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "txn%d", i)).String(), ts.Format(time.RFC3339Nano), i%3, 1000+i)
			recs = append(recs, &kgo.Record{Topic: rawTopic, Partition: 0, Value: []byte(v), Timestamp: ts})
			i++
		}
		res := cl.ProduceSync(t.Context(), recs...)
		if err := res.FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(t.Context(), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
		if commit {
			for _, r := range res {
				committed = append(committed, r.Record.Offset)
			}
		}
	}
	adm, closeAdm, err := kafkaconn.NewAdmin(cfg.Kafka, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer closeAdm()
	offs, err := adm.ListCommittedOffsets(t.Context(), rawTopic)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := offs.Lookup(rawTopic, 0)
	slices.Sort(committed)
	if last := committed[len(committed)-1]; o.Offset <= last+1 {
		t.Fatalf("last stable offset %d: want a marker after the last record %d", o.Offset, last)
	}
	return committed, o.Offset
}

// dirFiles reads every file under the directory lake at root, keyed by
// its path relative to root.
func dirFiles(t *testing.T, root string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		b, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
