package workers

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"reckon/internal/config"
	"reckon/internal/kafkaconn"
	"reckon/verify/generate"
)

// generateSummary is the one JSON line `reckon generate` prints when done.
type generateSummary struct {
	Scenario     generate.Scenario `json:"scenario"`
	Seed         int64             `json:"seed"`
	IDNonce      uint64            `json:"id_nonce"`
	FirstKey     int64             `json:"first_key,omitempty"`
	Start        string            `json:"start"`
	Records      int64             `json:"records"`
	KafkaAcked   int64             `json:"kafka_acked"`
	JSONLLines   int64             `json:"jsonl_lines"`
	JSONLSkipped int64             `json:"jsonl_skipped"`
	Complete     bool              `json:"complete"`
	Paced        bool              `json:"paced"`
	ElapsedSec   float64           `json:"elapsed_s"`
}

// runGenerate produces a scenario's traffic to Kafka and/or JSONL.
//
// Time: event times start at --start and advance at --rate events per second
// of event time; every record has a simulated arrival (event time + delay),
// used as the Kafka record timestamp and as arrived_at in JSONL, so content
// never depends on the wall clock. Pacing (--pace) only decides when records
// are sent: paced, a record leaves when the wall clock has advanced as far
// from the run's start as its arrival is from --start, so with --start=now
// event times and timestamps track the wall clock (live traffic); unpaced,
// records go as fast as the broker takes them (backfills, tests). A paced
// finite run lasts until its latest simulated arrival, which for late
// records is after their window's end plus allowed lateness.
func runGenerate(ctx context.Context, cx *cmdContext) error {
	var f generateFlags
	f.register(cx.fs)
	cx.fs.Usage = func() {
		fmt.Fprintln(cx.stderr, "usage: reckon generate --scenario sensors|payments|fiscal [--count N] [--rate N] "+
			"[--seed S] [--out FILE] [--manifest FILE] [--no-kafka] [knobs]")
		cx.fs.PrintDefaults()
	}
	if err := cx.parse(); err != nil {
		return err
	}
	if cx.fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, cx.fs.Args())
	}
	cx.fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	o, paced, err := f.options(cx.cfg)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	sc, live := o.Scenario, f.start == "now"
	g, err := generate.New(o)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}

	summary := generateSummary{
		Scenario: sc, Seed: o.Seed, IDNonce: o.IDNonce, FirstKey: o.FirstKey,
		Start: g.Options().Start.Format(generate.TimeLayout), Paced: paced,
	}
	var rc *generate.Recorder
	if f.manifest != "" {
		rc = generate.NewRecorder(g)
	}
	var sinks generate.Tee
	var jsonl *generate.JSONLSink
	var outFile *os.File
	summaryTo := cx.stdout
	if f.out != "" {
		var w io.Writer = cx.stdout
		if f.out == "-" {
			summaryTo = cx.stderr
		} else {
			f, err := os.Create(f.out)
			if err != nil {
				return fmt.Errorf("generate: %w", err)
			}
			defer f.Close() // on early returns; closed and checked below
			outFile, w = f, f
		}
		jsonl = generate.NewJSONLSink(w)
		sinks = append(sinks, jsonl)
	}
	var kafka *generate.KafkaSink
	if !f.noKafka {
		wctx, cancel := context.WithTimeout(ctx, f.wait)
		err := kafkaconn.WaitReady(wctx, cx.cfg.Kafka)
		cancel()
		if err != nil {
			return err
		}
		cl, err := kafkaconn.NewClient(cx.cfg.Kafka, "generate", generate.ProducerOpts()...)
		if err != nil {
			return fmt.Errorf("generate: %w", err)
		}
		defer cl.Close()
		topic := g.Options().Target.Topic
		tctx, cancel := context.WithTimeout(ctx, f.wait)
		details, err := kadm.NewClient(cl).ListTopics(tctx, topic)
		cancel()
		if err != nil {
			return fmt.Errorf("generate: list topic %s: %w", topic, err)
		}
		if !details.Has(topic) {
			return fmt.Errorf("generate: topic %s does not exist: run `reckon topics apply` first", topic)
		}
		var acked func(generate.Record, int32, int64)
		if rc != nil {
			acked = func(r generate.Record, p int32, off int64) { rc.Acked(r.Seq, p, off) }
		}
		kafka = generate.NewKafkaSink(cl, acked)
		sinks = append(sinks, kafka)
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		go watchProducer(wctx, cl.BufferedProduceRecords, kafka.Acknowledged, 10*time.Second, cx.stderr)
	}

	ro := generate.RunOptions{OnRecord: func(generate.Record) { summary.Records++ }}
	if rc != nil {
		ro.OnRecord = func(r generate.Record) { summary.Records++; rc.Add(r) }
	}
	if paced {
		ro.Clock = generate.SystemClock
		if live {
			ro.Epoch = o.Start
		}
	}
	began := time.Now()
	runErr := g.Run(ctx, sinks, ro)
	if runErr != nil {
		// Interrupted or failed: still flush what was handed over, so the
		// manifest's offsets and the file are as complete as they can be.
		fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = sinks.Flush(fctx)
		cancel()
	}
	if outFile != nil {
		if err := outFile.Close(); err != nil && runErr == nil {
			runErr = fmt.Errorf("generate: %w", err)
		}
	}
	summary.Complete = runErr == nil && (o.Count == 0 || summary.Records == o.Count)
	summary.ElapsedSec = time.Since(began).Seconds()
	if kafka != nil {
		summary.KafkaAcked = kafka.Acknowledged()
	}
	if jsonl != nil {
		summary.JSONLLines, summary.JSONLSkipped = jsonl.Lines, jsonl.Skipped
	}
	if rc != nil {
		argv := append([]string{"reckon", "generate"}, cx.args...)
		if err := writeManifest(f.manifest, rc.Manifest(summary.Complete, argv)); err != nil {
			return errors.Join(runErr, err)
		}
	}
	b, _ := json.Marshal(summary)
	fmt.Fprintf(summaryTo, "%s\n", b)
	if errors.Is(runErr, context.Canceled) && ctx.Err() != nil {
		return nil // Ctrl-C: a clean stop
	}
	return runErr
}

