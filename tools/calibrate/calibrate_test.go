package calibrate

import (
	"syscall"
	"testing"
	"time"
)

// Work per benchmark op, sized so an op takes about a millisecond on a
// 2020s core: -benchtime 200x measures each workload in ~0.2 s.
const (
	chainSteps  = 1_000_000
	ilpSteps    = 500_000
	chaseSteps  = 10_000
	decodeTimes = 200
)

// sink keeps results alive.
var sink uint64

// BenchmarkCalibrate measures the fixed workloads (doc.go). Besides ns/op
// (wall) it reports cpu-ns/op, the process's CPU time per op: with -cpu 1
// the two part when the scheduler takes the core away, and the CPU figure
// is what a per-core goal is judged on.
func BenchmarkCalibrate(b *testing.B) {
	b.Run("cpu", func(b *testing.B) {
		m := startCPU(b)
		for i := range b.N {
			sink += Chain(chainSteps, uint64(i))
		}
		m.report(b)
	})
	b.Run("ilp", func(b *testing.B) {
		m := startCPU(b)
		for i := range b.N {
			sink += ILP(ilpSteps, uint64(i))
		}
		m.report(b)
	})
	b.Run("mem", func(b *testing.B) {
		t := NewTable()
		at := t.Chase(len(t)/8, 0) // touch the pages once
		m := startCPU(b)
		for range b.N {
			at = t.Chase(chaseSteps, at)
		}
		m.report(b)
		sink += uint64(at)
	})
	b.Run("json", func(b *testing.B) {
		m := startCPU(b)
		for range b.N {
			e, err := Decode(decodeTimes)
			if err != nil {
				b.Fatal(err)
			}
			sink += uint64(len(e.Data.Items))
		}
		m.report(b)
	})
}

type cpuMeter struct{ start time.Duration }

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU(b *testing.B) cpuMeter {
	b.ResetTimer()
	return cpuMeter{processCPU(b)}
}

func (m cpuMeter) report(b *testing.B) {
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b)-m.start)/float64(b.N), "cpu-ns/op")
}

// TestWorkloads: the workloads compute what they must (so a compiler or
// an edit cannot turn one into nothing): the chains are the LCG, the
// table one cycle through every slot, the decoder reads every field.
func TestWorkloads(t *testing.T) {
	x := uint64(7)
	for range 3 {
		x = x*6364136223846793005 + 1442695040888963407
	}
	if got := Chain(3, 7); got != x {
		t.Errorf("Chain(3, 7) = %d, want %d", got, x)
	}
	if ILP(0, 1) != 1^2^3^4^5^6^7^8 {
		t.Errorf("ILP(0, 1) = %d", ILP(0, 1))
	}
	tab := newTable(1 << 18) // NewTable's shuffle on fewer slots
	if len(tab) != 1<<18 {
		t.Fatalf("table %d slots", len(tab))
	}
	if at := tab.Chase(len(tab), 5); at != 5 {
		t.Errorf("a full cycle from 5 ends at %d: the table is not one cycle", at)
	}
	if at := tab.Chase(len(tab)/2, 5); at == 5 {
		t.Error("half a cycle is back at its start")
	}
	e, err := Decode(1)
	if err != nil || e.Data.UserID != "Budi" || e.Data.Amount != 120000.5 || len(e.Data.Items) != 2 || e.Data.Items[1].Qty != 1 ||
		e.OccurredAt.Nanosecond() != 123456000 {
		t.Errorf("Decode: %+v, %v", e, err)
	}
}
