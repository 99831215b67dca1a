// Command compactpace measures how many files the raw lake table holds
// under paced traffic with the continuous compaction of
// docs/adr/0018-continuous-compaction.md: files per closed hour (against
// one per lake.compaction.max_rows rows) and the most files any open
// (partition, hour) reaches (against max_open_files).
//
// It runs the archive and the compaction in one process on a clock it
// drives: every -step (the archive workflow's idle step, 2s) each of
// -partitions partitions archives the events that arrived in that step as
// one batch (lake.WriteRaw, the archive's writer; events are generated
// pre-decoded, so the quality gate and Kafka are not measured), and every
// -poll the compaction pass (activities.Compaction.CompactRaw, the
// workflow's activity) runs, judging closed hours by the archive's
// progress minus the margin — the fallback for a topic no stream reads,
// which is what this traffic is. -speed is how many traffic seconds pass
// per wall second (1: real time; the defaults are the requirement's 30
// minutes at 2,000 events/s); a larger -speed shortens the run with the
// same traffic per hour of event time. A fraction of events arrives late
// (-late, a few minutes old: some land in hours already closed) and a
// fraction is redelivered (-dup).
//
// Run from the module root:
//
//	go run ./tools/compactpace -speed 10   # 30 traffic minutes in 3 wall minutes
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"reckon/activities"
	"reckon/internal/config"
	"reckon/lake"
)

const topic = "pace-kejadian"

