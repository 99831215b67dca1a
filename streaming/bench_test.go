package streaming

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
	"reckon/internal/kafkaconn"
	"reckon/verify/generate"
)

// BenchmarkStreamEndToEnd measures the stream worker end to end through an
// in-process kfake broker with the exactly-once effect on (one transaction
// per iteration holding outputs, operator state and offsets): events/s from
// the first record to the last committed offset. Records are produced
// before the clock starts; generator traffic is payments with the default
// mix (late, duplicates, poison), rolling features on. 200,000 events;
// RECKON_BENCH_E2E_EVENTS sets another count (the rate falls as the dedup
// set, the rolling state and the in-memory broker's log grow; see
// docs/benchmarks-notes.md).
func BenchmarkStreamEndToEnd(b *testing.B) {
	n := int64(200_000)
	if s := os.Getenv("RECKON_BENCH_E2E_EVENTS"); s != "" {
		var err error
		if n, err = strconv.ParseInt(s, 10, 64); err != nil || n < 1 {
			b.Fatalf("RECKON_BENCH_E2E_EVENTS=%q: not a positive count", s)
		}
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		cfg, recs := benchEnv(b, n)
		w, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		b.StartTimer()
		start, cpu0 := time.Now(), cpuTime()
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		// Look often: at 100 ms (waitDone's interval) the wait alone
		// would add 50 ms on average to a run of well under a second.
		wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Minute)
		if err := waitCaughtUp(wctx, cfg, 2*time.Millisecond, nil); err != nil {
			b.Fatalf("stream worker did not finish: %v", err)
		}
		wcancel()
		el, cpu := time.Since(start), cpuTime()-cpu0
		b.StopTimer()
		cancel()
		<-done
		b.ReportMetric(float64(len(recs))/el.Seconds(), "events/s")
		b.ReportMetric(float64(el.Nanoseconds())/float64(len(recs)), "ns/event")
		// CPU time of the whole process (worker and in-process broker): on
		// a shared machine a steadier measure of cost than wall time.
		b.ReportMetric(float64(cpu)/float64(len(recs)), "cpu-ns/event")
	}
}

func benchEnv(b *testing.B, n int64) (*config.Config, []*kgo.Record) {
	cfg, recs := newTestEnv(b, n, func(o *generate.Options) {
		o.Rate, o.Keys = 1000, 10_000 // 60 s rolling windows hold a handful of events per user, as in payments
		o.PoisonFraction = 0          // the 1 MiB oversized poison would dominate the bytes moved
	})
	productionCheckpoints(b, cfg)
	produce(b, cfg, recs)
	return cfg, recs
}

