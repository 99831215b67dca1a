package streaming

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
	"reckon/internal/generate"
)

// BenchmarkStreamEndToEnd measures the stream worker end to end through an
// in-process kfake broker with the exactly-once effect on (one transaction
// per iteration holding outputs, operator state and offsets): events/s from
// the first record to the last committed offset. Records are produced
// before the clock starts; generator traffic is payments with the default
// mix (late, duplicates, poison), rolling features on.
func BenchmarkStreamEndToEnd(b *testing.B) {
	const n = 200_000
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		cfg, recs := benchEnv(b, n)
		w, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		b.StartTimer()
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		waitDone(b, cfg, 5*time.Minute)
		el := time.Since(start)
		b.StopTimer()
		cancel()
		<-done
		b.ReportMetric(float64(len(recs))/el.Seconds(), "events/s")
		b.ReportMetric(float64(el.Nanoseconds())/float64(len(recs)), "ns/event")
	}
}

func benchEnv(b *testing.B, n int64) (*config.Config, []*kgo.Record) {
	cfg, recs := newTestEnv(b, n, func(o *generate.Options) {
		o.Rate, o.Keys = 1000, 10_000 // 60 s rolling windows hold a handful of events per user, as in payments
		o.PoisonFraction = 0 // the 1 MiB oversized poison would dominate the bytes moved
	})
	produce(b, cfg, recs)
	return cfg, recs
}
