package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"reckon/internal/event"
	"reckon/internal/kafkaconn"
	"reckon/workflows"
	"reckon/zreport"
)

// Linger bounds.
const (
	// DefaultLinger is Options.Linger's default: a few hundred
	// milliseconds, the latency a part may gain waiting for its key's
	// next parts.
	DefaultLinger = 250 * time.Millisecond
	// MaxLinger bounds Options.Linger: parts are not held for long.
	MaxLinger = 5 * time.Second
)

// Options configure a Bridge. Zero values mean defaults where stated.
type Options struct {
	// Topic is the parts topic. Required.
	Topic string
	// Group is the consumer group. Required.
	Group string
	// InstanceID makes the bridge a static member of Group by that name
	// (KIP-345): a bridge restarted after a crash takes its partitions back
	// at once instead of waiting out its predecessor's session (45 s), and
	// a clean stop does not leave the group. It must be unique among the
	// group's members and stable across restarts. Default "": a dynamic
	// member (docs/adr/0016-static-group-membership.md).
	InstanceID string
	// DLQTopic receives rejected records; its max.message.bytes is
	// kafkaconn.MaxRecordBytes (deploy/topics.yaml), the size dead letters
	// are cut to. Required.
	DLQTopic string
	// TaskQueue of the Z-report workflows. Required.
	TaskQueue string
	// Gate validates envelopes (gate rules for zreport.ofd.received,
	// zreport.dwh.computed and zreport.rms.computed).
	Gate event.GateOptions
	// Start is the template of every entity's input: policy, operator
	// request options, history limit. Key, ClosedHint and State are set
	// per part.
	Start workflows.ZReportInput
	// Concurrency is how many signals are in flight. Default 16.
	Concurrency int
	// MaxPollRecords per batch. Default 1000.
	MaxPollRecords int
	// Linger: after a poll returned fewer than MaxPollRecords records,
	// keep polling this long for more before signalling, so parts of a key
	// that arrive close together go in one signal. Default 250ms; at most
	// MaxLinger. A backlog fills a poll at once and never lingers.
	Linger time.Duration
	// MaxBatchParts is how many parts of one key one signal carries at
	// most (the payload stays far below Temporal's 2 MB limit). Default 100.
	MaxBatchParts int
	// MaxAttempts for a signal Temporal rejects as invalid (InvalidArgument)
	// before the part goes to the DLQ (stage "process"). Unavailable and
	// other transient errors are retried until the context ends. Default 3.
	MaxAttempts int
	// RedriveInterval: every this long, Run sweeps for entity runs that
	// ended without finalizing and re-drives their parts (Sweep;
	// docs/adr/0037-zreport-parts-recoverable.md). Zero: no sweeps (the
	// workers set zreport.bridge_redrive_interval, default 1m).
	RedriveInterval time.Duration
	// RedriveLookback: how far back a bridge's first sweep looks. Default
	// DefaultRedriveLookback.
	RedriveLookback time.Duration
	// MaxRedrives: a key whose re-driven run ends without finalizing again
	// is re-driven at most this many times in a row, then logged and left
	// to an operator (its failed run stays visible). Default 3.
	MaxRedrives int
	// Now is the clock for dead-letter times and sweeps. Default time.Now.
	Now func() time.Time
	// Log receives progress and errors. Default slog.Default().
	Log *slog.Logger
}

