// Command outages is `make outages`: long outages of one component of the
// dev stack (`reckon dev`, on loopback with a temporary data dir and lake,
// as `make chaos` runs it: tools/internal/devstack) while paced payments
// traffic goes on throughout. Three scenarios, each its own stack:
//
//   - temporal: the Temporal dev server down -temporal-down (10m). The
//     stream must keep publishing (its output offsets advance during the
//     outage); after Temporal returns the raw archive catches up to the
//     head it had at the return, and the reconciliation schedule's
//     catch-up runs the slot that fell inside the outage (the test sets
//     batch.reconcile_at to a minute in the middle of the outage).
//   - broker: the broker down -broker-down (2m). The stream worker's
//     process rides it out (it never exits: it waits for the broker and
//     restores its partitions); the stream and the
//     archive resume and catch up; the generator's produce calls neither
//     spin forever (it finishes its --count) nor drop silently (the
//     ledger); no stream pane is published twice with the same version.
//   - stream: the stream worker down -stream-down (10m). On its return it
//     catches up to the head; its closed windows equal the truth, and the
//     late output holds only records the generator sent late by event
//     time: an outage must not turn on-time events into late ones (the
//     watermark is event time).
//
// Each scenario runs the Z-report path too (docs/requirements.md: with
// Temporal down "archive, corrections and Z-reports catch up after"; with
// the broker down "stream, bridge and archive resume"): the simulated
// operator (`reckon dev`'s ofd) answers, and a finite paced fiscal
// generator (-fiscal-rate parts/s, the same span as the payments) sends
// shifts' parts — late, missing, mismatched, corrected, redelivered,
// poison — through the outage. The Z-report deadlines are shortened with
// --set (zreport.ofd_request_after 1m, retention 4m, ofd_retry 30s, linger
// 2m; `reckon dev` would use 3m/15m/1m/5m) so the last shifts finalize
// within minutes. After the return the tool measures the bridge catching
// up (its committed offsets on the parts topic reaching the head) and the
// last final of the shifts due by the return (their last part sent, the
// deadline their final waits for passed) reaching the complete topic;
// then every planned shift's latest final on the complete topic and
// in the lake's zreports table must be as the generator's manifest says
// (status, the sources' figures, no part lost, no duplicate counted beyond
// those sent: verify/zverify), and exactly the poison parts be
// dead letters.
//
// Every scenario ends like `make chaos`: the stream caught up; the targeted
// corrections caught up (`reckon verify --truth` passes before any
// reconciliation of the day); reconcile the traffic's date(s), `reckon
// verify --truth --lake` (nothing lost or
// counted twice, closed windows = truth, every archived record once in the
// lake), and the late/DLQ check above. It prints each recovery time — from
// the component's return to the stream's committed offsets reaching the
// head / the archive's progress reaching the head / the missed
// reconciliation done — a summary table, and `outages: N passed, M failed`;
// it exits non-zero on any failure.
//
// How a component is down: the tool creates the supervisor's hold file
// (<dev dir>/run/<name>.hold) and SIGKILLs the component's process group;
// `reckon dev` does not restart it until the tool removes the file. A kill,
// not a SIGSTOP: a real outage of minutes is a server that is gone —
// connections refused, its in-memory state lost — and comes back from its
// data (the Temporal dev server from its SQLite file, the broker from its
// data dir, the stream worker from its checkpoints), which is what the
// catch-up paths must survive. A stopped process instead keeps its sockets
// accepting and its state in memory, and resumes as if no time had passed.
//
// The scenarios run at once (-sequential: one after another), each on its
// own stack and ports; timings are those of a loaded machine.
//
// Run from the module root: go run ./tools/outages -bin bin/reckon -temporal bin/temporal -temporal-down 1m -broker-down 1m -stream-down 1m
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
	"reckon/internal/temporalconn"
	"reckon/lake"
	"reckon/streaming"
	"reckon/tools/internal/devstack"
	"reckon/verify/generate"
	"reckon/verify/zverify"
	"reckon/zreport"
)

// opts are the run's flags.
type opts struct {
	bin, temporalBin, base string
	rate, fiscalRate       float64
	lead, after            time.Duration
	keep                   bool
}

// scenario is one outage: component down for down.
type scenario struct {
	name      string // temporal, broker, stream: the dev component
	down      time.Duration
	rep       *devstack.Report
	recovered []recovery
	note      string
}

// recovery is one measured recovery time.
type recovery struct {
	what string
	took time.Duration // -1: not reached
}

