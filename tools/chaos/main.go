// Command chaos is `make chaos` (docs/requirements.md R-PROOF-3): it runs
// the dev stack (`reckon
// dev`) on loopback with a temporary data dir and lake, produces a finite
// payments run with a manifest at a steady rate, SIGKILLs the stream
// component 3×, the batch component 2×, the Temporal dev server once and
// the broker once at random points (the dev supervisor restarts them),
// then, with clean background traffic on keys of its own flowing
// (devstack.Background: the stream's offsets and watermark keep moving, as
// in production), waits until the stream has purged the run's last window,
// runs the reconciliation for the traffic's date(s), checks that it
// completes and checked every window of the run, stops the background
// traffic and runs `reckon verify --truth --features` over both manifests (every served feature archived
// once, the curated features table consistent with it). It prints what was killed when, the ledger,
// and a final line `chaos: N passed, M failed`; it exits non-zero on any
// failure. With -lake-faults R (make chaos CHAOS_ARGS='-lake-faults 0.05')
// the stack's lake storage also fails, stalls or loses the answer of a
// fraction R of its calls (docs/adr/0022-lake-fault-injection.md). With
// -s3 (make chaos-s3) the lake is a bucket on a real S3 server, SeaweedFS
// under `reckon dev` (dev.s3), which is SIGKILLed once as well
// (docs/adr/0035-real-s3-server.md).
//
// Run from the module root: go run ./tools/chaos -bin bin/reckon -temporal bin/temporal
//
// Known gaps, stated rather than hidden:
//   - The dev broker is kfake with a data dir and without SyncWrites: each
//     produced batch is written to its segment file (write(2), no user-space
//     buffer) before the ack, so a SIGKILL of the broker process keeps every
//     acknowledged record in the page cache; only a machine crash could lose
//     them. This run kills processes, not the machine.
//   - The stream windows are shortened (1m window and lateness, 20s idle
//     timeout, written to a temporary config; gate.max_future_skew 30s in
//     proportion) so a run fits in minutes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"reckon/streaming"
	"reckon/tools/internal/devstack"
)

type kill struct {
	at   time.Duration // after the generator started
	name string
	pid  int
	err  error
	back time.Duration // until the supervisor restarted it (0: not seen)
}

func main() {
	bin := flag.String("bin", "bin/reckon", "reckon binary")
	temporalBin := flag.String("temporal", "bin/temporal", "Temporal CLI (dev server)")
	base := flag.String("config", "deploy/reckon.yaml", "base configuration; the payments windows are shortened in a temporary copy")
	count := flag.Int64("count", 1800, "records the generator produces")
	rate := flag.Float64("rate", 10, "generator rate, events per second (paced on the wall clock)")
	seed := flag.Int64("seed", 0, "random seed of the kill schedule and the generator (0: from the clock)")
	budget := flag.Duration("timeout", 12*time.Minute, "give up after this long")
	keep := flag.Bool("keep", false, "keep the temporary directory")
	bgRate := flag.Float64("background-rate", 5,
		"rate of the clean background traffic that flows from the last kill to the end of the reconciliation, events per second")
	s3 := flag.Bool("s3", false, "put the stack's lake on a real S3 server (SeaweedFS, `reckon dev` with dev.s3; docs/adr/0035-real-s3-server.md) and SIGKILL that server once too")
	weedBin := flag.String("weed", "bin/weed", "SeaweedFS weed binary, for -s3 (make weed)")
	lakeFaults := flag.Float64("lake-faults", 0, "fraction of the dev stack's lake storage calls that fail on purpose (lake.faults.rate, docs/adr/0022-lake-fault-injection.md); 0: none. The reconcile and verify commands read the lake without faults")
	flag.Parse()
	if *lakeFaults < 0 || *lakeFaults > 1 {
		fmt.Fprintf(os.Stderr, "chaos: -lake-faults %v outside 0..1\n", *lakeFaults)
		os.Exit(2)
	}
	if *seed == 0 {
		*seed = time.Now().UnixNano() % 1_000_000
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *budget)
	defer cancel()
	if *bgRate <= 0 {
		fmt.Fprintf(os.Stderr, "chaos: -background-rate %v: the reconciliation must run under traffic\n", *bgRate)
		os.Exit(2)
	}
	weed := ""
	if *s3 {
		weed = *weedBin
	}
	code := run(ctx, *bin, *temporalBin, weed, *base, *count, *rate, *bgRate, *seed, *lakeFaults, *keep)
	os.Exit(code)
}

