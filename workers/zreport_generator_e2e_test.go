package workers

import (
	"context"
	"flag"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/sdk/worker"

	"reckon/internal/config"
	"reckon/internal/kafkaconn"
	"reckon/internal/testing/testenv"
	"reckon/verify/generate"
	"reckon/verify/zverify"
)

// zreportShifts sets the business keys of TestZReportGeneratorShifts
// (docs/requirements.md R-Z-13's 1,000-shift run; `make test` runs it
// with 1000). Off by
// default: at the dev server's ~100–200 signals/s it takes a few minutes.
var zreportShifts = flag.Int("zreport-shifts", 0, "business keys in TestZReportGeneratorShifts (0 = skip); e.g. -args -zreport-shifts 1000")

// TestZReportGeneratorShifts runs ~1,000 shifts of generator fiscal traffic
// (parts in arrival order, redeliveries, corrected resends, mismatches,
// missing parts, poison) through the bridge and the entity workflows on the
// real dev server, with the simulated operator answering for missing OFD
// documents, and checks every key's latest final version against the
// generator manifest's expected status.
//
// All records are produced at once; part delays are seconds, like the
// deadlines (ofd_request_after 3s, retention 15s), so some keys finalize
// before all their parts arrive and must reach the manifest's status in a
// later version.
func TestZReportGeneratorShifts(t *testing.T) {
	if testing.Short() || *zreportShifts == 0 {
		t.Skip("opt-in: go test ./workers -run TestZReportGeneratorShifts -args -zreport-shifts 1000")
	}
	tc, hostport := testenv.Temporal(t)
	_, brokers := testenv.Kafka(t, 3, "", "zreport-parts", "zreport-complete", "zreport-incomplete", "reckon-dlq")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const seed, drives = 11, 20
	cfg, err := config.Load("", nil, []string{
		"kafka.brokers=" + brokers[0], "temporal.address=" + hostport, "temporal.task_queue=zreport-gen",
		"lake.root=" + t.TempDir(),
		"zreport.ofd_request_after=3s", "zreport.retention=15s", "zreport.ofd_retry=1s", "zreport.linger=1s",
		"zreport.ofd_backoff=100ms", "zreport.ofd_url=http://" + ln.Addr().String(),
		"zreport.ofd_sim_generator_seed=" + strconv.Itoa(seed), "zreport.ofd_sim_generator_keys=" + strconv.Itoa(drives),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, _, err := newOFDSimulator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	// Generator traffic: about three parts per shift, every record produced
	// now in arrival order (the parts' own times drive the deadlines).
	o := generate.Defaults(generate.Fiscal)
	o.Seed, o.Keys, o.Start = seed, drives, time.Now().UTC()
	o.Count = int64(*zreportShifts) * 3
	o.Rate = 200 // shifts close within ~15 s
	// Part delays on the scale of the shortened deadlines (the defaults
	// are days and minutes): a part's occurred_at is its arrival, and all
	// records are produced at once, so a delay beyond gate.max_future_skew
	// would put a part in the DLQ as future-dated while the manifest
	// expects it applied.
	o.OFDDelay, o.PartDelay = 4*time.Second, 3*time.Second
	g, err := generate.New(o)
	if err != nil {
		t.Fatal(err)
	}
	rec := generate.NewRecorder(g)
	var recs []*kgo.Record
	seqs := map[*kgo.Record]int64{} // for the acks: results come back in completion order
	for {
		r, ok := g.Next()
		if !ok {
			break
		}
		rec.Add(r)
		kr := &kgo.Record{Topic: "zreport-parts", Key: r.Key, Value: r.Value}
		recs = append(recs, kr)
		seqs[kr] = r.Seq
	}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "test"),
		kgo.ConsumeTopics("zreport-complete"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, pr := range res {
		rec.Acked(seqs[pr.Record], pr.Record.Partition, pr.Record.Offset)
	}
	// The manifest after the acks: its poison entries carry their offsets
	// for the dead-letter check.
	m := rec.Manifest(true, nil)
	t.Logf("%d records, %d business keys, expected %+v", len(recs), len(m.ZReports), m.ZReportTotals.WithOperator)

	w := worker.New(tc, cfg.Temporal.TaskQueue, worker.Options{MaxConcurrentWorkflowTaskPollers: 8})
	run, closeFn, err := zreportBatch(cfg, tc, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	bctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = run(bctx) }()
	t.Cleanup(func() { stop(); wg.Wait(); closeFn(); w.Stop() })

	// Every key's latest final version, folded from the complete topic
	// until each has the manifest's status (or the context ends).
	got := zverify.Finals{}
	for zverify.Check(m, got).Settled < len(m.ZReports) {
		fs := cl.PollRecords(ctx, 10000)
		if ctx.Err() != nil {
			break
		}
		fs.EachRecord(func(r *kgo.Record) {
			if err := got.Add(r); err != nil {
				t.Fatal(err)
			}
		})
	}
	zr := zverify.Check(m, got)
	t.Logf("%v", zr)
	if err := zr.Err(); err != nil {
		t.Error(err)
	}

	// Nothing but the generator's poison may reach the DLQ: a valid part
	// refused there would be lost to its key.
	d, err := zverify.ReadDeadLetters(context.Background(), cfg, "test", m)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dead letters: %d of %d poison parts, %d repeats", d.Dead, d.Poison, d.Repeats)
	if err := d.Err(); err != nil {
		t.Error(err)
	}
	if poison := m.Counts.ByCategory[generate.Poison]; int64(d.Poison) != poison {
		t.Errorf("%d poison parts with an offset, the generator made %d", d.Poison, poison)
	}
}
