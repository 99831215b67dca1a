package workers

import (
	"context"
	"testing"
	"time"

	"reckon/internal/testenv"
)

func BenchmarkTmpBare(b *testing.B) {
	if b.N == 1 {
		return
	}
	tc, _ := testenv.Temporal(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bareSignalRate(b, ctx, tc, 300, 16) // warm
	r := bareSignalRate(b, ctx, tc, 3*b.N, 16)
	b.ReportMetric(r, "bare-signals/s")
}