func main() {
	var (
		rate       = flag.Float64("rate", 2000, "events per traffic second")
		duration   = flag.Duration("duration", 30*time.Minute, "traffic time to run")
		speed      = flag.Float64("speed", 1, "traffic seconds per wall second")
		partitions = flag.Int("partitions", 3, "partitions of the raw topic")
		step       = flag.Duration("step", 2*time.Second, "archive step per partition (traffic time)")
		poll       = flag.Duration("poll", 30*time.Second, "compaction pass interval (traffic time; lake.compaction.poll)")
		margin     = flag.Duration("margin", 5*time.Minute, "lake.compaction.margin")
		maxRows    = flag.Int64("max-rows", 1_000_000, "lake.compaction.max_rows")
		maxOpen    = flag.Int("max-open-files", 64, "lake.compaction.max_open_files")
		lateDelay  = flag.Duration("late-delay", 10*time.Minute, "lake.compaction.late_delay (traffic time)")
		startS     = flag.String("start", "2026-11-07T00:40:00Z", "traffic start (event time); 00:40 closes hour 00 within 30 minutes")
		late       = flag.Float64("late", 0.01, "fraction of events that arrive 1-10 minutes after they occurred")
		dup        = flag.Float64("dup", 0.005, "fraction of events redelivered")
		root       = flag.String("lake", "", "lake directory (default: a temporary one, removed)")
	)
	flag.Parse()
	start, err := time.Parse(time.RFC3339, *startS)
	if err != nil {
		fail(err)
	}
	if *root == "" {
		d, err := os.MkdirTemp("", "compactpace-")
		if err != nil {
			fail(err)
		}
		defer os.RemoveAll(d)
		*root = filepath.Join(d, "lake")
	}
	now := start
	clock := func() time.Time { return now }
	// The lake's clock ages files by their modification time, a wall
	// time: it stays the wall clock, and late_delay is scaled to it.
	lk, err := lake.Open(lake.Options{Root: *root})
	if err != nil {
		fail(err)
	}
	cfg, err := config.Load("", nil, []string{"lake.root=" + *root,
		fmt.Sprintf("lake.compaction.max_rows=%d", *maxRows), fmt.Sprintf("lake.compaction.max_open_files=%d", *maxOpen),
		"lake.compaction.margin=" + margin.String(), "lake.compaction.late_delay=" + time.Duration(float64(*lateDelay) / *speed).String()})
	if err != nil {
		fail(err)
	}
	comp := &activities.Compaction{Cfg: cfg, Lake: lk, Now: clock}
	ctx := context.Background()

	rng := rand.New(rand.NewPCG(1, 2))
	next := make([]int64, *partitions)
	var recent []lake.RawRow // for redeliveries
	var (
		events, archived, files int64
		peakOpen                int
		peakOpenAt              time.Time
		passes                  int
		passCPU, passWall       time.Duration
		closedThrough           time.Time
	)
	perStep := *rate * step.Seconds() / float64(*partitions)
	carry := make([]float64, *partitions)
	wall0 := time.Now()
	nextPoll := start.Add(*poll)
	for now = start.Add(*step); !now.After(start.Add(*duration)); now = now.Add(*step) {
		// Pace: this step's traffic is due at wall0 + elapsed/speed.
		if d := time.Until(wall0.Add(time.Duration(float64(now.Sub(start)) / *speed))); d > 0 {
			time.Sleep(d)
		}
		for p := range *partitions {
			carry[p] += perStep
			n := int(carry[p])
			carry[p] -= float64(n)
			rows := make([]lake.RawRow, 0, n+n/100)
			for i := 0; i < n; i++ {
				arrived := now.Add(-time.Duration(rng.Int64N(int64(*step))))
				occurred := arrived.Add(-time.Duration(rng.Int64N(int64(time.Second))))
				if rng.Float64() < *late {
					occurred = arrived.Add(-time.Minute - time.Duration(rng.Int64N(int64(9*time.Minute))))
				}
				r := lake.RawRow{
					EventID: uuid(rng), EventType: "sensor.suhu.terbaca", OccurredAt: occurred.UnixMicro(), IngestedAt: arrived.UnixMicro(),
					Key: fmt.Sprintf("sensor-%02d", rng.IntN(50)), Value: float64(rng.IntN(400)) / 10,
					Data: `{"lantai":3}`, KafkaPartition: int32(p), KafkaOffset: next[p],
				}
				next[p]++
				rows = append(rows, r)
				if len(recent) < 10_000 {
					recent = append(recent, r)
				} else {
					recent[rng.IntN(len(recent))] = r
				}
				if rng.Float64() < *dup && len(recent) > 0 {
					d := recent[rng.IntN(len(recent))]
					d.KafkaPartition, d.KafkaOffset, d.IngestedAt = int32(p), next[p], arrived.UnixMicro()
					next[p]++
					rows = append(rows, d)
				}
			}
			if len(rows) == 0 {
				continue
			}
			events += int64(len(rows))
			res, err := lk.WriteRaw(ctx, topic, int32(p), rows[0].KafkaOffset, rows[len(rows)-1].KafkaOffset, rows)
			if err != nil {
				fail(err)
			}
			archived += res.Rows
			files += int64(len(res.Files))
			if _, err := lk.WriteProgress(ctx, lake.Progress{Topic: topic, Partition: int32(p), NextOffset: next[p], ArchivedThrough: now, UpdatedAt: now}); err != nil {
				fail(err)
			}
		}
		if now.Before(nextPoll) {
			continue
		}
		nextPoll = nextPoll.Add(*poll)
		// The peak of an open partition-hour is just before a pass.
		if n, at, err := maxOpenFiles(ctx, lk, closedThrough, now); err != nil {
			fail(err)
		} else if n > peakOpen {
			peakOpen, peakOpenAt = n, at
		}
		c0, w0 := cpuTime(), time.Now()
		res, err := comp.CompactRaw(ctx, activities.CompactRawInput{Topic: topic, ClosedThrough: closedThrough})
		passCPU += cpuTime() - c0
		passWall += time.Since(w0)
		if err != nil {
			fail(err)
		}
		if len(res.Failed) > 0 {
			fail(fmt.Errorf("pass at %s: %v", now.Format(time.TimeOnly), res.Failed))
		}
		closedThrough = res.ClosedThrough
		passes++
	}
	lag := time.Since(wall0) - time.Duration(float64(*duration) / *speed)

	fmt.Printf("compactpace: %v of traffic at %.0f events/s (%d partitions, archive step %v, pass every %v, margin %v), speed %.0fx, %v wall (%v behind the pace)\n",
		*duration, *rate, *partitions, *step, *poll, *margin, *speed, time.Since(wall0).Round(time.Second), lag.Round(time.Second))
	fmt.Printf("archived %d records in %d files; %d compaction passes: %v CPU, %v wall; closed through %s\n",
		events, files, passes, passCPU.Round(time.Millisecond), passWall.Round(time.Millisecond), closedThrough.Format(time.RFC3339))
	fmt.Printf("most files of an open (partition, hour) just before a pass: %d (at %s; limit %d)\n", peakOpen, peakOpenAt.Format(time.TimeOnly), *maxOpen)
	hours, err := lk.RawHours(ctx, topic, start.Add(-24*time.Hour), now.Add(24*time.Hour))
	if err != nil {
		fail(err)
	}
	fmt.Printf("%-20s %-7s %10s %6s %s\n", "hour", "state", "rows", "files", "files wanted")
	for _, h := range hours {
		st := "open"
		if !h.Add(time.Hour).After(closedThrough) {
			st = "closed"
		}
		byPart, total, err := hourFiles(ctx, lk, h)
		if err != nil {
			fail(err)
		}
		rows := hourRows(ctx, lk, h)
		want := fmt.Sprintf("≤ %d (1 per %d rows)", (rows+*maxRows-1) / *maxRows, *maxRows)
		if st == "open" {
			want = fmt.Sprintf("≤ %d per partition (most: %d)", *maxOpen, slices.Max(append(byPart, 0)))
		}
		fmt.Printf("%-20s %-7s %10d %6d %s\n", h.Format("2006-01-02T15"), st, rows, total, want)
	}
	if archived != events {
		fail(fmt.Errorf("archived %d of %d rows", archived, events))
	}
}

