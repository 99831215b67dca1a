package workers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"reckon/streaming"
	"reckon/verify/generate"
	"reckon/verify/lakecheck"
	"reckon/verify/ledger"
)

// errNotConserved, errNotTruthful and errEarlyOnTime make `reckon verify`
// exit non-zero; the ledger is printed first.
var (
	errNotConserved = errors.New("not conserved: produced ≠ accepted + late + dead-lettered + duplicates")
	errNotTruthful  = errors.New("not truthful: some closed window's final version differs from the truth")
	errEarlyOnTime  = errors.New("not timely: an on_time pane was emitted before its window end + out_of_orderness")
)

// runVerify is `reckon verify --manifest F [--manifest G…] [--stream S] [--truth] [--lake]`:
// the conservation check (docs/requirements.md R-PROOF-1, R-PROOF-2). It
// reads the generator's manifest, the
// summaries, late and DLQ topics (read_committed) and the stream's
// committed operator state, prints the ledger and fails when a record is
// lost or counted twice, or, with --truth, when a closed window's highest
// version (stream pane or batch correction) is not the truth. Runs side by
// side on the same topic (each on keys of its own, generate --key-prefix)
// are checked together: one --manifest each (generate.Merge).
func runVerify(ctx context.Context, cx *cmdContext) error {
	var manifests stringList
	cx.fs.Var(&manifests, "manifest", "the generator's manifest (reckon generate --manifest F) (required; "+
		"repeatable: runs side by side on keys of their own, checked together)")
	stream := cx.fs.String("stream", "",
		"stream to check (default: the manifest's stream, else the stream reading its topic)")
	truth := cx.fs.Bool("truth", false,
		"also fail when a closed window's final version differs from the truth (run after reconcile)")
	timeout := cx.fs.Duration("timeout", 2*time.Minute, "give up reading the topics after this long")
	lakeCheck := cx.fs.Bool("lake", false,
		"also fail unless every archived record of the manifest is held exactly once in the lake's raw, rejected or "+
			"raw_dropped table")
	featuresCheck := cx.fs.Bool("features", false, "also fail unless every committed record of the features topic is "+
		"in the lake's features table exactly once (waiting for the features archive up to --timeout) and the curated "+
		"features table agrees with it")
	if err := cx.parse(); err != nil {
		return err
	}
	if len(manifests) == 0 {
		return fmt.Errorf("%w: --manifest is required", errUsage)
	}
	var runs []*generate.Manifest
	for _, path := range manifests {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		m, err := generate.ReadManifest(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if !m.Complete {
			fmt.Fprintf(cx.stdout, "warning: %s says the run stopped before --count; only acknowledged records are listed\n",
				path)
		}
		runs = append(runs, m)
	}
	m, err := generate.Merge(runs...)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	name := *stream
	if name == "" {
		name = m.Options.Stream
	}
	if name == "" {
		for _, s := range cx.cfg.Streams {
			if s.Topic == m.Topic {
				name = s.Name
				break
			}
		}
	}
	s, ok := cx.cfg.StreamByName(name)
	if !ok {
		return fmt.Errorf("%w: no stream %q in the configuration (manifest topic %q)", errUsage, name, m.Topic)
	}
	if s.Topic != m.Topic {
		return fmt.Errorf("%w: stream %s reads %s, the manifest's records went to %s", errUsage, s.Name, s.Topic, m.Topic)
	}
	rctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	out, err := streaming.CollectOutputs(rctx, cx.cfg, s)
	if err != nil {
		return err
	}
	l := ledger.Compute(m, s.Name, ledger.Outputs(out))
	l.Print(cx.stdout)
	if !l.Conserved() {
		return errNotConserved
	}
	if !l.Timely() {
		return errEarlyOnTime
	}
	if *truth && !l.Truthful() {
		return errNotTruthful
	}
	if *lakeCheck {
		lk, err := openConfiguredLake(cx.cfg, "")
		if err != nil {
			return err
		}
		acc, err := lakecheck.Check(rctx, lk, m)
		if err != nil {
			return err
		}
		acc.Print(cx.stdout, m.Topic)
		if !acc.Exact() {
			return lakecheck.ErrNotAccounted
		}
	}
	if *featuresCheck {
		lk, err := openConfiguredLake(cx.cfg, "")
		if err != nil {
			return err
		}
		acc, err := verifyFeatures(rctx, cx.cfg, lk)
		if err != nil {
			return err
		}
		acc.print(cx.stdout, cx.cfg.Topics.Features)
		if !acc.ok() {
			return errFeaturesNotArchived
		}
	}
	verdict := "conserved, on time"
	if *truth {
		verdict += " and truthful"
	}
	if *lakeCheck {
		verdict += ", every archived offset once in the lake"
	}
	if *featuresCheck {
		verdict += ", every served feature once in the lake"
	}
	fmt.Fprintf(cx.stdout, "verify %s: %s\n", s.Name, verdict)
	return nil
}