func main() {
	var o opts
	flag.StringVar(&o.bin, "bin", "bin/reckon", "reckon binary")
	flag.StringVar(&o.temporalBin, "temporal", "bin/temporal", "Temporal CLI (dev server)")
	flag.StringVar(&o.base, "config", "deploy/reckon.yaml", "base configuration; the payments windows are shortened in a temporary copy")
	flag.Float64Var(&o.rate, "rate", 10, "generator rate, events per second (paced on the wall clock)")
	flag.Float64Var(&o.fiscalRate, "fiscal-rate", 1, "fiscal generator rate, Z-report parts per second (a shift every 3/rate s)")
	flag.DurationVar(&o.lead, "lead", 45*time.Second, "traffic before an outage starts")
	flag.DurationVar(&o.after, "after", time.Minute, "traffic after the component returns (then the generator's late tail)")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directories")
	temporalDown := flag.Duration("temporal-down", 10*time.Minute, "how long the Temporal dev server is down; 0: skip the scenario")
	brokerDown := flag.Duration("broker-down", 2*time.Minute, "how long the broker is down; 0: skip")
	streamDown := flag.Duration("stream-down", 10*time.Minute, "how long the stream worker is down; 0: skip")
	sequential := flag.Bool("sequential", false, "run the scenarios one after another, not at once")
	budget := flag.Duration("timeout", 0, "give up after this long (0: the longest outage + 25m, or the sum + 25m each with -sequential)")
	flag.Parse()
	for _, p := range []*string{&o.bin, &o.temporalBin, &o.base} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			fmt.Fprintf(os.Stderr, "outages: %v\n", err)
			os.Exit(2)
		}
		*p = abs
	}
	var scs []*scenario
	for _, s := range []struct {
		name string
		down time.Duration
	}{{"temporal", *temporalDown}, {"broker", *brokerDown}, {"stream", *streamDown}} {
		if s.down > 0 {
			scs = append(scs, &scenario{name: s.name, down: s.down, rep: &devstack.Report{Name: "outages " + s.name}})
		}
	}
	if len(scs) == 0 {
		fmt.Fprintln(os.Stderr, "outages: every scenario skipped (-temporal-down, -broker-down, -stream-down all 0)")
		os.Exit(2)
	}
	if *budget == 0 {
		for _, s := range scs {
			if *sequential {
				*budget += s.down + 25*time.Minute
			} else {
				*budget = max(*budget, s.down+25*time.Minute)
			}
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *budget)
	defer cancel()

	// Stacks start one at a time (ports are picked free just before).
	var startMu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range scs {
		if *sequential {
			s.run(ctx, o, &startMu)
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); s.run(ctx, o, &startMu) }()
	}
	wg.Wait()
	os.Exit(summary(scs))
}

// summary prints the table and the final line; it returns the exit code.
func summary(scs []*scenario) int {
	fmt.Println("\noutages summary (recovery: from the component's return)")
	fmt.Printf("  %-9s %-7s %-7s %-6s %s\n", "scenario", "down", "checks", "result", "recovery")
	passed, failed := 0, 0
	for _, s := range scs {
		f := s.rep.Failed()
		passed += len(s.rep.Results) - f
		failed += f
		verdict := "ok"
		if f > 0 {
			verdict = "FAIL"
		}
		var recs []string
		for _, r := range s.recovered {
			took := "not reached"
			if r.took >= 0 {
				took = r.took.Round(100 * time.Millisecond).String()
			}
			recs = append(recs, r.what+" "+took)
		}
		fmt.Printf("  %-9s %-7v %3d/%-3d %-6s %s\n", s.name, s.down, len(s.rep.Results)-f, len(s.rep.Results), verdict, strings.Join(recs, "; "))
		if s.note != "" {
			fmt.Printf("  %-9s %s\n", "", s.note)
		}
		for _, r := range s.rep.Results {
			if r.Err != nil {
				fmt.Printf("  %-9s FAIL %s: %v\n", "", r.Name, r.Err)
			}
		}
	}
	fmt.Printf("outages: %d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return 1
	}
	return 0
}

