package benchreport

import (
	"strings"
	"testing"
)

// calibRun is a run with three calibration points (real tools/calibrate
// lines) around two goal benchmarks: the hot path between points 1 and
// 2, the archive between points 2 and 3, and point 2 slow (×1.5 cpu, ×2
// ilp). Each goal must show the two points around it, not the whole run.
const calibRun = `reckon-bench: start 2026-12-07T23:00:00Z load 1.0 1.0 1.0
reckon-bench: run 2026-12-07T23:00:00Z go test -run '^$' -v -timeout 20m -bench Calibrate -benchtime 200x -cpu 1 ./tools/calibrate
pkg: reckon/tools/calibrate
BenchmarkCalibrate/cpu         	     200	  30167923 ns/op	   1000000 cpu-ns/op
BenchmarkCalibrate/ilp         	     200	  10389263 ns/op	   1000000 cpu-ns/op
BenchmarkCalibrate/mem         	     200	  68283706 ns/op	   2000000 cpu-ns/op
BenchmarkCalibrate/json        	     200	  15402139 ns/op	    900000 cpu-ns/op
ok  	reckon/tools/calibrate	5.0s
reckon-bench: run 2026-12-07T23:01:00Z go test -run '^$' -v -timeout 20m -bench 'OperatorHotPath' -benchtime 10000x -cpu 1 ./streaming/operator
pkg: reckon/streaming/operator
BenchmarkOperatorHotPath/decode+gate+dedup=1M+window         	   10000	       900.0 ns/op	   1000000 cpu-events/s
ok  	reckon/streaming/operator	5.0s
reckon-bench: run 2026-12-07T23:02:00Z go test -run '^$' -v -timeout 20m -bench Calibrate -benchtime 200x -cpu 1 ./tools/calibrate
pkg: reckon/tools/calibrate
BenchmarkCalibrate/cpu         	     200	  30167923 ns/op	   1500000 cpu-ns/op
BenchmarkCalibrate/ilp         	     200	  10389263 ns/op	   2000000 cpu-ns/op
BenchmarkCalibrate/mem         	     200	  68283706 ns/op	   2000000 cpu-ns/op
BenchmarkCalibrate/json        	     200	  15402139 ns/op	    900000 cpu-ns/op
ok  	reckon/tools/calibrate	5.0s
reckon-bench: run 2026-12-07T23:03:00Z go test -run '^$' -v -timeout 20m -bench . -benchtime 1x -cpu 1 ./lake
pkg: reckon/lake
BenchmarkWriteRaw/zstd=1         	       1	 900000000 ns/op	   1100000 rows/cpu-s
ok  	reckon/lake	5.0s
reckon-bench: run 2026-12-07T23:04:00Z go test -run '^$' -v -timeout 20m -bench Calibrate -benchtime 200x -cpu 1 ./tools/calibrate
pkg: reckon/tools/calibrate
BenchmarkCalibrate/cpu         	     200	  30167923 ns/op	   1000000 cpu-ns/op
BenchmarkCalibrate/ilp         	     200	  10389263 ns/op	   1100000 cpu-ns/op
BenchmarkCalibrate/mem         	     200	  68283706 ns/op	   2000000 cpu-ns/op
BenchmarkCalibrate/json        	     200	  15402139 ns/op	    900000 cpu-ns/op
ok  	reckon/tools/calibrate	5.0s
reckon-bench: end 2026-12-07T23:05:00Z load 1.0 1.0 1.0
`

func TestRenderCalibration(t *testing.T) {
	r, err := Parse(strings.NewReader(calibRun))
	if err != nil {
		t.Fatal(err)
	}
	if s := r.Benchmark(pkgCalibrate + "." + calibBench + "cpu").Samples; len(s) != 3 || s[0].Step != 0 || s[1].Step != 2 || s[2].Step != 4 {
		t.Fatalf("calibration samples %+v: want steps 0, 2, 4", s)
	}
	out, _ := render(t, r)
	for _, want := range []string{
		"| verdict | calibration around it (× the run's fastest) |",
		// The hot path ran between points 1 and 2.
		"| 1 M events/CPU-s | Flink Nexmark q0 155 K events/s/core (published) | **met** | cpu 1.00–1.50×, ilp 1.00–2.00×, mem 1.00×, json 1.00× |",
		// The archive write between points 2 and 3.
		"**met** | cpu 1.00–1.50×, ilp 1.10–2.00×, mem 1.00×, json 1.00× |",
		"## Calibration",
		"| 2 23:02 | `OperatorHotPath ./streaming/operator` | 1.50 ms (1.50×) | 2 ms (2.00×) | 2 ms (1.00×) | 0.9 ms (1.00×) |",
		"| 3 23:04 | `all ./lake` |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(out, "tools/calibrate.BenchmarkCalibrate") {
		t.Error("the calibration is also listed among other benchmarks")
	}
	if t.Failed() {
		t.Log(out)
	}
}