func (o *Options) fillDefaults() {
	if o.Concurrency <= 0 {
		o.Concurrency = 16
	}
	if o.MaxPollRecords <= 0 {
		o.MaxPollRecords = 1000
	}
	if o.Linger <= 0 {
		o.Linger = DefaultLinger
	}
	if o.MaxBatchParts <= 0 {
		o.MaxBatchParts = 100
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 3
	}
	if o.RedriveLookback <= 0 {
		o.RedriveLookback = DefaultRedriveLookback
	}
	if o.MaxRedrives <= 0 {
		o.MaxRedrives = DefaultMaxRedrives
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
}

// Validate reports every problem at once.
func (o Options) Validate() error {
	var errs []error
	for _, f := range []struct{ name, v string }{{"topic", o.Topic}, {"group", o.Group}, {"dlq topic", o.DLQTopic},
		{"task queue", o.TaskQueue}} {
		if f.v == "" {
			errs = append(errs, fmt.Errorf("zreport bridge: %s is required", f.name))
		}
	}
	if o.Linger > MaxLinger {
		errs = append(errs, fmt.Errorf("zreport bridge: linger %v is over %v", o.Linger, MaxLinger))
	}
	if err := o.Start.Policy.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Stats are the bridge's counters since it started: records polled, parts
// signalled, signal-with-start calls Temporal accepted (Signalled/Calls
// parts per call), dead letters, retried calls, commits, failed entity
// runs re-driven.
type Stats struct {
	Records, Signalled, Calls, DeadLettered, Retries, Commits, Redriven int64
}

// Bridge consumes the parts topic. Run it once; Close releases the client.
type Bridge struct {
	o    Options
	cl   *kgo.Client
	tc   client.Client
	gate *event.Gate

	records, signalled, calls, dead, retries, commits, redriven atomic.Int64

	sweepMu sync.Mutex // one sweep at a time; protects sw
	sw      sweeper
}

// New returns a bridge. kopts are the base client options (brokers, client
// id); the bridge adds the consumer group settings. tc is the Temporal
// client; the bridge does not close it.
func New(kopts []kgo.Opt, tc client.Client, o Options) (*Bridge, error) {
	o.fillDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	g, err := event.NewGate(o.Gate)
	if err != nil {
		return nil, fmt.Errorf("zreport bridge: %w", err)
	}
	opts := append([]kgo.Opt{}, kopts...)
	opts = append(opts,
		kgo.ConsumerGroup(o.Group),
		kgo.ConsumeTopics(o.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
	)
	if o.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(o.InstanceID))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("zreport bridge: kafka client: %w", err)
	}
	return &Bridge{o: o, cl: cl, tc: tc, gate: g}, nil
}

// Close closes the Kafka client. A dynamic member leaves the group; a
// static one (Options.InstanceID) keeps its place for its restart, and its
// partitions move to the other members after the session timeout.
func (b *Bridge) Close() { b.cl.Close() }

// Stats returns the counters.
func (b *Bridge) Stats() Stats {
	return Stats{
		b.records.Load(), b.signalled.Load(), b.calls.Load(), b.dead.Load(), b.retries.Load(), b.commits.Load(),
		b.redriven.Load(),
	}
}

// job is one valid part to signal.
type job struct {
	rec  *kgo.Record
	part zreport.Part
}

// Run consumes until ctx ends; it returns nil on cancellation. Each polled
// batch (with what the linger added) is fully handed over (signals
// accepted, dead letters acknowledged) before its offsets are committed and
// the next batch is polled. With Options.RedriveInterval set, it sweeps
// for failed entity runs beside (Sweep).
func (b *Bridge) Run(ctx context.Context) error {
	log := b.o.Log
	if b.o.RedriveInterval > 0 {
		sctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); b.sweepEvery(sctx) }()
		defer func() { stop(); <-done }()
	}
	for {
		fs := b.cl.PollRecords(ctx, b.o.MaxPollRecords)
		if fs.IsClientClosed() || ctx.Err() != nil {
			b.cl.AllowRebalance()
			return nil
		}
		fs.EachError(func(t string, p int32, err error) {
			log.Warn("zreport bridge: fetch error", "topic", t, "partition", p, "error", err)
		})
		recs := fs.Records()
		if len(recs) == 0 {
			b.cl.AllowRebalance()
			continue
		}
		recs = b.linger(ctx, recs)
		if ctx.Err() != nil {
			b.cl.AllowRebalance()
			return nil
		}
		if err := b.handle(ctx, recs); err != nil {
			b.cl.AllowRebalance()
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := b.cl.CommitRecords(ctx, recs...); err != nil {
			// Not fatal: the records are redelivered and deduplicated.
			log.Warn("zreport bridge: commit failed", "error", err)
		} else {
			b.commits.Add(1)
		}
		b.cl.AllowRebalance()
	}
}

// linger polls for up to Options.Linger after a short poll, adding what
// arrives (up to MaxPollRecords in all) to recs. Records a poll leaves
// behind stay buffered for the next one.
func (b *Bridge) linger(ctx context.Context, recs []*kgo.Record) []*kgo.Record {
	if len(recs) >= b.o.MaxPollRecords {
		return recs
	}
	lctx, cancel := context.WithTimeout(ctx, b.o.Linger)
	defer cancel()
	for len(recs) < b.o.MaxPollRecords && lctx.Err() == nil {
		fs := b.cl.PollRecords(lctx, b.o.MaxPollRecords-len(recs))
		if fs.IsClientClosed() {
			break
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				b.o.Log.Warn("zreport bridge: fetch error", "topic", t, "partition", p, "error", err)
			}
		})
		recs = append(recs, fs.Records()...)
	}
	return recs
}