// run is one scenario on its own stack.
func (s *scenario) run(ctx context.Context, o opts, startMu *sync.Mutex) {
	say, check := s.rep.Say, s.rep.Check
	dir, err := os.MkdirTemp("", "reckon-outage-"+s.name+"-")
	if err != nil {
		check("setup", err)
		return
	}
	defer func() {
		if o.keep || s.rep.Failed() > 0 {
			say("data in %s (kept)", dir)
			return
		}
		os.RemoveAll(dir)
	}()

	startMu.Lock()
	// The Temporal scenario's reconciliation slot: a whole minute that
	// falls in the middle of the outage. The stack is given up to 2
	// minutes to start; the outage then begins at slot − down/2.
	var slot time.Time
	// The Z-report deadlines on a clock of minutes (see the package doc).
	extra := []string{"zreport.ofd_request_after=1m", "zreport.retention=4m", "zreport.ofd_retry=30s", "zreport.linger=2m"}
	if s.name == "temporal" {
		slot = time.Now().Add(2*time.Minute + o.lead + s.down/2).UTC().Truncate(time.Minute).Add(time.Minute)
		extra = append(extra, "batch.reconcile_at="+slot.Format("15:04"), "batch.timezone=UTC")
	}
	st, err := devstack.NewStack(o.bin, o.temporalBin, o.base, dir, extra...)
	if err != nil {
		startMu.Unlock()
		check("setup", err)
		return
	}
	cfg := st.Cfg
	say("dir %s, broker %s, temporal %s; %s down %v", dir, cfg.Kafka.Brokers[0], cfg.Temporal.Address, s.name, s.down)
	defer st.Stop()
	// Without the forever generators; with the OFD simulator.
	err = st.Start(ctx, st.Args("dev", "--without", "generate"), func(string, ...any) {})
	startMu.Unlock()
	if !check("dev stack up", err) {
		return
	}
	// A hold file left behind would keep the component down for good.
	defer os.Remove(holdPath(st, s.name))

	// Traffic throughout: before, during and after the outage.
	now := time.Now()
	outageAt := now.Add(o.lead)
	if !slot.IsZero() {
		outageAt = slot.Add(-s.down / 2)
		if outageAt.Before(now.Add(15 * time.Second)) {
			check("setup", fmt.Errorf("the stack took too long to start: the reconciliation slot %s is too close", slot.Format(time.TimeOnly)))
			return
		}
		say("reconciliation schedule slot %s UTC (batch.reconcile_at): inside the outage", slot.Format("15:04"))
	}
	traffic := time.Until(outageAt) + s.down + o.after
	count := int64(o.rate * traffic.Seconds())
	seed := time.Now().UnixNano() % 1_000_000
	gen, err := st.StartGenerator(ctx, count, o.rate, seed)
	if err != nil {
		check("generator", err)
		return
	}
	day0 := gen.Started.UTC().Format(time.DateOnly)
	say("generator: %d payments at %g/s (~%v of traffic plus the late tail), seed %d", count, o.rate, traffic.Round(time.Second), seed)
	fcount := int64(o.fiscalRate * traffic.Seconds())
	fgen, err := st.StartFiscal(ctx, fcount, o.fiscalRate, 45*time.Second, 15*time.Second, 20*time.Second)
	if err != nil {
		check("fiscal generator", err)
		return
	}
	say("fiscal generator: %d Z-report parts at %g/s (OFD part ~45s after close, DWH ~15s, redeliveries ~20s)", fcount, o.fiscalRate)

	adm, closeAdm, err := kafkaconn.NewAdmin(cfg.Kafka, "outages")
	if err != nil {
		check("setup", err)
		return
	}
	defer closeAdm()
	ps, ok := cfg.StreamByName("payments")
	if !ok {
		check("setup", errors.New("no payments stream in the configuration"))
		return
	}
	raw := ps.Topic
	outputs := []string{cfg.Topics.Summaries, cfg.Topics.StreamProgress}

	if !sleepUntil(ctx, outageAt) {
		check("outage", ctx.Err())
		return
	}
	before, _ := sumEnds(ctx, adm, outputs...)
	rawBefore, err := sumEnds(ctx, adm, raw)
	if !check("the raw topic's offsets before the outage", err) {
		return
	}
	// The broker scenario: the stream worker must ride the outage out in
	// the same process (docs/adr/0033-progress-every-partition-and-broker-outages.md):
	// an exit would spend an orchestrator's restart budget on the broker.
	streamPid := 0
	if s.name == "broker" {
		if streamPid, err = st.Pid("stream"); !check("the stream worker's pid before the outage", err) {
			return
		}
	}
	pid, err := s.takeDown(st)
	if !check(fmt.Sprintf("%s down (hold file, SIGKILL pid %d)", s.name, pid), err) {
		return
	}
	downAt := time.Now()

	// During the outage: sample the stream's output offsets (not with the
	// broker down), so the temporal scenario can assert they kept
	// advancing.
	type sample struct {
		at  time.Time
		sum int64
	}
	var samples []sample
	for ctx.Err() == nil && time.Since(downAt) < s.down {
		if s.name != "broker" {
			if n, err := sumEnds(ctx, adm, outputs...); err == nil {
				samples = append(samples, sample{time.Now(), n})
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(10*time.Second, time.Until(downAt.Add(s.down)))):
		}
	}
	if s.name == "temporal" {
		// Advancing all through the outage: past the offsets at its start,
		// and again in its second half.
		err := errors.New("no sample")
		if len(samples) > 0 {
			half := downAt.Add(s.down / 2)
			mid := before
			for _, x := range samples {
				if !x.at.After(half) {
					mid = x.sum
				}
			}
			last := samples[len(samples)-1].sum
			switch {
			case last <= before:
				err = fmt.Errorf("the stream's outputs (%s) stayed at %d offsets during the outage", strings.Join(outputs, ", "), before)
			case last <= mid:
				err = fmt.Errorf("the stream's outputs stopped advancing in the outage's second half (%d at the middle, %d at the end)", mid, last)
			default:
				err = nil
				say("the stream's outputs advanced %d offsets during the outage (%d in its second half)", last-before, last-mid)
			}
		}
		check("the stream kept publishing while Temporal was down", err)
	}

	backAt, err := s.bringBack(ctx, st, pid)
	if !check(fmt.Sprintf("%s back after %v down", s.name, time.Since(downAt).Round(time.Second)), err) {
		return
	}

	// The head after the return: what the stream and the archive must
	// reach. It includes the traffic of the outage — with the broker down,
	// the generator's buffered records, delivered after the return — so
	// it is read once the raw topic holds 90 % of the records paced since
	// the outage began.
	want := rawBefore + int64(0.9*o.rate*backAt.Sub(downAt).Seconds())
	var head, partsHead map[int32]int64
	hctx, hcancel := context.WithTimeout(ctx, 2*time.Minute)
	err = poll(hctx, func() error {
		n, err := sumEnds(hctx, adm, raw)
		if err != nil {
			return err
		}
		if n < want {
			return fmt.Errorf("the raw topic holds %d records, %d expected", n, want)
		}
		if head, err = endOffsets(hctx, adm, raw); err != nil {
			return err
		}
		partsHead, err = endOffsets(hctx, adm, cfg.Topics.ZReportParts)
		return err
	})
	hcancel()
	if !check("the outage's traffic in the raw topic after the return", err) {
		return
	}
	if s.name == "broker" {
		took := time.Since(backAt)
		say("recovered: the generator's backlog delivered %v after the return", took.Round(100*time.Millisecond))
		s.recovered = append(s.recovered, recovery{"producer backlog delivered", took})
	}
	var wg sync.WaitGroup
	var mu sync.Mutex // protects s.recovered and the report while the waits run
	measure := func(what string, limit time.Duration, reached func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mctx, cancel := context.WithTimeout(ctx, limit)
			defer cancel()
			err := reached(mctx)
			took := time.Since(backAt)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				took = -1
			} else {
				say("recovered: %s %v after the return", what, took.Round(100*time.Millisecond))
			}
			s.recovered = append(s.recovered, recovery{what, took})
			check(what+" after the return", err)
		}()
	}
	switch s.name {
	case "broker", "stream":
		measure("stream caught up to the head", 10*time.Minute, func(ctx context.Context) error {
			return poll(ctx, func() error { return committedReach(ctx, adm, cfg.Stream.Group, raw, head) })
		})
	}
	switch s.name {
	case "broker", "temporal":
		measure("archive caught up to the head", 15*time.Minute, func(ctx context.Context) error {
			return poll(ctx, func() error { return archiveReach(ctx, cfg, raw, head) })
		})
	}
	// The bridge signals the entity workflows and commits only what
	// Temporal accepted: its lag on the parts topic is zero once every
	// part sent by the return is in a workflow.
	measure("Z-report bridge caught up to the parts head", 15*time.Minute, func(ctx context.Context) error {
		return poll(ctx, func() error {
			return committedReach(ctx, adm, cfg.ZReport.BridgeGroup, cfg.Topics.ZReportParts, partsHead)
		})
	})
	if s.name == "temporal" {
		measure("missed reconciliation ("+slot.Format("15:04")+" slot) done", 15*time.Minute, func(ctx context.Context) error {
			return scheduleSlotDone(ctx, cfg, slot, downAt, say)
		})
	}
	wg.Wait()

	if gen.Await(ctx, s.rep, "generator finished its --count, manifest complete (no produce call spun forever or dropped)") != nil {
		return
	}
	say("generator done after %v", time.Since(gen.Started).Round(time.Second))
	s.note = restarts(devstack.ReadFileString(st.LogPath))

	sctx, scancel := context.WithTimeout(ctx, 3*time.Minute)
	err = streaming.WaitCaughtUp(sctx, cfg)
	scancel()
	check("stream caught up", err)
	if s.name == "broker" {
		check(fmt.Sprintf("the stream worker's process (pid %d) never exited during the broker scenario", streamPid),
			sameProcess(st, "stream", streamPid))
	}
	// Corrections caught up: before any reconciliation of the day, the
	// stream's panes and the targeted corrections of its late events
	// (batch.correct_debounce, correct_max_delay) already equal the truth.
	var out string
	cctx, ccancel := context.WithTimeout(ctx, 5*time.Minute)
	for {
		out, err = devstack.RunCmd(cctx, o.bin, st.Args("verify", "--manifest", gen.Manifest, "--truth")...)
		if err == nil || cctx.Err() != nil {
			break
		}
		select {
		case <-cctx.Done():
		case <-time.After(10 * time.Second):
		}
	}
	ccancel()
	if err != nil {
		fmt.Print(devstack.Indent(out))
	}
	check("corrections caught up: verify --truth passes before the reconciliation", err)
	// The reconciliation runs under traffic, as in production (issue 24):
	// clean payments on keys of their own keep the stream's offsets and
	// watermark moving; once they have moved the purge past the run's last
	// window, the reconciliation of today checks every window of the run.
	bg, err := st.StartBackground(ctx, o.rate, "bg-", seed+1)
	if !check("background traffic started", err) {
		return
	}
	defer bg.Stop() // on early returns; stopped and checked below
	lastEnd, err := devstack.LastWindowEnd(gen.Manifest)
	if !check("manifest read", err) {
		return
	}
	purged, err := st.WaitPurgedThrough(ctx, "payments", lastEnd, 3*time.Minute)
	check(fmt.Sprintf("stream purged through the run's last window end %s (%s)", lastEnd.UTC().Format(time.TimeOnly),
		strings.TrimSpace(purged)), err)
	days := []string{day0}
	if d := time.Now().UTC().Format(time.DateOnly); d != day0 {
		days = append(days, d)
	}
	for _, d := range days {
		sent, began := bg.Sent(), time.Now()
		out, err := devstack.RunCmd(ctx, o.bin, st.Args("reconcile", "--date", d, "--wait")...)
		fmt.Print(devstack.Indent(out))
		if err == nil {
			err = devstack.CheckedThrough(out, d, d == began.UTC().Format(time.DateOnly), lastEnd)
		}
		if err == nil && bg.Sent() == sent {
			err = errors.New("no background event was produced while it ran")
		}
		check(fmt.Sprintf("reconcile %s under traffic (%d background events meanwhile), every window of the run checked",
			d, bg.Sent()-sent), err)
	}
	n := bg.Sent()
	check(fmt.Sprintf("background traffic stopped, every one of its %d events acknowledged", n), bg.Stop())
	sctx, scancel = context.WithTimeout(ctx, 3*time.Minute)
	err = streaming.WaitCaughtUp(sctx, cfg)
	scancel()
	check("stream caught up with the background traffic", err)
	out, err = devstack.RunCmd(ctx, o.bin, st.Args("verify", "--manifest", gen.Manifest, "--manifest", bg.Manifest,
		"--truth", "--lake")...)
	fmt.Print(devstack.Indent(out))
	check("verify --truth --lake (nothing lost or counted twice; closed windows = truth; every archived record once in the lake)", err)
	check("late and dead letters explained by event time and poison, not by the outage", lateByEventTime(ctx, cfg, gen.Manifest, say))
	check("no stream pane published twice with the same version", noDoublePanes(ctx, cfg))
	s.zreports(ctx, st, fgen, backAt)
}

