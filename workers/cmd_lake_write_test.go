package workers

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"reckon/lake"
)

// TestLakeWriteAnyEventTypeWithKey: with --key/--value the caller defines
// the table and any event type is accepted as `reckon simulate` accepts it
// (a type the configuration has no rules for included); envelope errors
// are still rejected, and so is a configured type that breaks its rules.
// Without --key, a topic no stream reads is refused.
func TestLakeWriteAnyEventTypeWithKey(t *testing.T) {
	root := filepath.Join(t.TempDir(), "lake")
	var in strings.Builder
	for i := range 20 {
		fmt.Fprintf(&in, `{"event_id":"0b6c1f3e-2d4a-4f5b-8c6d-%012d","event_type":"test.measured","occurred_at":"2026-11-07T08:%02d:00Z","arrived_at":"2026-11-07T08:%02d:01Z","data":{"sensor":"s%d","v":%d}}`+"\n", i, i, i, i%3, i)
	}
	in.WriteString(`{"event_id":"not-a-uuid","event_type":"test.measured","occurred_at":"2026-11-07T08:30:00Z","data":{"sensor":"s1","v":1}}` + "\n")
	in.WriteString(`{"event_id":"0b6c1f3e-2d4a-4f5b-8c6d-000000000099","event_type":"sensor.suhu.terbaca","occurred_at":"2026-11-07T08:30:00Z","data":{"sensor":"s1","v":1,"id_perangkat":"x","lantai":3,"suhu_c":99}}` + "\n")
	out := mustLake(t, in.String(), "write", "--lake", root, "--topic", "test-measured", "--key", "data.sensor", "--value", "data.v", "--input", "-")
	if !strings.Contains(out, "22 lines -> 20 raw rows, 2 rejected") {
		t.Fatalf("lake write:\n%s", out)
	}
	l, err := lake.Open(lake.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	aggs, _, err := l.Aggregate(t.Context(), lake.Query{Topic: "test-measured", From: time.Date(2026, 11, 7, 8, 0, 0, 0, time.UTC), To: time.Date(2026, 11, 7, 9, 0, 0, 0, time.UTC)}, time.Hour)
	if err != nil || len(aggs) != 3 || aggs[0].Key != "s0" || aggs[0].Count != 7 || aggs[0].Sum != 0+3+6+9+12+15+18 {
		t.Fatalf("aggregates %+v, %v", aggs, err)
	}
	if code, _, errs := lakeMain(t, in.String(), "write", "--lake", root, "--topic", "test-measured", "--input", "-"); code != 2 || !strings.Contains(errs, "--key required") {
		t.Errorf("without --key: exit %d: %s", code, errs)
	}
}

// poisonInput streams n lines: every tenth a poison line of size bytes
// without a newline until its end, the others valid envelopes. It counts
// what was read.
type poisonInput struct {
	n, size int
	line    int
	pending []byte
	poison  []byte
	read    atomic.Int64
}

func (p *poisonInput) Read(b []byte) (int, error) {
	if len(p.pending) == 0 {
		if p.line == p.n {
			return 0, io.EOF
		}
		if p.line%10 == 3 {
			if len(p.poison) != p.size {
				p.poison = bytes.Repeat([]byte{'x'}, p.size)
				p.poison[p.size-1] = '\n'
			}
			p.pending = p.poison
		} else {
			p.pending = fmt.Appendf(nil, `{"event_id":"0b6c1f3e-2d4a-4f5b-8c6d-%012d","event_type":"test.measured","occurred_at":"2026-11-07T08:00:00Z","arrived_at":"2026-11-07T08:00:01Z","data":{"sensor":"s1","v":1}}`+"\n", p.line)
		}
		p.line++
	}
	n := copy(b, p.pending)
	p.pending = p.pending[n:]
	p.read.Add(int64(n))
	return n, nil
}

// firstWrite records how much input was read when the command first wrote
// to stdout (the first archived file is listed as it is written).
type firstWrite struct {
	in   *poisonInput
	once sync.Once
	at   atomic.Int64
	buf  bytes.Buffer
}

func (w *firstWrite) Write(b []byte) (int, error) {
	w.once.Do(func() { w.at.Store(w.in.read.Load()) })
	return w.buf.Write(b)
}

// TestLakeWriteMemoryIsBoundedByABatch: input whose poison lines are
// 1 MiB each (kept truncated to the gate's limit, rejected as oversized)
// is streamed: the first batch is archived long before the input ends, and
// the live heap grows by the same amount for 64 MiB and 320 MiB of input
// with 4 MiB batches (it held every line of a 1,000,000-line batch before:
// about 3x the input).
func TestLakeWriteMemoryIsBoundedByABatch(t *testing.T) {
	if testing.Short() {
		t.Skip("384 MiB of input")
	}
	small := lakeWriteHeapGrowth(t, 640)
	large := lakeWriteHeapGrowth(t, 3200)
	t.Logf("live heap grew by %d MiB for 64 MiB of input, %d MiB for 320 MiB (4 MiB batches)", small>>20, large>>20)
	// The live heap is the test process's: other tests' allocations and
	// GC timing move it by tens of MiB, so the bound leaves room for that.
	// Memory that followed the input would grow by ~3× the input (the
	// code before batches ended at --batch-bytes: 756 MiB for 256 MiB).
	if large > small+48<<20 || large > 128<<20 {
		t.Errorf("live heap grew by %d MiB for 64 MiB of input, %d MiB for 320 MiB: memory follows the input, not the batch", small>>20, large>>20)
	}
}

// lakeWriteHeapGrowth runs `reckon lake write` in process on n generated
// lines (every tenth a 1 MiB poison line) with 4 MiB batches, checks its
// output and that it streamed, and returns how much the live heap (as
// marked by each GC, sampled every millisecond) grew at most.
func lakeWriteHeapGrowth(t *testing.T, n int) int64 {
	t.Helper()
	root := filepath.Join(t.TempDir(), "lake")
	in := &poisonInput{n: n, size: 1 << 20}
	out := &firstWrite{in: in}
	// The heap live after each GC: what the command holds, not the
	// garbage a GC is about to collect.
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	heap := func() int64 {
		metrics.Read(sample)
		return int64(sample[0].Value.Uint64())
	}
	runtime.GC()
	base := heap()
	var peak atomic.Int64
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if h := heap(); h > peak.Load() {
				peak.Store(h)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	var errb bytes.Buffer
	code := Main(context.Background(), []string{"lake", "write", "--lake", root, "--topic", "test-measured", "--key", "data.sensor", "--value", "data.v",
		"--input", "-", "--batch-bytes", "4194304"}, in, out, &errb, nil)
	stop()
	<-done
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if want := fmt.Sprintf("%d lines -> %d raw rows, %d rejected", n, n-n/10, n/10); !strings.Contains(out.buf.String(), want) {
		t.Fatalf("lake write: want %q in\n%s", want, out.buf.String())
	}
	total := in.read.Load()
	if at := out.at.Load(); at > total/4 {
		t.Errorf("the first file was written after %d of %d input bytes: the input is not streamed", at, total)
	}
	return max(0, peak.Load()-base)
}
