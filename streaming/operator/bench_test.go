package operator

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"reckon/internal/event"
)

// Hot-path benchmarks. Run:
//
//	go test ./streaming/operator -run '^$' -bench . -benchtime 2s -cpu 1
//
// The workload: 10,000 keys (uniform by hash), event time advancing 1ms per
// event with up to 3s of disorder, out-of-orderness 5s, 1-minute windows
// (so windows fire and purge all the time), outputs drained every 256
// events as the Kafka shell would between publishes.
const (
	benchKeys  = 10_000
	benchDrain = 256
)

var benchBase = time.Date(2026, 11, 7, 0, 0, 0, 0, time.UTC)

func benchKeyOf(i int) int { return int(uint32(i)*2654435761) % benchKeys }

// benchET is event i's time: 1h + i ms after midnight minus up to 3s of
// jitter.
func benchET(i int) int64 {
	return int64(time.Hour) + int64(i)*int64(time.Millisecond) - int64(uint32(i)*40503%3000)*int64(time.Millisecond)
}

func benchOptions(rolling bool) Options {
	o := Options{Window: time.Minute, OutOfOrderness: 5 * time.Second}
	if rolling {
		o.Rolling = time.Minute
	}
	return o
}

// reportRate reports events/s by wall time and CPU time per event; on a
// shared machine the CPU figure is the one to compare (the process uses one
// core with -cpu 1; GC work is included).
func reportRate(b *testing.B, cpu0 int64) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(b.N)/(float64(cpu)/1e9), "cpu-events/s")
	}
}

// BenchmarkOperatorHotPath measures Process per event: dedup + window
// update (+ rolling feature), records already decoded; and, as
// decode+gate+..., the whole stream hot path from raw envelope bytes
// through event.Gate.Check, key/value extraction and Process. The dedup set
// is filled to its bound before timing, so every insert also evicts: the
// steady state of a busy partition. dedup=1M is the default bound (the set
// no longer fits in cache); dedup=10k shows the rest of the path with a
// cache-resident set.
func BenchmarkOperatorHotPath(b *testing.B) {
	for _, c := range []struct {
		name          string
		dedup         int
		rolling, gate bool
	}{
		{"dedup=1M+window", 1_000_000, false, false},
		{"dedup=1M+window+rolling", 1_000_000, true, false},
		{"dedup=10k+window", 10_000, false, false},
		{"decode+gate+dedup=1M+window", 1_000_000, false, true},
		{"decode+gate+dedup=1M+window+rolling", 1_000_000, true, true},
		{"decode+gate+dedup=10k+window", 10_000, false, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			opts := benchOptions(c.rolling)
			opts.DedupMaxEntries = c.dedup
			o := mustNew(b, opts)
			for i := range c.dedup { // ids the benchmark never sends
				id := testID(i)
				id[0] = 0xff
				o.dd.add(id, benchBase.UnixNano())
			}
			if c.gate {
				benchGatePath(b, o)
			} else {
				benchRecords(b, o)
			}
		})
	}
}

// BenchmarkOperatorHopping compares hopping windows with tumbling ones of
// the same size in one run: 10 s windows, tumbling and advancing every 2 s
// (the shape of Nexmark q5), count per key, the hot-path workload with a
// 10k dedup set, from decoded records and from envelope bytes (decode +
// gate, as BenchmarkOperatorHotPath). A hopping event updates window/hop = 5 windows; the held
// windows per key (windows/key) grow by the same factor.
//
//	go test ./streaming/operator -run '^$' -bench OperatorHopping -benchtime 2s -cpu 1
func BenchmarkOperatorHopping(b *testing.B) {
	for _, c := range []struct {
		name        string
		window, hop time.Duration
		gate        bool
	}{
		{"tumbling=10s", 10 * time.Second, 0, false},
		{"hopping=10s/2s", 10 * time.Second, 2 * time.Second, false},
		{"decode+gate+tumbling=10s", 10 * time.Second, 0, true},
		{"decode+gate+hopping=10s/2s", 10 * time.Second, 2 * time.Second, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			o := mustNew(b, Options{Window: c.window, Hop: c.hop, OutOfOrderness: 5 * time.Second, DedupMaxEntries: 10_000})
			for i := range 10_000 { // ids the benchmark never sends
				id := testID(i)
				id[0] = 0xff
				o.dd.add(id, benchBase.UnixNano())
			}
			if c.gate {
				benchGatePath(b, o)
			} else {
				benchRecords(b, o)
			}
			b.ReportMetric(float64(o.Stats().Windows)/benchKeys, "windows/key")
		})
	}
}