// zreports waits for the fiscal generator, then for every shift it planned
// to have its expected final on the complete topic (bounded: the deadlines
// plus 5 minutes after the generator's end), and checks the finals, the
// lake's zreports table and the dead letters against its manifest. It
// records the recovery: from the return to the last final of the shifts
// due by then (dueAt).
func (s *scenario) zreports(ctx context.Context, st *devstack.Stack, fgen *devstack.Generator, backAt time.Time) {
	say, check := s.rep.Say, s.rep.Check
	cfg := st.Cfg
	if fgen.Await(ctx, s.rep, "fiscal generator finished its --count, manifest complete") != nil {
		return
	}
	m, err := readManifest(fgen.Manifest)
	if err == nil && len(m.ZReports) == 0 {
		err = errors.New("the fiscal manifest plans no Z-report")
	}
	if !check("fiscal manifest read", err) {
		return
	}
	say("fiscal generator done: %d keys planned, expected %v", len(m.ZReports), m.ZReportTotals.WithOperator)

	limit := cfg.ZReport.OFDRequestAfter + cfg.ZReport.Retention + 5*time.Minute
	wctx, cancel := context.WithTimeout(ctx, limit)
	var res zverify.Result
	var got zverify.Finals
	err = poll(wctx, func() error {
		var err error
		if got, err = zverify.ReadComplete(wctx, cfg, "outages"); err != nil {
			return err
		}
		res = zverify.Check(m, got)
		if res.Settled < res.Keys {
			return fmt.Errorf("%d of %d keys with the expected status", res.Settled, res.Keys)
		}
		return nil
	})
	cancel()
	if err != nil {
		err = fmt.Errorf("not every planned shift final as expected within %v of the fiscal generator's end (%v): %s: %w", limit, err, res, res.Err())
	} else {
		say("Z-reports on the complete topic: %s", res)
		err = res.Err()
	}
	check("every planned shift's latest final on "+cfg.Topics.ZReportComplete+" as the manifest says (status, figures, no part lost, no extra duplicate)", err)

	// Recovery: the last final, on the topic, of the shifts due by the
	// return; for those due after it, the longest wait past the due time.
	var last time.Time
	var dueBefore, dueAfter int
	var lagAfter time.Duration
	for _, z := range m.ZReports {
		d, derr := dueAt(z, cfg.ZReport)
		f, ok := got[zverify.Key(z)]
		if derr != nil || !ok {
			continue
		}
		if !d.After(backAt) {
			dueBefore++
			last = maxTime(last, f.At)
		} else {
			dueAfter++
			lagAfter = max(lagAfter, f.At.Sub(d))
		}
	}
	took := time.Duration(-1)
	if err == nil && !last.IsZero() {
		took = max(0, last.Sub(backAt))
		say("recovered: the last final of the %d shifts due by the return on the complete topic %v after the return; the %d due after it final at most %v past due",
			dueBefore, took.Round(100*time.Millisecond), dueAfter, lagAfter.Round(100*time.Millisecond))
	}
	s.recovered = append(s.recovered, recovery{fmt.Sprintf("Z-reports due by the return (%d) final", dueBefore), took})

	lk, err := lake.Open(lake.Options{Root: cfg.Lake.Root})
	if err == nil {
		var lf zverify.Finals
		if lf, err = zverify.ReadLake(ctx, lk, m); err == nil {
			lr := zverify.Check(m, lf)
			say("zreports lake table: %s", lr)
			err = lr.Err()
		}
	}
	check("every planned shift's latest version in the lake's zreports table as the manifest says", err)

	d, err := zverify.ReadDeadLetters(ctx, cfg, "outages", m)
	if err == nil {
		say("Z-report dead letters: %d of %d poison parts (%d repeated)", d.Dead, d.Poison, d.Repeats)
		err = d.Err()
	}
	check("exactly the poison parts dead-lettered by the bridge", err)
}