// generateFlags are the flags of `reckon generate`; options maps them
// onto generate.Options.
type generateFlags struct {
	scenario, idNonce, firstKey, out, manifest, start, keyPrefix, pace string
	delayDist, poisonKinds                                             string
	rate, late, beyond, dup, poison, oversized, skew                   float64
	mismatch, missing, correction                                      float64
	count, seed                                                        int64
	keys                                                               int
	noKafka                                                            bool
	wait, redeliver, ofdDelay, partDelay                               time.Duration
	// set holds the names of the flags given on the command line.
	set map[string]bool
}

// register defines the flags on fs, with the defaults of the sensors
// scenario where a scenario has its own (options picks the scenario's).
func (f *generateFlags) register(fs *flag.FlagSet) {
	def := generate.Defaults(generate.Sensors)
	fdef := generate.Defaults(generate.Fiscal)
	f.set = map[string]bool{}
	fs.StringVar(&f.scenario, "scenario", "", "traffic: sensors | payments | fiscal (required)")
	fs.Float64Var(&f.rate, "rate", def.Rate, "events per second of event time (and of wall time when paced)")
	fs.Int64Var(&f.count, "count", 0, "records to produce, every category included; 0 = forever (no manifest)")
	fs.Int64Var(&f.seed, "seed", 1,
		"seed: the same flags with --seed given give byte-identical output (see --id-nonce)")
	fs.StringVar(&f.idNonce, "id-nonce", "auto", "auto | random | N: mixed into every event_id so a rerun "+
		"repeats none of an earlier run's; 0 = ids from the seed alone. auto = random, or 0 when --seed is given. "+
		"The summary and manifest print the nonce used")
	fs.StringVar(&f.firstKey, "first-key", "0", "fiscal: number of the first business key (drive k mod --keys, "+
		"shift first + k div --keys), or now = the key slot (3/rate s from "+
		generate.FiscalEpoch.Format(time.DateOnly)+", in cycles of "+strconv.Itoa(generate.FiscalShiftCycle)+
		" shifts per drive) --start falls in, so live reruns make new, valid shifts")
	fs.StringVar(&f.out, "out", "", "also write JSONL (envelope + arrived_at) to this file; - for stdout")
	fs.StringVar(&f.manifest, "manifest", "", "write the run's manifest (counts, listed records, truth) to this JSON file")
	fs.BoolVar(&f.noKafka, "no-kafka", false, "do not produce to Kafka")
	fs.StringVar(&f.start, "start", "now", "event time of the first event, RFC 3339, or now")
	fs.IntVar(&f.keys, "keys", 0, "key cardinality: devices (≤ 99), users or fiscal drives (default 20, 50, 20)")
	fs.StringVar(&f.keyPrefix, "key-prefix", "",
		"put before every device or user id, so runs side by side touch disjoint keys")
	fs.StringVar(&f.pace, "pace", "auto", "auto | on | off: send each record at its simulated arrival on the wall "+
		"clock; auto = on with --start now when producing to Kafka or running forever. A paced finite run lasts "+
		"until its latest arrival (window + allowed lateness + delay tail; fiscal: the OFD delay)")
	fs.DurationVar(&f.wait, "wait", 30*time.Second, "how long to wait for the brokers to answer")
	fs.Float64Var(&f.late, "late-fraction", def.LateFraction,
		"share of valid stream events that arrive after their window fired")
	fs.StringVar(&f.delayDist, "delay-dist", "exp:1m",
		"extra delay of late events past their window's firing: exp:MEAN | uniform:MEAN | fixed:D")
	fs.Float64Var(&f.beyond, "beyond-lateness-fraction", def.BeyondLatenessFraction,
		"share of the late events that arrive after the allowed lateness too")
	fs.Float64Var(&f.dup, "duplicate-fraction", def.DuplicateFraction,
		"share of records that redeliver an earlier valid record (same event_id, same bytes)")
	fs.DurationVar(&f.redeliver, "redelivery-delay", 0,
		"mean delay of a redelivery after the original (default 30s, fiscal 2h)")
	fs.Float64Var(&f.poison, "poison-fraction", def.PoisonFraction, "share of records the quality gate must reject")
	fs.StringVar(&f.poisonKinds, "poison-kinds", "all", "comma-separated poison kinds: "+kindList())
	fs.Float64Var(&f.oversized, "oversized-share", 0,
		"share of poison records that are oversized (~1 MiB each); 0 = one kind among the others")
	fs.Float64Var(&f.skew, "skew-fraction", def.SkewFraction,
		"share of records from a clock running ahead (within the gate's max_future_skew)")
	fs.Float64Var(&f.mismatch, "mismatch-fraction", fdef.MismatchFraction,
		"fiscal: share of business keys whose DWH or RMS figures differ from OFD")
	fs.Float64Var(&f.missing, "missing-fraction", fdef.MissingFraction,
		"fiscal: share of business keys missing one part")
	fs.Float64Var(&f.correction, "correction-fraction", fdef.CorrectionFraction,
		"fiscal: share of business keys with a corrected DWH/RMS resend")
	fs.DurationVar(&f.ofdDelay, "ofd-delay", 48*time.Hour, "fiscal: mean delay of the OFD part after shift close")
	fs.DurationVar(&f.partDelay, "part-delay", 20*time.Minute,
		"fiscal: mean delay of the DWH part after shift close (RMS: half)")
}