// maxOpenFiles is the most archive files one partition holds in an hour
// not closed by closed, and the hour.
func maxOpenFiles(ctx context.Context, lk *lake.Lake, closed, now time.Time) (int, time.Time, error) {
	hours, err := lk.RawHours(ctx, topic, closed, now.Add(24*time.Hour))
	if err != nil {
		return 0, time.Time{}, err
	}
	most, at := 0, time.Time{}
	for _, h := range hours {
		byPart, _, err := hourFiles(ctx, lk, h)
		if err != nil {
			return 0, time.Time{}, err
		}
		if n := slices.Max(append(byPart, 0)); n > most {
			most, at = n, h
		}
	}
	return most, at, nil
}

// hourFiles counts an hour's archive files per partition and all its
// files.
func hourFiles(ctx context.Context, lk *lake.Lake, h time.Time) (byPart []int, total int, err error) {
	names, err := lk.Files(ctx, filepath.ToSlash(lake.RawHourDir("", topic, h)))
	if err != nil {
		return nil, 0, err
	}
	counts := map[int32]int{}
	for _, n := range names {
		if !strings.HasSuffix(n, ".parquet") {
			continue
		}
		total++
		if r, err := lake.ParseFileName(topic, n); err == nil {
			counts[r.Partition]++
		}
	}
	for _, c := range counts {
		byPart = append(byPart, c)
	}
	return byPart, total, nil
}

// hourRows counts the rows in the hour's files with reckon's reader.
func hourRows(ctx context.Context, lk *lake.Lake, h time.Time) int64 {
	_, st, err := lk.Aggregate(ctx, lake.Query{Topic: topic, From: h, To: h.Add(time.Hour)}, time.Hour)
	if err != nil {
		fail(err)
	}
	return st.RowsRead
}

func uuid(rng *rand.Rand) string {
	var b [16]byte
	for i := 0; i < 16; i += 8 {
		v := rng.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "compactpace:", err)
	os.Exit(1)
}