func benchRecords(b *testing.B, o *Operator) {
	keys := make([]string, benchKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%05d", i)
	}
	var out Out
	var r Record
	r.Value = 125000.5
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := range b.N {
		binary.BigEndian.PutUint64(r.ID[8:], uint64(i))
		r.Key = keys[benchKeyOf(i)]
		et := benchBase.UnixNano() + benchET(i)
		r.EventTime = time.Unix(0, et)
		r.Arrival = time.Unix(0, et+int64(50*time.Millisecond))
		if _, err := o.Process(r, &out); err != nil {
			b.Fatal(err)
		}
		if i%benchDrain == 0 {
			out.Reset()
		}
	}
	reportRate(b, cpu0)
	benchCheck(b, o)
}

// benchCheck makes sure the workload is what it claims: no duplicates, next
// to no late events, a full dedup set.
func benchCheck(b *testing.B, o *Operator) {
	s := o.Stats()
	if s.Duplicates != 0 || float64(s.Late) > 0.001*float64(s.Records) || s.DedupEntries != o.opts.DedupMaxEntries {
		b.Fatalf("workload off: %+v", s)
	}
}

// benchEnvelope is a payment.checkout.completed envelope (deploy/reckon.yaml
// rules); benchGatePath patches event id, time and user in place.
const benchEnvelope = `{"event_id":"a3f8e1d2-7b4c-4e2a-9c1d-000000000000","event_type":"payment.checkout.completed","occurred_at":"2026-11-07T00:00:00.000Z","data":{"user_id":"user-00000","amount":125000.50,"currency":"IDR","channel":"mobile"}}`

func benchGate(b *testing.B) *event.Gate {
	minAmount, maxAmount := 0.0, 1e12
	g, err := event.NewGate(event.GateOptions{Types: map[string]event.TypeRules{
		"payment.checkout.completed": {Fields: map[string]event.FieldRule{
			"user_id":  {Required: true, Type: "string", Pattern: "[A-Za-z0-9_-]{1,64}"},
			"amount":   {Required: true, Type: "number", Min: &minAmount, Max: &maxAmount},
			"currency": {Type: "string", Enum: []string{"IDR", "RUB", "USD", "EUR"}},
			"channel":  {Type: "string", Enum: []string{"web", "mobile", "pos"}},
		}},
	}})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

func benchGatePath(b *testing.B, o *Operator) {
	g := benchGate(b)
	raw := []byte(benchEnvelope)
	idAt := strings.Index(benchEnvelope, "000000000000\"")
	timeAt := strings.Index(benchEnvelope, "00:00:00.000Z")
	userAt := strings.Index(benchEnvelope, "user-00000") + len("user-")
	var out Out
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := range b.N {
		// Patch the record: harness cost, a few ns.
		putHex(raw[idAt:idAt+12], uint64(i))
		et := benchET(i)
		putClock(raw[timeAt:], et)
		putDec(raw[userAt:userAt+5], benchKeyOf(i))
		arrival := time.Unix(0, benchBase.UnixNano()+et+int64(50*time.Millisecond))

		env, res := g.Check(raw, arrival)
		if !res.Valid {
			b.Fatal(res.Reasons)
		}
		// As streaming/process.go: the key a view of the record's bytes,
		// the id as the gate parsed it.
		key, ok1 := env.StringView("data.user_id")
		v, ok2 := env.Number("data.amount")
		id := EventID(env.EventUUID())
		if !ok1 || !ok2 || id == (EventID{}) {
			b.Fatal("extract")
		}
		r := Record{ID: id, Key: key, Value: v, EventTime: env.OccurredAt, Arrival: arrival, Ref: int64(i)}
		if _, err := o.Process(r, &out); err != nil {
			b.Fatal(err)
		}
		if i%benchDrain == 0 {
			out.Reset()
		}
	}
	reportRate(b, cpu0)
	benchCheck(b, o)
}

func putHex(dst []byte, v uint64) {
	const hexdig = "0123456789abcdef"
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = hexdig[v&0xf]
		v >>= 4
	}
}

func putDec(dst []byte, v int) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = byte('0' + v%10)
		v /= 10
	}
}

// putClock writes HH:MM:SS.mmm for ns after midnight (mod one day).
func putClock(dst []byte, ns int64) {
	ms := int(ns / int64(time.Millisecond) % 86_400_000)
	putDec(dst[0:2], ms/3_600_000)
	putDec(dst[3:5], ms/60_000%60)
	putDec(dst[6:8], ms/1000%60)
	putDec(dst[9:12], ms%1000)
}