// options maps the flags onto generate.Options for the target cfg names,
// with the scenario's defaults for the knobs not given, and reports
// whether records are paced. Every problem is reported at once.
func (f *generateFlags) options(cfg *config.Config) (generate.Options, bool, error) {
	sc := generate.Scenario(f.scenario)
	o := generate.Defaults(sc)
	pick := func(name string, dst *float64, v float64) {
		if f.set[name] {
			*dst = v
		}
	}
	pick("late-fraction", &o.LateFraction, f.late)
	pick("beyond-lateness-fraction", &o.BeyondLatenessFraction, f.beyond)
	pick("duplicate-fraction", &o.DuplicateFraction, f.dup)
	pick("poison-fraction", &o.PoisonFraction, f.poison)
	pick("skew-fraction", &o.SkewFraction, f.skew)
	pick("oversized-share", &o.OversizedShare, f.oversized)
	pick("mismatch-fraction", &o.MismatchFraction, f.mismatch)
	pick("missing-fraction", &o.MissingFraction, f.missing)
	pick("correction-fraction", &o.CorrectionFraction, f.correction)
	o.Seed, o.Count, o.Rate, o.Keys = f.seed, f.count, f.rate, f.keys
	o.KeyPrefix = f.keyPrefix
	o.RedeliveryDelay, o.OFDDelay, o.PartDelay = f.redeliver, f.ofdDelay, f.partDelay

	var problems []error
	usage := func(format string, a ...any) { problems = append(problems, fmt.Errorf(format, a...)) }
	if f.scenario == "" {
		usage("--scenario is required")
	}
	live := f.start == "now"
	if live {
		o.Start = time.Now().UTC().Truncate(time.Millisecond)
	} else if t, err := time.Parse(time.RFC3339Nano, f.start); err != nil {
		usage("--start %q is not RFC 3339 or now", f.start)
	} else {
		o.Start = t
	}
	// With the same ids every run would repeat the last one's event_ids
	// with other payloads, and dedup would drop the new events as
	// redeliveries: only an explicit --seed asks for a repeat.
	switch f.idNonce {
	case "auto", "random":
		if f.idNonce == "random" || !f.set["seed"] {
			for o.IDNonce == 0 {
				o.IDNonce = rand.Uint64()
			}
		}
	default:
		n, err := strconv.ParseUint(f.idNonce, 10, 64)
		if err != nil {
			usage("--id-nonce %q is not auto, random or a number", f.idNonce)
		}
		o.IDNonce = n
	}
	if f.firstKey == "now" {
		o.FirstKey = generate.FirstKeyAt(o.Start, o.Rate, o.Keys)
	} else if n, err := strconv.ParseInt(f.firstKey, 10, 64); err != nil {
		usage("--first-key %q is not a number or now", f.firstKey)
	} else {
		o.FirstKey = n
	}
	if d, err := generate.ParseDelayDist(f.delayDist); err != nil {
		problems = append(problems, err)
	} else {
		o.Delay = d
	}
	if f.poisonKinds != "all" {
		for _, k := range strings.Split(f.poisonKinds, ",") {
			o.PoisonKinds = append(o.PoisonKinds, generate.PoisonKind(strings.TrimSpace(k)))
		}
	}
	if f.noKafka && f.out == "" {
		usage("--no-kafka needs --out: the records must go somewhere")
	}
	if f.manifest != "" && f.count == 0 {
		usage("--manifest needs a finite --count")
	}
	var paced bool
	switch f.pace {
	case "auto":
		paced = live && (!f.noKafka || f.count == 0)
	case "on", "off":
		paced = f.pace == "on"
	default:
		usage("--pace %q is not auto, on or off", f.pace)
	}
	if len(problems) == 0 {
		if tg, err := generate.TargetFromConfig(cfg, sc); err != nil {
			problems = append(problems, err)
		} else {
			o.Target = tg
		}
	}
	return o, paced, errors.Join(problems...)
}

func writeManifest(path string, m *generate.Manifest) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("generate: manifest: %w", err)
	}
	if _, err := m.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("generate: manifest: %w", err)
	}
	return nil
}

func kindList() string {
	s := make([]string, len(generate.PoisonKinds))
	for i, k := range generate.PoisonKinds {
		s[i] = string(k)
	}
	return strings.Join(s, ",")
}

// watchProducer says, every interval in which the brokers acknowledged
// nothing while records wait in the producer's buffer, that the run is
// stalled on the brokers and how much waits. The producer is idempotent:
// franz-go retries a record it may have sent until a broker answers (a
// timeout could only drop or reorder it), so an outage stalls the run, and
// this makes the stall visible instead of silent.
func watchProducer(ctx context.Context, buffered, acked func() int64, every time.Duration, w io.Writer) {
	t := time.NewTicker(every)
	defer t.Stop()
	last, since := acked(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n := acked(); n != last {
			last, since = n, time.Now()
			continue
		}
		if b := buffered(); b > 0 {
			fmt.Fprintf(w, "generate: the brokers have acknowledged nothing for %s; %d records wait in the "+
				"producer's buffer (retried until a broker answers)\n",
				time.Since(since).Round(time.Second), b)
		}
	}
}