// handle checks, dead-letters and signals one batch. The parts of one key
// go in signals of up to MaxBatchParts parts each, in the batch's order,
// one after another; Concurrency goroutines take the keys in turn, so a
// slow key holds up only itself.
func (b *Bridge) handle(ctx context.Context, recs []*kgo.Record) error {
	var keys [][][]job          // per key: its signals, each up to MaxBatchParts parts
	at := map[zreport.Key]int{} // a key's index in keys
	var dead []*kgo.Record
	now := b.o.Now()
	for _, r := range recs {
		b.records.Add(1)
		env, res := b.gate.Check(r.Value, r.Timestamp)
		if !res.Valid {
			dead = append(dead, b.deadLetter(r, event.NewDeadLetter(res, r.Topic, r.Partition, r.Offset, r.Timestamp, now)))
			continue
		}
		p, err := zreport.PartOf(env.EventID, env.EventType, env.OccurredAt, env)
		if err != nil {
			dead = append(dead, b.deadLetter(r, partDeadLetter(err, now)))
			continue
		}
		p.ArrivedAt = r.Timestamp.UTC()
		p.Origin = r.Topic + "/" + strconv.Itoa(int(r.Partition)) + "/" + strconv.FormatInt(r.Offset, 10)
		i, ok := at[p.Key]
		if !ok {
			i = len(keys)
			at[p.Key] = i
			keys = append(keys, nil)
		}
		if n := len(keys[i]); n > 0 && len(keys[i][n-1]) < b.o.MaxBatchParts {
			keys[i][n-1] = append(keys[i][n-1], job{r, p})
		} else {
			keys[i] = append(keys[i], []job{{r, p}})
		}
	}
	var wg sync.WaitGroup
	var next atomic.Int64
	var mu sync.Mutex // protects dead and firstErr below
	var firstErr error
	for range min(b.o.Concurrency, len(keys)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(keys) {
					return
				}
				for _, js := range keys[i] {
					dls, err := b.signal(ctx, js)
					mu.Lock()
					dead = append(dead, dls...)
					if err != nil && firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					if err != nil {
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return b.produceDead(ctx, dead)
}

// signal delivers the parts of one key in one signal-with-start
// (ZReportSignalParts), retrying transient failures until ctx ends. A
// batch Temporal keeps rejecting as invalid is sent again part by part, so
// that only the parts it rejects alone become dead letters.
func (b *Bridge) signal(ctx context.Context, js []job) ([]*kgo.Record, error) {
	first := js[0].part
	k := first.Key
	in := b.o.Start
	in.Key, in.ClosedHint, in.State = k, first.ShiftClosedAt, nil
	opts := b.startOptions(k, first.ShiftClosedAt)
	parts := make([]zreport.Part, len(js))
	for i, j := range js {
		parts[i] = j.part
	}
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		_, err := b.tc.SignalWithStartWorkflow(ctx, opts.ID, workflows.ZReportSignalParts, parts, opts,
			workflows.ZReportWorkflow, in)
		if err == nil {
			b.signalled.Add(int64(len(parts)))
			b.calls.Add(1)
			return nil, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var inv *serviceerror.InvalidArgument
		if errors.As(err, &inv) && attempt >= b.o.MaxAttempts {
			if len(js) > 1 {
				var dead []*kgo.Record
				for i := range js {
					dl, err := b.signal(ctx, js[i:i+1])
					dead = append(dead, dl...)
					if err != nil {
						return dead, err
					}
				}
				return dead, nil
			}
			return []*kgo.Record{b.deadLetter(js[0].rec, event.DeadLetter{
				Reason: "temporal: " + inv.Error(), Reasons: []string{"temporal: " + inv.Error()},
				DeadAt: b.o.Now(), Attempts: attempt, Stage: "process",
			})}, nil
		}
		b.retries.Add(1)
		b.o.Log.Warn("zreport bridge: signal-with-start failed; retrying", "workflow_id", opts.ID, "parts", len(parts),
			"attempt", attempt, "error", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// partDeadLetter describes a record the gate passed but that is not a
// usable Z-report part.
func partDeadLetter(err error, now time.Time) event.DeadLetter {
	reasons := strings.Split(err.Error(), "\n")
	for i, s := range reasons {
		reasons[i] = strings.TrimPrefix(s, zreport.ErrInvalidPart.Error()+": ")
	}
	return event.DeadLetter{
		Reason: reasons[0], Reasons: reasons, Fields: []string{"data"}, DeadAt: now, Attempts: 1, Stage: "gate",
	}
}

// deadLetter builds the DLQ record (event.DeadLetter.Record): original key
// and bytes, reason headers, then the part's own headers; cut to the DLQ
// topic's record limit, kafkaconn.MaxRecordBytes (deploy/topics.yaml), as a
// dead letter the broker refuses would be retried until the context ends.
func (b *Bridge) deadLetter(r *kgo.Record, d event.DeadLetter) *kgo.Record {
	src := event.SourceRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp, Key: r.Key,
		Value: r.Value}
	if len(r.Headers) > 0 {
		src.Headers = make([]event.Header, len(r.Headers))
		for i, h := range r.Headers {
			src.Headers[i] = event.Header{Key: h.Key, Value: h.Value}
		}
	}
	dl := d.Record(src, kafkaconn.MaxRecordBytes)
	out := &kgo.Record{Topic: b.o.DLQTopic, Key: dl.Key, Value: dl.Value,
		Headers: make([]kgo.RecordHeader, len(dl.Headers))}
	for i, h := range dl.Headers {
		out.Headers[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
	}
	return out
}

// produceDead writes dead letters, retrying until acknowledged or ctx ends.
func (b *Bridge) produceDead(ctx context.Context, dead []*kgo.Record) error {
	if len(dead) == 0 {
		return nil
	}
	backoff := 100 * time.Millisecond
	for {
		err := b.cl.ProduceSync(ctx, dead...).FirstErr()
		if err == nil {
			b.dead.Add(int64(len(dead)))
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		b.o.Log.Warn("zreport bridge: dead-letter produce failed; retrying", "error", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}