// BenchmarkStateBytes measures retained heap per dedup entry, per window
// and per rolling point (runtime.MemStats after GC), reported as custom
// metrics. Run with -benchtime 1x.
func BenchmarkStateBytes(b *testing.B) {
	measure := func(b *testing.B, n int, unit string, build func() any) {
		var per float64
		for range b.N {
			before := heapAfterGC()
			keep := build()
			per = float64(heapAfterGC()-before) / float64(n)
			runtime.KeepAlive(keep)
		}
		b.ReportMetric(per, unit)
	}
	b.Run("dedup/1M", func(b *testing.B) {
		const n = 1_000_000
		measure(b, n, "bytes/entry", func() any {
			var d dedup
			d.init(int64(24*time.Hour), n)
			for i := range n {
				d.add(testID(i), int64(i))
			}
			return &d
		})
	})
	b.Run("window/100k-keys", func(b *testing.B) {
		const n = 100_000
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("user-%05d", i)
		}
		measure(b, n, "bytes/window", func() any {
			o, _ := New(Options{Window: time.Hour})
			var out Out
			for i, k := range keys {
				_, _ = o.Process(Record{Key: k, ID: testID(i), EventTime: t0, Arrival: t0, Value: 1}, &out)
				out.Reset()
			}
			o.dd = dedup{} // count window state only
			return o
		})
	})
	// Bytes per key of windows that one event per key holds: 1 tumbling
	// window, or window/hop = 5 hopping ones (sharing the key's copy).
	for _, c := range []struct {
		name string
		hop  time.Duration
	}{{"tumbling-10s", 0}, {"hopping-10s/2s", 2 * time.Second}} {
		b.Run("key/100k-keys/"+c.name, func(b *testing.B) {
			const n = 100_000
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprintf("user-%05d", i)
			}
			measure(b, n, "bytes/key", func() any {
				o, _ := New(Options{Window: 10 * time.Second, Hop: c.hop})
				var out Out
				for i, k := range keys {
					_, _ = o.Process(Record{Key: k, ID: testID(i), EventTime: t0.Add(time.Second), Arrival: t0, Value: 1}, &out)
					out.Reset()
				}
				o.dd = dedup{} // count window state only
				return o
			})
		})
	}
	b.Run("rolling/100k-keys×10", func(b *testing.B) {
		const keys, per = 100_000, 10
		names := make([]string, keys)
		for i := range names {
			names[i] = fmt.Sprintf("user-%05d", i)
		}
		measure(b, keys*per, "bytes/point", func() any {
			o, _ := New(Options{Rolling: time.Hour})
			var out Out
			for j := range per {
				for i, k := range names {
					_, _ = o.Process(Record{Key: k, ID: testID(j*keys + i), EventTime: t0.Add(time.Duration(j) * time.Second), Arrival: t0, Value: 1}, &out)
					out.Reset()
				}
			}
			o.dd = dedup{}
			return o
		})
	})
}

func heapAfterGC() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkDedup is the dedup set alone at steady state: full, every insert
// evicts the oldest id. The 1M case is the default bound per partition.
func BenchmarkDedup(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var d dedup
			d.init(int64(Forever), n)
			for i := range n {
				d.add(testID(i), 0)
			}
			var id EventID
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := range b.N {
				binary.BigEndian.PutUint64(id[8:], uint64(n+i))
				if !d.add(id, 0) {
					b.Fatal("duplicate")
				}
			}
			reportRate(b, cpu0)
		})
	}
}

// BenchmarkSnapshot is the cost of a full snapshot of a busy partition:
// 1M dedup ids, 10k keys with windows and rolling buffers.
func BenchmarkSnapshot(b *testing.B) {
	opts := benchOptions(true)
	o := mustNew(b, opts)
	keys := make([]string, benchKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%05d", i)
	}
	var out Out
	for i := range 1_000_000 {
		et := benchBase.UnixNano() + benchET(i)
		r := Record{ID: testID(i), Key: keys[benchKeyOf(i)], Value: float64(i % 1000), EventTime: time.Unix(0, et), Arrival: time.Unix(0, et)}
		if _, err := o.Process(r, &out); err != nil {
			b.Fatal(err)
		}
		out.Reset()
	}
	var snap []byte
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			snap = o.Snapshot()
		}
		b.ReportMetric(float64(len(snap)), "bytes")
		s := o.Stats()
		b.ReportMetric(float64(s.DedupEntries), "ids")
		b.ReportMetric(float64(s.Windows), "windows")
		b.ReportMetric(float64(s.RollingPoints), "points")
	})
	b.Run("restore", func(b *testing.B) {
		for b.Loop() {
			if err := mustNew(b, opts).Restore(snap); err != nil {
				b.Fatal(err)
			}
		}
	})
}
