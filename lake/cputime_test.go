package lake

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time (user + system, all threads) the process has
// used. Benchmarks report rows per CPU-second next to rows per wall-second
// because the shared 2-core machines are often loaded by other work, which
// stretches wall time but not CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuMeter reports rows per CPU-second for a benchmark.
type cpuMeter struct{ start time.Duration }

func startCPU(b *testing.B) *cpuMeter {
	b.ResetTimer()
	return &cpuMeter{start: cpuTime()}
}

func (m *cpuMeter) report(b *testing.B, rows float64) {
	cpu := (cpuTime() - m.start).Seconds()
	b.ReportMetric(rows*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	if cpu > 0 {
		b.ReportMetric(rows*float64(b.N)/cpu, "rows/cpu-s")
	}
}