// run is one chaos run; weed, when not empty, is the SeaweedFS binary the
// lake's S3 server runs from (-s3).
func run(ctx context.Context, bin, temporalBin, weed, base string, count int64, rate, bgRate float64, seed int64,
	lakeFaults float64, keep bool) int {
	rep := &devstack.Report{Name: "chaos"}
	say, check, finish := rep.Say, rep.Check, rep.Finish
	var err error
	for _, p := range []*string{&bin, &temporalBin, &base, &weed} {
		if *p == "" {
			continue
		}
		if *p, err = filepath.Abs(*p); err != nil {
			check("setup", err)
			return finish()
		}
	}
	dir, err := os.MkdirTemp("", "reckon-chaos-")
	if err != nil {
		check("setup", err)
		return finish()
	}
	if keep {
		say("data in %s (kept)", dir)
	} else {
		// A failed run keeps its data (dev.log, the lake) for diagnosis.
		defer func() {
			if rep.Failed() > 0 {
				say("data in %s (kept: the run failed)", dir)
				return
			}
			os.RemoveAll(dir)
		}()
	}
	// With -s3 the lake is a bucket on a SeaweedFS server that `reckon
	// dev` supervises (dev.s3); every command of the run is given dev.s3,
	// so reconcile and verify read the same bucket.
	var s3Sets []string
	if weed != "" {
		ports, err := devstack.FreePorts(1)
		if err != nil {
			check("setup", err)
			return finish()
		}
		s3Sets = []string{"dev.s3=true", "dev.weed_bin=" + weed, "dev.s3_port=" + strconv.Itoa(ports[0]),
			"lake.root=s3://reckon-lake/chaos"}
	}
	st, err := devstack.NewStack(bin, temporalBin, base, dir, s3Sets...)
	if err != nil {
		check("setup", err)
		return finish()
	}
	if weed != "" {
		say("lake %s on a real S3 server (SeaweedFS %s, %s)", st.Cfg.Lake.Root, weed, st.Cfg.Lake.S3.Endpoint)
	}
	cfg := st.Cfg
	rng := rand.New(rand.NewPCG(uint64(seed), 8))
	say("seed %d, dir %s, broker %s, temporal %s", seed, dir, cfg.Kafka.Brokers[0], cfg.Temporal.Address)
	// Storage faults go to the dev stack only (its children inherit its
	// --set): the stack must get past them, and the checks after it read
	// the lake as it is.
	devArgs := st.Args("dev", "--without", "generate,ofd")
	if lakeFaults > 0 {
		devArgs = append(devArgs, "--set", "lake.faults.rate="+strconv.FormatFloat(lakeFaults, 'f', -1, 64), "--set", "lake.faults.seed="+strconv.FormatInt(seed, 10))
		say("lake storage faults: %g of the stack's lake calls fail, stall or lose their answer (seed %d)", lakeFaults, seed)
	}

	// The dev stack, without its forever generators and the OFD simulator.
	defer st.Stop()
	if !check("dev stack up", st.Start(ctx, devArgs, say)) {
		return finish()
	}

	// The finite, paced generator run with a manifest.
	gen, err := st.StartGenerator(ctx, count, rate, seed)
	if err != nil {
		check("generator", err)
		return finish()
	}
	t0 := gen.Started
	day0 := t0.UTC().Format(time.DateOnly)
	say("generator: %d payments at %g/s (~%v of traffic plus the late tail)", count, rate, time.Duration(float64(count)/rate*float64(time.Second)).Round(time.Second))

	// The kill schedule: random points over the traffic, at least 12s apart
	// so each restart is under way before the next kill.
	span := time.Duration(float64(count) / rate * float64(time.Second))
	names := []string{"stream", "stream", "stream", "batch", "batch", "temporal", "broker"}
	if weed != "" {
		names = append(names, "s3")
	}
	rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	kills := schedule(rng, names, 10*time.Second, span, 12*time.Second)
	for i := range kills {
		k := &kills[i]
		select {
		case <-time.After(time.Until(t0.Add(k.at))):
		case <-ctx.Done():
			k.err = ctx.Err()
			continue
		}
		k.pid, k.err = st.Pid(k.name)
		if k.err == nil {
			k.err = syscall.Kill(k.pid, syscall.SIGKILL)
		}
		if k.err != nil {
			say("kill %-8s at t+%v: %v", k.name, k.at.Round(time.Second), k.err)
			continue
		}
		say("killed %-8s at t+%v (pid %d)", k.name, k.at.Round(time.Second), k.pid)
		// Wait for the supervisor's restart: a new pid in the pid file.
		back := time.Now()
		for time.Since(back) < 60*time.Second && ctx.Err() == nil {
			if p, err := st.Pid(k.name); err == nil && p != k.pid && devstack.Alive(p) {
				k.back = time.Since(back)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if k.back == 0 {
			k.err = fmt.Errorf("not restarted within 60s")
		} else {
			say("%s restarted after %v", k.name, k.back.Round(100*time.Millisecond))
		}
	}
	for _, k := range kills {
		check(fmt.Sprintf("kill -9 %s at t+%v and restart", k.name, k.at.Round(time.Second)), k.err)
	}

	// From here to the end of the reconciliation traffic flows, as in
	// production (issue 24): clean payments on keys of their own, so the
	// manifest's windows keep their truth while the stream's offsets and
	// watermark move on. It starts after the kills: its windows past the
	// reconciled range are checked against the stream's panes alone.
	bg, err := st.StartBackground(ctx, bgRate, "bg-", seed+1)
	if !check("background traffic started", err) {
		return finish()
	}
	defer bg.Stop() // on early returns; stopped and checked below
	say("background traffic: clean payments at %g/s on %s… keys", bgRate, bg.Keys())

	if gen.Await(ctx, rep, "generator finished, manifest complete") != nil && ctx.Err() != nil {
		return finish()
	}
	say("generator done after %v", time.Since(t0).Round(time.Second))

	// The reconciliation of a day in progress checks the windows the
	// stream has purged (docs/adr/0015-stream-progress.md, "Today so
	// far"): wait until the background traffic has moved the purge past
	// the run's last window, so it checks every window of the run.
	lastEnd, err := devstack.LastWindowEnd(gen.Manifest)
	if !check("manifest read", err) {
		return finish()
	}
	purged, err := st.WaitPurgedThrough(ctx, "payments", lastEnd, 3*time.Minute)
	check(fmt.Sprintf("stream purged through the run's last window end %s (%s)", lastEnd.UTC().Format(time.TimeOnly),
		strings.TrimSpace(purged)), err)

	// Reconcile every date the traffic touched (today, and yesterday when
	// the run crossed midnight), waiting for the report, while the
	// background traffic flows.
	days := []string{day0}
	if d := time.Now().UTC().Format(time.DateOnly); d != day0 {
		days = append(days, d)
	}
	for _, d := range days {
		sent, began := bg.Sent(), time.Now()
		inProgress := d == began.UTC().Format(time.DateOnly)
		out, err := devstack.RunCmd(ctx, bin, st.Args("reconcile", "--date", d, "--wait")...)
		fmt.Print(devstack.Indent(out))
		took := time.Since(began).Round(time.Second)
		if err == nil {
			err = devstack.CheckedThrough(out, d, inProgress, lastEnd)
		}
		check(fmt.Sprintf("reconcile %s completed under traffic in %v, every window of the run checked", d, took), err)
		var moved error
		if n := bg.Sent() - sent; n == 0 {
			moved = errors.New("no background event was produced while it ran")
		} else {
			say("background traffic during the reconcile of %s: %d events", d, n)
		}
		check("traffic on during the reconcile of "+d, moved)
	}

	n := bg.Sent()
	check(fmt.Sprintf("background traffic stopped, every one of its %d events acknowledged", n), bg.Stop())
	// Settle: the stream consumes everything (no traffic now: a fixed end).
	sctx, scancel := context.WithTimeout(ctx, 2*time.Minute)
	err = streaming.WaitCaughtUp(sctx, cfg)
	scancel()
	check("stream caught up", err)

	out, err := devstack.RunCmd(ctx, bin, st.Args("verify", "--manifest", gen.Manifest, "--manifest", bg.Manifest, "--truth",
		"--features")...)
	fmt.Print(devstack.Indent(out))
	check("verify --truth --features of the run and the background traffic (conserved: produced = accepted + late + "+
		"dead-lettered + duplicates; closed windows = truth; every served feature archived once, the features view "+
		"consistent with it)", err)

	if lakeFaults > 0 {
		injected := strings.Count(devstack.ReadFileString(st.LogPath), "lake: injected ")
		say("lake faults named in the stack's log: %d (faults the lake gave up retrying: each failed an activity attempt, which Temporal retried)", injected)
		if n, url, err := storageRetries(ctx, devstack.ReadFileString(st.LogPath)); err != nil {
			say("lake storage retries: not read: %v", err)
		} else {
			say("lake storage retries of the running batch worker (since its last restart): %.0f (reckon_lake_storage_retries_total at %s)", n, url)
		}
	}
	fmt.Println("kills:")
	for _, k := range kills {
		status := "restarted after " + k.back.Round(100*time.Millisecond).String()
		if k.err != nil {
			status = k.err.Error()
		}
		fmt.Printf("  t+%-5v %-8s pid %-7d %s\n", k.at.Round(time.Second), k.name, k.pid, status)
	}
	return finish()
}

// schedule spreads the kills over [from, to) at random, at least gap apart.
func schedule(rng *rand.Rand, names []string, from, to, gap time.Duration) []kill {
	need := gap * time.Duration(len(names))
	if to-from < need {
		to = from + need
	}
	slack := to - from - need
	var offs []time.Duration
	for range names {
		offs = append(offs, time.Duration(rng.Int64N(int64(slack)+1)))
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	kills := make([]kill, len(names))
	for i, n := range names {
		kills[i] = kill{at: from + offs[i] + gap*time.Duration(i), name: n}
	}
	return kills
}

// storageRetries sums reckon_lake_storage_retries_total on the metrics
// endpoint of the batch worker that started last (its url is in the dev
// log): the transient storage faults the retry layer absorbed, proof the
// injected faults happened and were survived.
func storageRetries(ctx context.Context, devLog string) (float64, string, error) {
	url := ""
	for _, l := range strings.Split(devLog, "\n") {
		if strings.HasPrefix(l, "batch ") && strings.Contains(l, "msg=metrics url=") {
			url = strings.Fields(l[strings.Index(l, "msg=metrics url=")+len("msg=metrics url="):])[0]
		}
	}
	if url == "" {
		return 0, "", fmt.Errorf("no batch metrics url in the dev log")
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, url, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, url, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, url, err
	}
	var sum float64
	for _, l := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(l, "reckon_lake_storage_retries_total{") {
			continue
		}
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, url, fmt.Errorf("metric line %q: %w", l, err)
		}
		sum += v
	}
	return sum, url, nil
}
