package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/sdk/testsuite"

	"reckon/activities"
	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
	"reckon/internal/testing/testenv"
	"reckon/lake"
)

const (
	rawTopic  = "payments-kejadian"
	summaries = "m8-suhu-rangkuman"
	lateTopic = "reckon-late"
)

var t0 = time.Date(2026, 11, 7, 8, 0, 0, 0, time.UTC)

// truthFixture is a kfake broker, a lake in a temp dir and a config
// pointing at both.
type truthFixture struct {
	cfg *config.Config
	lk  *lake.Lake
	a   *activities.BatchTruth
	cl  *kgo.Client
	seq int
	// offsets of raw records produced per partition (for the lake)
	raw map[int32][]lake.RawRecord
}

func newTruthFixture(t *testing.T) *truthFixture {
	t.Helper()
	_, brokers := testenv.Kafka(t, 2, "", rawTopic, summaries, lateTopic, "m8-suhu-kejadian", "reckon-stream-progress")
	cfg, err := config.Load("", nil, []string{"kafka.brokers=" + brokers[0], "lake.root=" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lake.Open(lake.Options{Root: cfg.Lake.Root})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "test"), kgo.ProducerLinger(0))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	kc, err := activities.NewKafka(cfg.Kafka, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	return &truthFixture{cfg: cfg, lk: lk, cl: cl, a: &activities.BatchTruth{Cfg: cfg, Lake: lk, Kafka: kc, Now: func() time.Time { return t0.Add(48 * time.Hour) }}, raw: map[int32][]lake.RawRecord{}}
}

// event adds a payment of user at et (arriving at arrival) to the raw
// topic's partition p, to be archived by archive().
func (f *truthFixture) event(p int32, user string, et, arrival time.Time, amount float64) string {
	f.seq++
	id := uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "ev%d", f.seq)).String()
	v := fmt.Sprintf(`{"event_id":%q,"event_type":"payment.checkout.completed","occurred_at":%q,"data":{"user_id":%q,"amount":%g,"currency":"IDR","channel":"web"}}`,
		id, et.Format(time.RFC3339Nano), user, amount)
	f.raw[p] = append(f.raw[p], lake.RawRecord{Offset: int64(len(f.raw[p])), Timestamp: arrival, Key: []byte(user), Value: []byte(v)})
	return id
}

// redeliver adds the same bytes again (a producer redelivery).
func (f *truthFixture) redeliver(p int32, i int, arrival time.Time) {
	r := f.raw[p][i]
	r.Offset, r.Timestamp = int64(len(f.raw[p])), arrival
	f.raw[p] = append(f.raw[p], r)
}

