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
	def := generate.Defaults(generate.Sensors)
	fs := cx.fs
	scenario := fs.String("scenario", "", "traffic: sensors | payments | fiscal (required)")
	rate := fs.Float64("rate", def.Rate, "events per second of event time (and of wall time when paced)")
	count := fs.Int64("count", 0, "records to produce, every category included; 0 = forever (no manifest)")
	seed := fs.Int64("seed", 1, "seed: the same flags with --seed given give byte-identical output (see --id-nonce)")
	idNonce := fs.String("id-nonce", "auto", "auto | random | N: mixed into every event_id so a rerun repeats none of an earlier run's; 0 = ids from the seed alone. auto = random, or 0 when --seed is given. The summary and manifest print the nonce used")
	firstKey := fs.String("first-key", "0", "fiscal: number of the first business key (drive k mod --keys, shift first + k div --keys), or now = the key slot (3/rate s from "+generate.FiscalEpoch.Format(time.DateOnly)+", in cycles of "+strconv.Itoa(generate.FiscalShiftCycle)+" shifts per drive) --start falls in, so live reruns make new, valid shifts")
	out := fs.String("out", "", "also write JSONL (envelope + arrived_at) to this file; - for stdout")
	manifest := fs.String("manifest", "", "write the run's manifest (counts, listed records, truth) to this JSON file")
	noKafka := fs.Bool("no-kafka", false, "do not produce to Kafka")
	start := fs.String("start", "now", "event time of the first event, RFC 3339, or now")
	keys := fs.Int("keys", 0, "key cardinality: devices (≤ 99), users or fiscal drives (default 20, 50, 20)")
	keyPrefix := fs.String("key-prefix", "",
		"put before every device or user id, so runs side by side touch disjoint keys")
	pace := fs.String("pace", "auto", "auto | on | off: send each record at its simulated arrival on the wall clock; auto = on with --start now when producing to Kafka or running forever. A paced finite run lasts until its latest arrival (window + allowed lateness + delay tail; fiscal: the OFD delay)")
	wait := fs.Duration("wait", 30*time.Second, "how long to wait for the brokers to answer")
	late := fs.Float64("late-fraction", def.LateFraction, "share of valid stream events that arrive after their window fired")
	delayDist := fs.String("delay-dist", "exp:1m", "extra delay of late events past their window's firing: exp:MEAN | uniform:MEAN | fixed:D")
	beyond := fs.Float64("beyond-lateness-fraction", def.BeyondLatenessFraction, "share of the late events that arrive after the allowed lateness too")
	dup := fs.Float64("duplicate-fraction", def.DuplicateFraction, "share of records that redeliver an earlier valid record (same event_id, same bytes)")
	redeliver := fs.Duration("redelivery-delay", 0, "mean delay of a redelivery after the original (default 30s, fiscal 2h)")
	poison := fs.Float64("poison-fraction", def.PoisonFraction, "share of records the quality gate must reject")
	poisonKinds := fs.String("poison-kinds", "all", "comma-separated poison kinds: "+kindList())
	oversized := fs.Float64("oversized-share", 0,
		"share of poison records that are oversized (~1 MiB each); 0 = one kind among the others")
	skew := fs.Float64("skew-fraction", def.SkewFraction, "share of records from a clock running ahead (within the gate's max_future_skew)")
	fdef := generate.Defaults(generate.Fiscal)
	mismatch := fs.Float64("mismatch-fraction", fdef.MismatchFraction, "fiscal: share of business keys whose DWH or RMS figures differ from OFD")
	missing := fs.Float64("missing-fraction", fdef.MissingFraction, "fiscal: share of business keys missing one part")
	correction := fs.Float64("correction-fraction", fdef.CorrectionFraction, "fiscal: share of business keys with a corrected DWH/RMS resend")
	ofdDelay := fs.Duration("ofd-delay", 48*time.Hour, "fiscal: mean delay of the OFD part after shift close")
	partDelay := fs.Duration("part-delay", 20*time.Minute, "fiscal: mean delay of the DWH part after shift close (RMS: half)")
	fs.Usage = func() {
		fmt.Fprintln(cx.stderr, "usage: reckon generate --scenario sensors|payments|fiscal [--count N] [--rate N] [--seed S] [--out FILE] [--manifest FILE] [--no-kafka] [knobs]")
		fs.PrintDefaults()
	}
	if err := cx.parse(); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}

	sc := generate.Scenario(*scenario)
	o := generate.Defaults(sc)
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	pick := func(name string, dst *float64, v float64) {
		if set[name] {
			*dst = v
		}
	}
	pick("late-fraction", &o.LateFraction, *late)
	pick("beyond-lateness-fraction", &o.BeyondLatenessFraction, *beyond)
	pick("duplicate-fraction", &o.DuplicateFraction, *dup)
	pick("poison-fraction", &o.PoisonFraction, *poison)
	pick("skew-fraction", &o.SkewFraction, *skew)
	pick("oversized-share", &o.OversizedShare, *oversized)
	pick("mismatch-fraction", &o.MismatchFraction, *mismatch)
	pick("missing-fraction", &o.MissingFraction, *missing)
	pick("correction-fraction", &o.CorrectionFraction, *correction)
	o.Seed, o.Count, o.Rate, o.Keys = *seed, *count, *rate, *keys
	o.KeyPrefix = *keyPrefix
	o.RedeliveryDelay, o.OFDDelay, o.PartDelay = *redeliver, *ofdDelay, *partDelay

	var problems []error
	usage := func(format string, a ...any) { problems = append(problems, fmt.Errorf(format, a...)) }
	if *scenario == "" {
		usage("--scenario is required")
	}
	live := *start == "now"
	if live {
		o.Start = time.Now().UTC().Truncate(time.Millisecond)
	} else if t, err := time.Parse(time.RFC3339Nano, *start); err != nil {
		usage("--start %q is not RFC 3339 or now", *start)
	} else {
		o.Start = t
	}
	// With the same ids every run would repeat the last one's event_ids
	// with other payloads, and dedup would drop the new events as
	// redeliveries: only an explicit --seed asks for a repeat.
	switch *idNonce {
	case "auto", "random":
		if *idNonce == "random" || !set["seed"] {
			for o.IDNonce == 0 {
				o.IDNonce = rand.Uint64()
			}
		}
	default:
		n, err := strconv.ParseUint(*idNonce, 10, 64)
		if err != nil {
			usage("--id-nonce %q is not auto, random or a number", *idNonce)
		}
		o.IDNonce = n
	}
	if *firstKey == "now" {
		o.FirstKey = generate.FirstKeyAt(o.Start, o.Rate, o.Keys)
	} else if n, err := strconv.ParseInt(*firstKey, 10, 64); err != nil {
		usage("--first-key %q is not a number or now", *firstKey)
	} else {
		o.FirstKey = n
	}
	if d, err := generate.ParseDelayDist(*delayDist); err != nil {
		problems = append(problems, err)
	} else {
		o.Delay = d
	}
	if *poisonKinds != "all" {
		for _, k := range strings.Split(*poisonKinds, ",") {
			o.PoisonKinds = append(o.PoisonKinds, generate.PoisonKind(strings.TrimSpace(k)))
		}
	}
	if *noKafka && *out == "" {
		usage("--no-kafka needs --out: the records must go somewhere")
	}
	if *manifest != "" && *count == 0 {
		usage("--manifest needs a finite --count")
	}
	var paced bool
	switch *pace {
	case "auto":
		paced = live && (!*noKafka || *count == 0)
	case "on", "off":
		paced = *pace == "on"
	default:
		usage("--pace %q is not auto, on or off", *pace)
	}
	if len(problems) == 0 {
		if tg, err := generate.TargetFromConfig(cx.cfg, sc); err != nil {
			problems = append(problems, err)
		} else {
			o.Target = tg
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %w", errUsage, errors.Join(problems...))
	}
	g, err := generate.New(o)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}

	summary := generateSummary{Scenario: sc, Seed: o.Seed, IDNonce: o.IDNonce, FirstKey: o.FirstKey, Start: g.Options().Start.Format(generate.TimeLayout), Paced: paced}
	var rc *generate.Recorder
	if *manifest != "" {
		rc = generate.NewRecorder(g)
	}
	var sinks generate.Tee
	var jsonl *generate.JSONLSink
	var outFile *os.File
	summaryTo := cx.stdout
	if *out != "" {
		var w io.Writer = cx.stdout
		if *out == "-" {
			summaryTo = cx.stderr
		} else {
			f, err := os.Create(*out)
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
	if !*noKafka {
		wctx, cancel := context.WithTimeout(ctx, *wait)
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
		tctx, cancel := context.WithTimeout(ctx, *wait)
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
		if err := writeManifest(*manifest, rc.Manifest(summary.Complete, append([]string{"reckon", "generate"}, cx.args...))); err != nil {
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
			fmt.Fprintf(w, "generate: the brokers have acknowledged nothing for %s; %d records wait in the producer's buffer (retried until a broker answers)\n",
				time.Since(since).Round(time.Second), b)
		}
	}
}
