package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"reckon/activities"
	"reckon/internal/config"
	"reckon/internal/kafkaconn"
	"reckon/lake"
	"reckon/verify/generate"
	"reckon/workflows"
	"reckon/zreport"
	"reckon/zreport/bridge"
	"reckon/zreport/ofd"
	"reckon/zreport/ofdsim"
)

// zreportBatch registers the Z-report workflows/activities on w and returns
// the bridge loop to run in `reckon batch`.
func zreportBatch(cfg *config.Config, c client.Client, w worker.Worker) (
	runBridge func(ctx context.Context) error, closeFn func(), err error,
) {
	if err := validateZReport(cfg); err != nil {
		return nil, nil, err
	}
	lk, err := openConfiguredLake(cfg, "")
	if err != nil {
		return nil, nil, err
	}
	return zreportBatchOn(cfg, c, w, lk)
}

// zreportBatchOn is zreportBatch on the lake lk: the batch worker's one
// lake, whose storage retries its /metrics count.
func zreportBatchOn(cfg *config.Config, c client.Client, w worker.Worker, lk *lake.Lake) (
	runBridge func(ctx context.Context) error, closeFn func(), err error,
) {
	if err := validateZReport(cfg); err != nil {
		return nil, nil, err
	}
	bopts, err := kafkaconn.Options(cfg.Kafka, "zreport-bridge")
	if err != nil {
		return nil, nil, err
	}
	prod, err := kafkaconn.NewClient(cfg.Kafka, "zreport", kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		return nil, nil, fmt.Errorf("zreport: kafka producer: %w", err)
	}
	registerZReport(w, zreportActivities(cfg, prod, lk))
	br, err := bridge.New(bopts, c, bridgeOptions(cfg, slog.Default()))
	if err != nil {
		prod.Close()
		return nil, nil, err
	}
	return br.Run, func() {
		closeWithin(bridgeCloseWait, br.Close, func() {
			slog.Info("zreport bridge: leaving its group did not finish (a group join was in flight); stopping anyway, the "+
				"broker drops the member after its session timeout", "waited", bridgeCloseWait)
		})
		prod.Close()
	}, nil
}

// bridgeCloseWait bounds the bridge's close on stop. Closing a consumer
// waits for a group join in flight, which the broker may hold until an
// earlier member's session expires (after a kill -9: 45 s).
const bridgeCloseWait = 3 * time.Second

// closeWithin runs closeFn, returning after at most d (then calling
// late): the process is stopping, so a close left running ends with it.
func closeWithin(d time.Duration, closeFn, late func()) {
	done := make(chan struct{})
	go func() { defer close(done); closeFn() }()
	select {
	case <-done:
	case <-time.After(d):
		late()
	}
}

// registerZReport registers the entity workflow and its activities.
func registerZReport(w worker.Registry, a *activities.ZReport) {
	w.RegisterWorkflowWithOptions(workflows.ZReport, workflow.RegisterOptions{Name: workflows.ZReportWorkflow})
	w.RegisterActivity(a)
}

func zreportActivities(cfg *config.Config, prod activities.Producer, lk *lake.Lake) *activities.ZReport {
	return &activities.ZReport{
		Producer:        prod,
		CompleteTopic:   cfg.Topics.ZReportComplete,
		IncompleteTopic: cfg.Topics.ZReportIncomplete,
		Lake:            lk,
		OFDURL:          cfg.ZReport.OFDURL,
		HTTP:            &http.Client{Timeout: cfg.ZReport.OFDTimeout},
	}
}

// zreportPolicy is the entity timing of cfg.
func zreportPolicy(cfg *config.Config) zreport.Policy {
	z := cfg.ZReport
	return zreport.Policy{OFDRequestAfter: z.OFDRequestAfter, OFDRetry: z.OFDRetry, Retention: z.Retention,
		Linger: z.Linger}.WithDefaults()
}

func bridgeOptions(cfg *config.Config, log *slog.Logger) bridge.Options {
	z := cfg.ZReport
	instance := z.BridgeInstance
	if z.BridgeMembership == "dynamic" {
		instance = ""
	}
	return bridge.Options{
		Topic: cfg.Topics.ZReportParts, Group: z.BridgeGroup, InstanceID: instance, DLQTopic: cfg.Topics.DLQ,
		TaskQueue: cfg.Temporal.TaskQueue,
		Gate:      cfg.Gate,
		Start: workflows.ZReportInput{
			Policy:       zreportPolicy(cfg),
			OFD:          workflows.ZReportOFDOptions{Timeout: z.OFDTimeout, Attempts: z.OFDAttempts, Backoff: z.OFDBackoff},
			HistoryLimit: z.HistoryLimit,
		},
		Concurrency:     z.BridgeConcurrency,
		Linger:          z.BridgeLinger,
		RedriveInterval: z.BridgeRedriveInterval,
		MaxAttempts:     cfg.Stream.MaxAttempts,
		Log:             log,
	}
}