// productionCheckpoints undoes the tests' tiny checkpoints (every 150
// records, 2 KiB chunks, so that every restore in the tests mixes chunked
// checkpoints and replay logs) for a benchmark: the defaults a user runs
// (checkpoint_interval, checkpoint_records, 4 MiB chunks). With the test
// settings every transaction of a busy partition wrote a full checkpoint.
func productionCheckpoints(b *testing.B, cfg *config.Config) {
	def, err := config.Load("", nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Stream.CheckpointInterval = def.Stream.CheckpointInterval
	cfg.Stream.CheckpointRecords = def.Stream.CheckpointRecords
	prev := chunkBytes
	chunkBytes = productionChunkBytes
	b.Cleanup(func() { chunkBytes = prev })
}

// BenchmarkStreamLatency measures the time from producing an event to its
// rolling feature being readable by a read-committed consumer, at a paced
// 10,000 events/s (goal: p99 < 50 ms). Outputs become visible when their
// transaction commits, so an event waits up to one commit interval (20 ms
// here): the p99 cannot fall much below it. The feature's emitted_at (when
// the worker produced it in its transaction; not arrived_at, the source
// record's timestamp) splits the total: event → emitted_at
// (p99-emitted-ms: broker, fetch, processing) and emitted_at → readable
// (p99-commit-ms: the rest of the transaction and its commit).
func BenchmarkStreamLatency(b *testing.B) {
	const rate, seconds = 10_000, 5
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		cfg, _ := newTestEnv(b, 1)
		productionCheckpoints(b, cfg)
		cfg.Stream.CommitInterval = 20 * time.Millisecond
		w, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()

		// Reader of features: event time, emitted_at, visible time.
		seen := make(chan [3]int64, rate*seconds*2)
		rd, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "bench-read"),
			kgo.ConsumeTopics(cfg.Topics.Features), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(10*time.Millisecond))...)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for ctx.Err() == nil {
				fs := rd.PollFetches(ctx)
				now := time.Now().UnixNano()
				fs.EachRecord(func(r *kgo.Record) {
					var f struct {
						EventTime time.Time `json:"event_time"`
						EmittedAt time.Time `json:"emitted_at"`
					}
					if json.Unmarshal(r.Value, &f) == nil {
						seen <- [3]int64{f.EventTime.UnixNano(), f.EmittedAt.UnixNano(), now}
					}
				})
			}
		}()
		pr, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "bench-produce"), kgo.ProducerLinger(0))...)
		if err != nil {
			b.Fatal(err)
		}
		// Warm up: one event end to end, so the group join and the first
		// transactions are behind us (a fixed sleep was too short on a
		// loaded machine: no feature seen at all).
		warm := time.Now().UTC()
		pr.Produce(ctx, &kgo.Record{Topic: "payments-kejadian", Key: []byte("warmup"), Timestamp: warm, Value: fmt.Appendf(nil,
			`{"event_id":%q,"event_type":"payment.checkout.completed","occurred_at":%q,"data":{"user_id":"warmup","amount":1}}`,
			uuid.NewString(), warm.Format(time.RFC3339Nano))}, nil)
		select {
		case <-seen:
		case <-time.After(time.Minute):
			b.Fatal("the warm-up event's feature was not seen within a minute")
		}
		b.StartTimer()
		// Event time = produce time, so latency = visible − event time.
		tick := time.NewTicker(time.Millisecond)
		sent := 0
		start := time.Now()
		for sent < rate*seconds {
			<-tick.C
			due := int(time.Since(start).Seconds()*rate) - sent
			for j := 0; j < due; j++ {
				now := time.Now().UTC()
				v := fmt.Sprintf(`{"event_id":%q,"event_type":"payment.checkout.completed","occurred_at":%q,"data":{"user_id":"u%d","amount":1000}}`,
					uuid.NewString(), now.Format(time.RFC3339Nano), sent%10000)
				pr.Produce(ctx, &kgo.Record{Topic: "payments-kejadian", Key: fmt.Appendf(nil, "u%d", sent%10000), Value: []byte(v), Timestamp: now}, nil)
				sent++
			}
		}
		tick.Stop()
		pr.Flush(ctx)
		// Every event's feature, or as many as come within 30 s (the
		// check below wants 90%).
		for deadline := time.Now().Add(30 * time.Second); len(seen) < sent && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond) // the poll interval, not a synchronisation
		}
		b.StopTimer()
		cancel()
		<-done
		rd.Close()
		pr.Close()
		close(seen)
		var lat, toEmit, toRead []float64
		for s := range seen {
			lat = append(lat, float64(s[2]-s[0])/1e6)
			toEmit = append(toEmit, float64(s[1]-s[0])/1e6)
			toRead = append(toRead, float64(s[2]-s[1])/1e6)
		}
		if len(lat) < sent*9/10 {
			b.Fatalf("only %d of %d features seen", len(lat), sent)
		}
		for _, l := range [][]float64{lat, toEmit, toRead} {
			sort.Float64s(l)
		}
		if toEmit[0] < 0 || toRead[0] < 0 {
			b.Fatalf("a feature emitted before its event (%.3f ms) or read before it was emitted (%.3f ms)", toEmit[0], toRead[0])
		}
		b.ReportMetric(lat[len(lat)/2], "p50-ms")
		b.ReportMetric(lat[len(lat)*99/100], "p99-ms")
		b.ReportMetric(toEmit[len(toEmit)*99/100], "p99-emitted-ms")
		b.ReportMetric(toRead[len(toRead)*99/100], "p99-commit-ms")
		b.ReportMetric(float64(len(lat)), "events")
	}
}