// dueAt is when z's expected final can be published at the earliest: its
// last part's arrival, and the deadline it waits for — the operator's
// document for a withheld OFD part (ofd_request_after after the shift's
// close), the retention for a missing DWH or RMS part.
func dueAt(z generate.ZReport, zc config.ZReport) (time.Time, error) {
	due, err := time.Parse(generate.TimeLayout, z.LastArrival)
	if err != nil {
		return due, err
	}
	closed, err := time.Parse(generate.TimeLayout, z.ShiftClosedAt)
	if err != nil {
		return due, err
	}
	if _, ok := z.Sources[generate.SourceOFD]; !ok && z.OperatorDocument != nil {
		due = maxTime(due, closed.Add(zc.OFDRequestAfter))
	}
	if z.StatusWithOperator == string(zreport.StatusIncomplete) {
		due = maxTime(due, closed.Add(zc.Retention))
	}
	return due, nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func readManifest(path string) (*generate.Manifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return generate.ReadManifest(f)
}

// takeDown holds the component down and kills its process group; it
// returns the killed pid once the process is gone.
func (s *scenario) takeDown(st *devstack.Stack) (int, error) {
	pid, err := st.Pid(s.name)
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(holdPath(st, s.name), nil, 0o644); err != nil {
		return pid, err
	}
	// The supervisor starts each component in its own process group.
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		return pid, err
	}
	for deadline := time.Now().Add(30 * time.Second); devstack.Alive(pid); {
		if time.Now().After(deadline) {
			return pid, fmt.Errorf("pid %d still alive 30s after SIGKILL", pid)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return pid, nil
}

// bringBack releases the hold and waits for the supervisor's restart (and,
// for the servers, for them to answer); it returns when that was.
func (s *scenario) bringBack(ctx context.Context, st *devstack.Stack, old int) (time.Time, error) {
	if err := os.Remove(holdPath(st, s.name)); err != nil {
		return time.Time{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err := poll(wctx, func() error {
		p, err := st.Pid(s.name)
		if err != nil {
			return err
		}
		if p == old || !devstack.Alive(p) {
			return errors.New("not restarted")
		}
		return nil
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("%s not restarted within 2m: %w", s.name, err)
	}
	switch s.name {
	case "broker":
		err = kafkaconn.WaitReady(wctx, st.Cfg.Kafka)
	case "temporal":
		err = poll(wctx, func() error {
			c, err := temporalconn.Dial(wctx, st.Cfg.Temporal, slog.New(slog.DiscardHandler), 5*time.Second)
			if err == nil {
				c.Close()
			}
			return err
		})
	}
	return time.Now(), err
}

func holdPath(st *devstack.Stack, name string) string {
	return filepath.Join(st.RunDir, name+".hold")
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Until(t)):
		return true
	}
}

// poll calls cond every second until it returns nil or ctx ends; the error
// then says what cond last reported.
func poll(ctx context.Context, cond func() error) error {
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(time.Second):
		}
	}
}

// endOffsets is topic's end offset per partition.
func endOffsets(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	if err := ends.Error(); err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	if len(out) == 0 {
		return nil, fmt.Errorf("topic %s: no partitions", topic)
	}
	return out, nil
}

// sumEnds is the sum of the end offsets of topics.
func sumEnds(ctx context.Context, adm *kadm.Client, topics ...string) (int64, error) {
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return 0, err
	}
	if err := ends.Error(); err != nil {
		return 0, err
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n, nil
}

// committedReach fails until group has committed at least head on every
// partition of topic.
func committedReach(ctx context.Context, adm *kadm.Client, group, topic string, head map[int32]int64) error {
	committed, err := adm.FetchOffsetsForTopics(ctx, group, topic)
	if err != nil {
		return err
	}
	for p, h := range head {
		c, ok := committed.Lookup(topic, p)
		if h > 0 && (!ok || c.At < h) {
			return fmt.Errorf("%s/%d committed %d of %d", topic, p, c.At, h)
		}
	}
	return nil
}

// archiveReach fails until the lake's archive progress of topic is at
// least head on every partition.
func archiveReach(ctx context.Context, cfg *config.Config, topic string, head map[int32]int64) error {
	lk, err := lake.Open(lake.Options{Root: cfg.Lake.Root})
	if err != nil {
		return err
	}
	for p, h := range head {
		pr, err := lk.ReadProgress(ctx, topic, p)
		if err != nil && !errors.Is(err, lake.ErrNoProgress) {
			return err
		}
		if h > 0 && pr.NextOffset < h {
			return fmt.Errorf("%s/%d archived to %d of %d", topic, p, pr.NextOffset, h)
		}
	}
	return nil
}

// scheduleSlotDone waits for the reconciliation schedule to have taken its
// action for slot — after the outage began, so by the catch-up — and for
// that workflow to complete.
func scheduleSlotDone(ctx context.Context, cfg *config.Config, slot, downAt time.Time, say func(string, ...any)) error {
	c, err := temporalconn.Dial(ctx, cfg.Temporal, slog.New(slog.DiscardHandler), time.Minute)
	if err != nil {
		return err
	}
	defer c.Close()
	var wid, run string
	err = poll(ctx, func() error {
		d, err := c.ScheduleClient().GetHandle(ctx, cfg.Batch.ScheduleID).Describe(ctx)
		if err != nil {
			return err
		}
		if d.Info.NumActionsMissedCatchupWindow > 0 {
			return fmt.Errorf("schedule %s: %d action(s) missed the catch-up window", cfg.Batch.ScheduleID, d.Info.NumActionsMissedCatchupWindow)
		}
		for _, a := range d.Info.RecentActions {
			if a.ScheduleTime.Equal(slot) && a.StartWorkflowResult != nil {
				if a.ActualTime.Before(downAt) {
					return fmt.Errorf("the %s action ran at %s, before the outage", slot.Format("15:04"), a.ActualTime.UTC().Format(time.TimeOnly))
				}
				wid, run = a.StartWorkflowResult.WorkflowID, a.StartWorkflowResult.FirstExecutionRunID
				say("schedule caught up: the %s slot's action taken at %s (%v late), workflow %s", slot.Format("15:04"),
					a.ActualTime.UTC().Format(time.TimeOnly), a.ActualTime.Sub(slot).Round(time.Second), wid)
				return nil
			}
		}
		return fmt.Errorf("no action for the %s slot yet (%d taken)", slot.Format("15:04"), d.Info.NumActions)
	})
	if err != nil {
		return err
	}
	if err := c.GetWorkflow(ctx, wid, run).Get(ctx, nil); err != nil {
		return fmt.Errorf("reconciliation %s: %w", wid, err)
	}
	return nil
}

// lateByEventTime checks that every record on the late output was sent
// beyond the allowed lateness by the generator (event time), and every dead
// letter was poison: none was made late or dead by the outage.
func lateByEventTime(ctx context.Context, cfg *config.Config, manifest string, say func(string, ...any)) error {
	m, err := readManifest(manifest)
	if err != nil {
		return err
	}
	s, ok := cfg.StreamByName(m.Options.Stream)
	if !ok {
		return fmt.Errorf("no stream %q", m.Options.Stream)
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := streaming.CollectOutputs(rctx, cfg, s)
	if err != nil {
		return err
	}
	cat := map[string]generate.Category{}
	planned := map[generate.Category]int{}
	for _, e := range m.Listed {
		if e.Partition != nil && e.Offset != nil {
			cat[fmt.Sprintf("%s/%d/%d", m.Topic, *e.Partition, *e.Offset)] = e.Category
			planned[e.Category]++
		}
	}
	var bad []string
	for src := range out.Late {
		if c := cat[src]; c != generate.BeyondLateness {
			bad = append(bad, fmt.Sprintf("late output %s was %s", src, category(c)))
		}
	}
	for src := range out.DLQ {
		if c := cat[src]; c != generate.Poison {
			bad = append(bad, fmt.Sprintf("dead letter %s was %s", src, category(c)))
		}
	}
	say("late output %d (generator: %d beyond the lateness), dead letters %d (generator: %d poison)",
		len(out.Late), planned[generate.BeyondLateness], len(out.DLQ), planned[generate.Poison])
	if len(bad) > 0 {
		slices.Sort(bad)
		return fmt.Errorf("%d record(s) late or dead-lettered not by event time nor poison, e.g. %s", len(bad), strings.Join(bad[:min(5, len(bad))], "; "))
	}
	return nil
}

func category(c generate.Category) string {
	if c == "" {
		return string(generate.OnTime)
	}
	return string(c)
}

// noDoublePanes fails when the summaries topic (read committed) holds a
// stream pane twice with the same window and version: exactly-once
// publishing allows a version once.
func noDoublePanes(ctx context.Context, cfg *config.Config) error {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	seen := map[string]int{}
	panes := 0
	err := kafkaconn.ReadTopic(rctx, cfg.Kafka, "outages", cfg.Topics.Summaries, func(r *kgo.Record) error {
		var p event.Pane
		if err := json.Unmarshal(r.Value, &p); err != nil {
			return fmt.Errorf("summaries %d/%d: %w", r.Partition, r.Offset, err)
		}
		if p.ComputedBy != event.ComputedByStream {
			return nil
		}
		panes++
		seen[fmt.Sprintf("%s v%d", p.RecordKey(), p.Version)]++
		return nil
	})
	if err != nil {
		return err
	}
	var twice []string
	for k, n := range seen {
		if n > 1 {
			twice = append(twice, fmt.Sprintf("%s ×%d", k, n))
		}
	}
	if len(twice) > 0 {
		slices.Sort(twice)
		return fmt.Errorf("%d of %d stream panes published more than once, e.g. %s", len(twice), panes, strings.Join(twice[:min(5, len(twice))], "; "))
	}
	if panes == 0 {
		return errors.New("no stream pane read")
	}
	return nil
}

// sameProcess checks that component name still runs as process pid and
// that its supervisor logged no exit of it.
func sameProcess(st *devstack.Stack, name string, pid int) error {
	exits := 0
	for _, line := range strings.Split(devstack.ReadFileString(st.LogPath), "\n") {
		if n, _, ok := strings.Cut(line, "| reckon dev: exited ("); ok && strings.TrimSpace(n) == name {
			exits++
		}
	}
	now, err := st.Pid(name)
	switch {
	case err != nil:
		return err
	case exits > 0:
		return fmt.Errorf("%s exited %d× (see %s)", name, exits, st.LogPath)
	case now != pid || !devstack.Alive(pid):
		return fmt.Errorf("%s runs as pid %d now, %d before (alive: %v)", name, now, pid, devstack.Alive(pid))
	}
	return nil
}

// restarts says how often each component's supervisor restarted it (the
// held component's release aside): who else crashed during the run.
func restarts(devLog string) string {
	n := map[string]int{}
	for _, line := range strings.Split(devLog, "\n") {
		name, rest, ok := strings.Cut(line, "| reckon dev: exited (")
		if ok && !strings.Contains(rest, "held down") {
			n[strings.TrimSpace(name)]++
		}
	}
	if len(n) == 0 {
		return "no component exited besides the one taken down"
	}
	var parts []string
	for k, v := range n {
		parts = append(parts, fmt.Sprintf("%s %d×", k, v))
	}
	slices.Sort(parts)
	return "other exits during the run (supervisor restarts): " + strings.Join(parts, ", ")
}