// validateZReport checks the zreport section beyond what config.Validate
// does, reporting every problem at once.
func validateZReport(cfg *config.Config) error {
	z := cfg.ZReport
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("config: zreport."+format, a...)) }
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"ofd_request_after", z.OFDRequestAfter}, {"retention", z.Retention}, {"ofd_retry", z.OFDRetry}, {"ofd_timeout", z.OFDTimeout}, {"ofd_backoff", z.OFDBackoff}, {"linger", z.Linger}, {"bridge_linger", z.BridgeLinger}, {"bridge_redrive_interval", z.BridgeRedriveInterval}, {"ofd_sim_delay", z.OFDSimDelay}} {
		if d.v < 0 {
			bad("%s: must not be negative", d.name)
		}
	}
	if z.OFDRequestAfter >= z.Retention {
		bad("ofd_request_after (%v) must be less than retention (%v)", z.OFDRequestAfter, z.Retention)
	}
	if u, err := url.Parse(z.OFDURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("ofd_url: %q is not an http(s) URL", z.OFDURL)
	}
	if z.OFDAttempts < 1 {
		bad("ofd_attempts: must be at least 1")
	}
	if z.HistoryLimit < 100 {
		bad("history_limit: %d is below 100", z.HistoryLimit)
	}
	if z.BridgeConcurrency < 1 {
		bad("bridge_concurrency: must be at least 1")
	}
	if z.BridgeLinger > bridge.MaxLinger {
		bad("bridge_linger: %v is over %v", z.BridgeLinger, bridge.MaxLinger)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"ofd_sim_missing_fraction", z.OFDSimMissingFraction}, {"ofd_sim_failure_fraction", z.OFDSimFailureFraction}} {
		if !(f.v >= 0 && f.v <= 1) {
			bad("%s: %v is not in [0, 1]", f.name, f.v)
		}
	}
	if z.OFDSimGeneratorKeys < 1 {
		bad("ofd_sim_generator_keys: must be at least 1")
	}
	return errors.Join(errs...)
}

// ofdSimulator returns the simulated OFD operator server for `reckon dev` (listening on the host:port of
// cfg.ZReport.OFDURL).
func ofdSimulator(cfg *config.Config) (*http.Server, error) {
	srv, _, err := newOFDSimulator(cfg)
	return srv, err
}

// newOFDSimulator also returns the simulator, for its statistics.
func newOFDSimulator(cfg *config.Config) (*http.Server, *ofdsim.Server, error) {
	if err := validateZReport(cfg); err != nil {
		return nil, nil, err
	}
	z := cfg.ZReport
	addr := z.OFDSimAddr
	if addr == "" {
		u, err := url.Parse(z.OFDURL)
		if err != nil {
			return nil, nil, fmt.Errorf("zreport: ofd_url: %w", err)
		}
		addr = u.Host
		if u.Port() == "" {
			addr = net.JoinHostPort(u.Hostname(), map[bool]string{true: "443", false: "80"}[u.Scheme == "https"])
		}
	}
	var chain ofdsim.Chain
	if z.OFDSimDocuments != "" {
		f, err := os.Open(z.OFDSimDocuments)
		if err != nil {
			return nil, nil, fmt.Errorf("zreport: ofd_sim_documents: %w", err)
		}
		defer f.Close()
		st := ofdsim.NewStore()
		if _, _, err := st.LoadJSONL(f); err != nil {
			return nil, nil, err
		}
		chain = append(chain, st)
	}
	gen, err := generatorDocuments(z.OFDSimGeneratorSeed, z.OFDSimGeneratorKeys)
	if err != nil {
		return nil, nil, err
	}
	chain = append(chain, gen)
	sim, err := ofdsim.New(ofdsim.Options{
		Documents: chain, Delay: z.OFDSimDelay,
		MissingFraction: z.OFDSimMissingFraction, FailureFraction: z.OFDSimFailureFraction,
	})
	if err != nil {
		return nil, nil, err
	}
	return &http.Server{Addr: addr, Handler: sim.Handler(), ReadHeaderTimeout: 10 * time.Second}, sim, nil
}

// generatorDocuments answers as the operator of `reckon generate --scenario
// fiscal --seed seed --keys keys`: a key's figures depend only on the seed,
// the key count and the key itself, not on the run's start time, so the
// simulator needs no coordination with the generator process. (The close
// time it reports assumes a start of 2026-01-01; the workflow takes its
// deadlines from the parts, not from the operator's document.)
func generatorDocuments(seed int64, keys int) (ofdsim.Documents, error) {
	g, err := generate.New(generate.Options{
		Scenario: generate.Fiscal, Seed: seed, Keys: keys,
		Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
	})
	if err != nil {
		return nil, fmt.Errorf("zreport: ofd simulator generator: %w", err)
	}
	return ofdsim.DocumentsFunc(func(k zreport.Key) (ofd.Document, bool) {
		p, ok := g.OFDDocument(k.FiscalDrive, int(k.Shift))
		if !ok {
			return ofd.Document{}, false
		}
		return ofd.Document{
			FiscalDrive: p.FiscalDrive, Shift: int64(p.Shift), Receipts: int64(p.Receipts),
			Total: p.Total(), ShiftClosedAt: p.ClosedAt,
		}, true
	}), nil
}
