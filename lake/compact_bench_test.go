package lake

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// compactBenchRows is the size of the hour the compaction benchmarks
// compact: 3 partitions of 200,000 rows in 60 archive files each, plus 1 %
// redeliveries in a fourth partition.
const (
	compactBenchParts    = 3
	compactBenchPerPart  = 200_000
	compactBenchPerFile  = compactBenchPerPart / 60
	compactBenchRedelive = 100 // every 100th event is redelivered
)

// seedCompactBench writes the benchmark hour into a lake at dir and
// returns the number of archived rows.
func seedCompactBench(b *testing.B, dir string) int {
	b.Helper()
	l, err := Open(Options{Root: dir})
	if err != nil {
		b.Fatal(err)
	}
	var redelivered []RawRow
	n := 0
	for p := int32(0); p < compactBenchParts; p++ {
		rows := genRows(compactBenchPerPart, 1, 50, p, 0, 40+uint64(p))
		for lo := 0; lo < len(rows); lo += compactBenchPerFile {
			hi := min(lo+compactBenchPerFile, len(rows))
			if _, err := l.WriteRaw(b.Context(), topic, p, int64(lo), int64(hi-1), rows[lo:hi]); err != nil {
				b.Fatal(err)
			}
		}
		n += len(rows)
		redelivered = append(redelivered, redeliver(rows, compactBenchRedelive, compactBenchParts, int64(len(redelivered)), time.Second)...)
	}
	if _, err := l.WriteRaw(b.Context(), topic, compactBenchParts, 0, int64(len(redelivered)-1), redelivered); err != nil {
		b.Fatal(err)
	}
	return n + len(redelivered)
}

// BenchmarkCompactClosedHour is the compaction of one closed hour: a k-way
// merge of its 181 archive files across partitions, redeliveries dropped
// to raw_dropped, written as files of up to 1 M rows (zstd level 1),
// inputs deleted. rows/cpu-s with -cpu 1 is rows per second per core.
func BenchmarkCompactClosedHour(b *testing.B) {
	benchCompact(b, CompactOptions{}, func(b *testing.B, res CompactResult, in int) {
		if res.Rows+res.Dropped != int64(in) || res.Dropped == 0 || len(res.Written) != 1 {
			b.Fatalf("compacted %+v, want %d rows in", res, in)
		}
	})
}

// BenchmarkCompactOpenHour is the merge of an open hour's partitions, each
// holding 60 archive files (above the 32 that trigger it), every offset
// kept.
func BenchmarkCompactOpenHour(b *testing.B) {
	benchCompact(b, CompactOptions{Open: true}, func(b *testing.B, res CompactResult, in int) {
		if res.Rows != int64(in)-int64(compactBenchParts*compactBenchPerPart/compactBenchRedelive) || len(res.Written) != compactBenchParts {
			b.Fatalf("merged %+v", res)
		}
	})
}

func benchCompact(b *testing.B, o CompactOptions, check func(*testing.B, CompactResult, int)) {
	seed := filepath.Join(b.TempDir(), "seed")
	in := seedCompactBench(b, seed)
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		root := filepath.Join(b.TempDir(), fmt.Sprint(i))
		if err := os.CopyFS(root, os.DirFS(seed)); err != nil {
			b.Fatal(err)
		}
		l, err := Open(Options{Root: root})
		if err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			b.ResetTimer()
		}
		c0 := cpuTime()
		b.StartTimer()
		res, err := l.CompactHour(b.Context(), topic, testStart, o)
		b.StopTimer()
		cpu += cpuTime() - c0
		if err != nil {
			b.Fatal(err)
		}
		check(b, res, in)
	}
	rows := float64(in) * float64(b.N)
	b.ReportMetric(rows/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(rows/cpu.Seconds(), "rows/cpu-s")
}

// BenchmarkOpenHourMerges is one partition's open hour as the compaction
// workflow sees it: files archive batches of 100 rows each, a compaction
// pass (CompactHour, Open) after every 15 of them (an archive step every
// 2 s, a pass every 30 s). merged-rows/row is how many rows the hour's
// merges wrote per row archived: with every file merged at each merge it
// grows with the hour's file count (quadratic cost); with the older,
// larger files kept it grows with its logarithm. ns/op is per hour.
func BenchmarkOpenHourMerges(b *testing.B) {
	for _, files := range []int{240, 480, 960} {
		b.Run(fmt.Sprintf("files=%d", files), func(b *testing.B) {
			const perFile, perPass = 100, 15
			rows := genRows(files*perFile, 1, 50, 0, 0, 9)
			var merged, peak int64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				l, err := Open(Options{Root: b.TempDir()})
				if err != nil {
					b.Fatal(err)
				}
				merged, peak = 0, 0
				for f := 0; f < files; f++ {
					lo := f * perFile
					b.StopTimer()
					if _, err := l.WriteRaw(b.Context(), topic, 0, int64(lo), int64(lo+perFile-1), rows[lo:lo+perFile]); err != nil {
						b.Fatal(err)
					}
					if (f+1)%perPass != 0 {
						continue
					}
					b.StartTimer()
					res, err := l.CompactHour(b.Context(), topic, testStart, CompactOptions{Open: true})
					if err != nil {
						b.Fatal(err)
					}
					merged += res.Rows
					peak = max(peak, int64(res.MaxPartitionFiles))
				}
			}
			b.ReportMetric(float64(merged)/float64(len(rows)), "merged-rows/row")
			b.ReportMetric(float64(peak), "max-files")
		})
	}
}