// rawWriter is the archiver's lake writer for the payments raw topic.
func (f *truthFixture) rawWriter(t *testing.T) *lake.RawWriter {
	t.Helper()
	gate, err := event.NewGate(f.cfg.Gate)
	if err != nil {
		t.Fatal(err)
	}
	w, err := f.lk.NewRawWriter(lake.RawTable{Topic: rawTopic, KeyPath: "data.user_id", ValuePath: "data.amount"}, gate)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// archive writes every raw record to the lake with progress through `through`.
func (f *truthFixture) archive(t *testing.T, through time.Time) {
	t.Helper()
	w := f.rawWriter(t)
	for p := int32(0); p < 2; p++ {
		if recs := f.raw[p]; len(recs) > 0 {
			if _, err := w.WriteRange(t.Context(), p, 0, int64(len(recs)-1), recs); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.lk.WriteProgress(t.Context(), lake.Progress{Topic: rawTopic, Partition: p, NextOffset: int64(len(f.raw[p])), ArchivedThrough: through}); err != nil {
			t.Fatal(err)
		}
	}
}

// pane is a stream pane made at processed on the stream's processing
// clock and produced two hours later (a worker re-processing after a
// restart): the batch must judge arrivals by processed_at, not emitted_at.
func (f *truthFixture) pane(user string, win time.Time, count int64, sum, mn, mx float64, version int64, timing event.Timing, processed time.Time) *kgo.Record {
	p := event.Pane{Stream: "payments", Key: user, WindowStart: win, WindowEnd: win.Add(5 * time.Minute),
		Count: count, Sum: sum, Min: mn, Max: mx, Version: version, Timing: timing, ComputedBy: event.ComputedByStream,
		Watermark: processed.Add(-5 * time.Second), ProcessedAt: processed, EmittedAt: processed.Add(2 * time.Hour)}
	return &kgo.Record{Topic: summaries, Key: []byte(p.RecordKey()), Value: p.AppendJSON(nil)}
}

func (f *truthFixture) produce(t *testing.T, recs ...*kgo.Record) {
	t.Helper()
	if err := f.cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// published reads every committed pane on the summaries topic: each
// partition up to its last stable offset at the call. The read keeps the
// transaction markers, so it knows when it has passed the last offset
// (the last one is usually a marker) however slowly the broker answers;
// it never stops at a quiet moment.
func (f *truthFixture) published(t *testing.T) []event.Pane {
	t.Helper()
	cl, err := kgo.NewClient(append(kafkaconn.Opts(f.cfg.Kafka, "test-read"),
		kgo.ConsumeTopics(summaries), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, summaries)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	left := map[int32]int64{} // partition -> its end, until the read passed it
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	var out []event.Pane
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("summaries not read to their ends within a minute: partition -> end still to reach %v", left)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("read %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
			if r.Attrs.IsControl() {
				return
			}
			var p event.Pane
			if err := json.Unmarshal(r.Value, &p); err != nil {
				t.Fatalf("pane: %v", err)
			}
			out = append(out, p)
		})
	}
	return out
}

// latest is the highest version per key|window_start, and every version seen.
func latest(ps []event.Pane) (map[string]event.Pane, map[string][]int64) {
	hi := map[string]event.Pane{}
	all := map[string][]int64{}
	for _, p := range ps {
		k := p.Key + "|" + p.WindowStart.Format("15:04")
		all[k] = append(all[k], p.Version)
		if p.Version > hi[k].Version {
			hi[k] = p
		}
	}
	return hi, all
}

func run[T any](t *testing.T, a *activities.BatchTruth, fn any, in ...any) (T, error) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	var out T
	v, err := env.ExecuteActivity(fn, in...)
	if err != nil {
		return out, err
	}
	return out, v.Get(&out)
}

// scenario: five users' 5-minute windows on 2026-11-07 08:00..08:15.
//
//	u1 08:00  stream v1 = truth (2 events)                → matched
//	u2 08:00  one event arrived after the stream's pane   → v2, late beyond lateness
//	u3 08:05  no pane at all                              → v1, missing
//	u4 08:10  stream counted a redelivery (v1, v2 late)   → v3, duplicates
//	u5 08:10  pane, but no valid event in the lake        → v2, retracted
func scenario(t *testing.T, f *truthFixture) {
	t.Helper()
	w0, w1, w2 := t0, t0.Add(5*time.Minute), t0.Add(10*time.Minute)
	f.event(0, "u1", w0.Add(time.Minute), w0.Add(time.Minute), 100)
	f.event(0, "u1", w0.Add(2*time.Minute), w0.Add(2*time.Minute), 200)
	f.event(1, "u2", w0.Add(time.Minute), w0.Add(time.Minute), 500)
	f.event(1, "u2", w0.Add(3*time.Minute), w0.Add(30*time.Minute), 700) // too late
	f.event(0, "u3", w1.Add(time.Minute), w1.Add(25*time.Minute), 50)    // too late, the only one
	f.event(1, "u4", w2.Add(time.Minute), w2.Add(time.Minute), 10)
	f.event(1, "u4", w2.Add(2*time.Minute), w2.Add(2*time.Minute), 10)
	f.redeliver(1, 2, w2.Add(3*time.Minute))                            // u4's first event again: the stream counted it twice
	f.event(0, "u9", t0.Add(20*time.Minute), t0.Add(20*time.Minute), 1) // outside the range
	f.archive(t, t0.Add(2*time.Hour))
	f.produce(t,
		f.pane("u1", w0, 2, 300, 100, 200, 1, event.TimingOnTime, w0.Add(5*time.Minute+5*time.Second)),
		f.pane("u2", w0, 1, 500, 500, 500, 1, event.TimingOnTime, w0.Add(5*time.Minute+5*time.Second)),
		f.pane("u4", w2, 2, 20, 10, 10, 1, event.TimingOnTime, w2.Add(5*time.Minute+5*time.Second)),
		f.pane("u4", w2, 3, 30, 10, 10, 2, event.TimingLate, w2.Add(6*time.Minute)),
		f.pane("u5", w2, 1, 7, 7, 7, 1, event.TimingOnTime, w2.Add(5*time.Minute+5*time.Second)),
	)
	// An aborted transaction's pane must be invisible.
	tx, err := kgo.NewClient(append(kafkaconn.Opts(f.cfg.Kafka, "test-txn"), kgo.TransactionalID("test-aborted"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(context.Background(), f.pane("u1", w0, 99, 1, 1, 1, 9, event.TimingLate, w0)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := tx.EndTransaction(context.Background(), kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
}

func recomputeInput(trigger string) activities.RecomputeInput {
	return activities.RecomputeInput{Stream: "payments", From: t0, To: t0.Add(15 * time.Minute), Trigger: trigger}
}

// TestRecomputePublishesVersionedCorrections is the heart of the batch
// truth: version latest+1 where the truth differs or no pane exists, with
// reasons; the price-of-speed report; truth rows in the lake; a repeat and
// a dry run publish nothing new.
func TestRecomputePublishesVersionedCorrections(t *testing.T) {
	if testing.Short() {
		t.Skip("kfake")
	}
	f := newTruthFixture(t)
	scenario(t, f)
	before := len(f.published(t))

	// The extent of the day: the last window with events (u9, 08:20) or panes.
	ext, err := run[time.Time](t, f.a, f.a.RecomputeExtent, activities.ExtentInput{Stream: "payments", From: t0.Truncate(24 * time.Hour), To: t0.Truncate(24 * time.Hour).Add(24 * time.Hour)})
	if err != nil || !ext.Equal(t0.Add(25*time.Minute)) {
		t.Fatalf("extent %v, %v; want 08:25", ext, err)
	}
	ext, err = run[time.Time](t, f.a, f.a.RecomputeExtent, activities.ExtentInput{Stream: "payments", From: t0.Add(2 * time.Hour), To: t0.Add(3 * time.Hour)})
	if err != nil || !ext.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("extent of an empty range %v, %v", ext, err)
	}

	dry := recomputeInput(activities.TriggerManual)
	dry.DryRun = true
	res, err := run[activities.RecomputeResult](t, f.a, f.a.RecomputeWindows, dry)
	if err != nil {
		t.Fatal(err)
	}
	if res.Report.Corrected != 4 || len(res.Changes) != 4 || len(res.Files) != 0 {
		t.Fatalf("dry run: %+v files %v", res.Report, res.Files)
	}
	if n := len(f.published(t)); n != before {
		t.Fatalf("dry run published %d records", n-before)
	}

	res, err = run[activities.RecomputeResult](t, f.a, f.a.RecomputeWindows, recomputeInput(activities.TriggerReconcile))
	if err != nil {
		t.Fatal(err)
	}
	r := res.Report
	if r.Windows != 5 || r.Matched != 1 || r.Corrected != 4 || r.StreamExact != 1 || r.Missing != 1 || r.Events != 7 {
		t.Fatalf("report %+v", r)
	}
	if r.Reasons != (activities.ReasonCounts{BeyondLateness: 1, Missing: 1, Duplicates: 1, Retracted: 1}) {
		t.Fatalf("reasons %+v", r.Reasons)
	}
	// Stream errors: u2 count 1 sum 700; u3 count 1 sum 50; u4 count 1 sum 10; u5 count 1 sum 7.
	if r.CountErrMax != 1 || r.CountErrTotal != 4 || r.SumErrMax != 700 || r.SumErrTotal != 767 || r.CountErrMean != 0.8 {
		t.Fatalf("errors %+v", r)
	}
	// u2's late event and u3's only event arrived after the stream's last pane.
	if r.EventsBeyondLateness != 2 {
		t.Fatalf("events beyond lateness %d", r.EventsBeyondLateness)
	}
	hi, all := latest(f.published(t))
	want := map[string]struct {
		v     int64
		count int64
		sum   float64
	}{"u1|08:00": {1, 2, 300}, "u2|08:00": {2, 2, 1200}, "u3|08:05": {1, 1, 50}, "u4|08:10": {3, 2, 20}, "u5|08:10": {2, 0, 0}}
	for k, w := range want {
		p := hi[k]
		if p.Version != w.v || p.Count != w.count || p.Sum != w.sum {
			t.Errorf("%s: latest v%d %d/%g, want v%d %d/%g", k, p.Version, p.Count, p.Sum, w.v, w.count, w.sum)
		}
		if w.v > 1 || k == "u3|08:05" {
			if p.Timing != event.TimingCorrection || p.ComputedBy != event.ComputedByBatch || p.Reason == "" {
				t.Errorf("%s: correction %+v", k, p)
			}
		}
	}
	if !strings.Contains(hi["u2|08:00"].Reason, "late events beyond lateness: 1") || !strings.Contains(hi["u4|08:10"].Reason, "duplicates counted: 1") {
		t.Errorf("reasons: %q, %q", hi["u2|08:00"].Reason, hi["u4|08:10"].Reason)
	}
	truth, err := f.lk.ReadTruth(t.Context(), "payments", t0, t0.Add(time.Hour))
	if err != nil || len(truth) != 5 {
		t.Fatalf("truth rows %d, %v", len(truth), err)
	}

	// A repeat (a retry, or the next reconciliation) publishes nothing.
	res, err = run[activities.RecomputeResult](t, f.a, f.a.RecomputeWindows, recomputeInput(activities.TriggerReplay))
	if err != nil {
		t.Fatal(err)
	}
	if res.Report.Corrected != 0 || res.Report.Matched != 5 || res.Report.AlreadyCorrected != 4 {
		t.Fatalf("repeat: %+v", res.Report)
	}
	_, all2 := latest(f.published(t))
	if fmt.Sprint(all) != fmt.Sprint(all2) {
		t.Fatalf("repeat published:\n%v\n%v", all, all2)
	}

	// With the pane history archived, latest versions come from the lake
	// plus the topic's tail; still nothing new.
	for p := int32(0); p < 2; p++ {
		end, err := run[activities.PaneEnd](t, f.a, f.a.PaneArchiveEnd, summaries, p)
		if err != nil {
			t.Fatal(err)
		}
		ar, err := run[activities.ArchivePanesResult](t, f.a, f.a.ArchivePanes, activities.ArchivePanesInput{Topic: summaries, Partition: p, From: 0, To: end.End, End: end.End, ObservedAt: end.ObservedAt})
		if err != nil {
			t.Fatal(err)
		}
		if ar.Next != end.End || ar.Skipped != 0 {
			t.Fatalf("pane archive %d: %+v", p, ar)
		}
	}
	hist, err := f.lk.ReadPanes(t.Context(), "payments", t0, t0.Add(time.Hour))
	if err != nil || len(hist) != 9 { // 5 stream panes + 4 corrections; the aborted one is not history
		t.Fatalf("pane history %d rows, %v", len(hist), err)
	}
	res, err = run[activities.RecomputeResult](t, f.a, f.a.RecomputeWindows, recomputeInput(activities.TriggerReplay))
	if err != nil || res.Report.Corrected != 0 {
		t.Fatalf("after pane archive: %+v %v", res.Report, err)
	}
}

// TestConcurrentRecomputesNeverShareAVersion: recomputes of the same stream
// and date publish one at a time (their transactional id fences the
// others' commits), and each re-reads the latest versions inside that
// critical section: a window someone corrected meanwhile is left alone.
// Every window ends with one correction, never two panes of one version.
func TestConcurrentRecomputesNeverShareAVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("kfake")
	}
	f := newTruthFixture(t)
	scenario(t, f)
	var wg sync.WaitGroup
	var mu sync.Mutex
	corrected := int64(0)
	failures := 0
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for attempt := 0; attempt < 30; attempt++ {
				if attempt > 0 {
					// Temporal retries with backoff; so does this test, or
					// three tight loops could keep fencing one another.
					time.Sleep(time.Duration(rand.IntN(50*attempt)+10) * time.Millisecond)
				}
				res, err := run[activities.RecomputeResult](t, f.a, f.a.RecomputeWindows, recomputeInput(activities.TriggerManual))
				mu.Lock()
				if err == nil {
					corrected += res.Report.Corrected
					mu.Unlock()
					return
				}
				failures++
				mu.Unlock()
			}
			t.Error("recompute never succeeded")
		}()
	}
	wg.Wait()
	_, all := latest(f.published(t))
	for k, vs := range all {
		seen := map[int64]bool{}
		for _, v := range vs {
			if seen[v] {
				t.Errorf("%s: version %d published twice (%v)", k, v, vs)
			}
			seen[v] = true
		}
	}
	if corrected != 4 {
		t.Fatalf("corrections published %d in total (fenced attempts %d), want 4", corrected, failures)
	}
	t.Logf("3 concurrent recomputes: %d fenced attempts retried", failures)
}

// TestRecomputeRejectsBadRanges: unaligned and cross-midnight ranges are
// refused for good (no retry can fix them).
func TestRecomputeRejectsBadRanges(t *testing.T) {
	f := &truthFixture{}
	cfg, err := config.Load("", nil, []string{"lake.root=" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	lk, _ := lake.Open(lake.Options{Root: cfg.Lake.Root})
	f.a = &activities.BatchTruth{Cfg: cfg, Lake: lk}
	for _, in := range []activities.RecomputeInput{
		{Stream: "payments", From: t0.Add(time.Minute), To: t0.Add(time.Hour)},
		{Stream: "payments", From: t0, To: t0.Add(24 * time.Hour)},
		{Stream: "payments", From: t0, To: t0},
		{Stream: "nope", From: t0, To: t0.Add(time.Hour)},
	} {
		_, err := run[activities.RecomputeResult](t, f.a, f.a.RecomputeWindows, in)
		if err == nil || !strings.Contains(err.Error(), activities.ErrTypeTruthInput) && !errors.Is(err, context.Canceled) {
			t.Errorf("%v..%v %s: %v", in.From, in.To, in.Stream, err)
		}
	}
}

// TestRecomputeExtentHopping: a hopping stream's extent ends on a window
// boundary past its last window start with events, and counts the events
// after the range that windows starting inside it cover.
func TestRecomputeExtentHopping(t *testing.T) {
	if testing.Short() {
		t.Skip("kfake")
	}
	f := newTruthFixture(t)
	for i := range f.cfg.Streams {
		if f.cfg.Streams[i].Name == "payments" {
			f.cfg.Streams[i].Hop = time.Minute // 5-minute windows every minute
		}
	}
	f.event(0, "u1", t0.Add(2*time.Minute), t0.Add(2*time.Minute), 1)
	f.event(1, "u2", t0.Add(21*time.Minute), t0.Add(21*time.Minute), 1)
	f.archive(t, t0.Add(2*time.Hour))
	for _, c := range []struct{ from, to, want time.Duration }{
		{0, 10 * time.Minute, 5 * time.Minute},
		// u2 at 08:21 is in the windows starting 08:17 … 08:21: those of
		// [08:10, 08:20) from 08:17 on.
		{10 * time.Minute, 20 * time.Minute, 20 * time.Minute},
		{20 * time.Minute, 30 * time.Minute, 25 * time.Minute},
		{30 * time.Minute, 40 * time.Minute, 30 * time.Minute},
	} {
		ext, err := run[time.Time](t, f.a, f.a.RecomputeExtent,
			activities.ExtentInput{Stream: "payments", From: t0.Add(c.from), To: t0.Add(c.to)})
		if err != nil || !ext.Equal(t0.Add(c.want)) {
			t.Errorf("extent of [%v, %v): %v, %v; want %v", c.from, c.to, ext.Sub(t0), err, c.want)
		}
	}
}
