package devstack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/kafkaconn"
	"reckon/streaming/progress"
	"reckon/verify/generate"
)

// Background is clean payments traffic — on time, no late events,
// redeliveries, poison or clock skew — at a steady rate on keys of its own,
// produced from this process until Stop: traffic that keeps the stream's
// offsets and watermarks moving while a run's checks work, as in
// production (issue 24: the batch must finish under live traffic). Its
// manifest accounts exactly what it produced, so `reckon verify` checks it
// together with the run's generator (one --manifest each).
type Background struct {
	Manifest string // written by Stop
	Started  time.Time

	sent   atomic.Int64
	cancel context.CancelFunc
	done   chan error
	rc     *generate.Recorder
	cl     *kgo.Client
	sink   *generate.KafkaSink
	keys   string
	once   sync.Once
	err    error // Stop's
}

// StartBackground starts rate payments per second, paced on the wall
// clock from now, on keys prefixed with keyPrefix (which must differ from
// every other run's); its manifest goes to the run's dir as
// <keyPrefix>manifest.json.
func (s *Stack) StartBackground(ctx context.Context, rate float64, keyPrefix string, seed int64) (*Background, error) {
	o := generate.Options{Scenario: generate.Payments, Seed: seed, IDNonce: uint64(seed) | 1<<40, Rate: rate,
		KeyPrefix: keyPrefix, Start: time.Now().UTC().Truncate(time.Millisecond)}
	var err error
	if o.Target, err = generate.TargetFromConfig(s.Cfg, generate.Payments); err != nil {
		return nil, err
	}
	g, err := generate.New(o)
	if err != nil {
		return nil, err
	}
	cl, err := kafkaconn.NewClient(s.Cfg.Kafka, "generate-background", generate.ProducerOpts()...)
	if err != nil {
		return nil, err
	}
	b := &Background{Manifest: filepath.Join(s.Dir, keyPrefix+"manifest.json"), Started: time.Now(),
		done: make(chan error, 1), rc: generate.NewRecorder(g), cl: cl, keys: keyPrefix}
	b.sink = generate.NewKafkaSink(cl, func(r generate.Record, p int32, off int64) { b.rc.Acked(r.Seq, p, off) })
	bctx, cancel := context.WithCancel(ctx)
	b.cancel = cancel
	go func() {
		b.done <- g.Run(bctx, keepSink{b.sink}, generate.RunOptions{Clock: generate.SystemClock, Epoch: o.Start,
			OnRecord: func(r generate.Record) { b.rc.Add(r); b.sent.Add(1) }})
	}()
	return b, nil
}

// keepSink hands every record to the producer whether or not the run was
// stopped meanwhile: a record the recorder counted is produced (Stop
// flushes it), never cancelled with the run, so the manifest is exact.
type keepSink struct{ *generate.KafkaSink }

func (k keepSink) Write(ctx context.Context, r generate.Record) error {
	return k.KafkaSink.Write(context.WithoutCancel(ctx), r)
}

// Sent is how many records the traffic has produced so far.
func (b *Background) Sent() int64 { return b.sent.Load() }

// Keys is the traffic's key prefix.
func (b *Background) Keys() string { return b.keys }

// Stop ends the traffic, waits up to 30 seconds for the brokers to
// acknowledge every record it produced, and writes its manifest, complete
// when every record was acknowledged. It fails when the traffic had
// failed or a record was not acknowledged. Later calls return the first's
// result.
func (b *Background) Stop() error {
	b.once.Do(func() { b.err = b.stop() })
	return b.err
}

func (b *Background) stop() error {
	b.cancel()
	runErr := <-b.done
	if errors.Is(runErr, context.Canceled) {
		runErr = nil
	}
	fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	flushErr := b.sink.Flush(fctx)
	cancel()
	b.cl.Close()
	sent, acked := b.Sent(), b.sink.Acknowledged()
	var ackErr error
	if acked != sent {
		ackErr = fmt.Errorf("background traffic: %d of %d records acknowledged", acked, sent)
	}
	f, err := os.Create(b.Manifest)
	if err == nil {
		_, err = b.rc.Manifest(ackErr == nil && flushErr == nil, []string{"devstack", "background"}).WriteTo(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	return errors.Join(runErr, flushErr, ackErr, err)
}

// WaitPurgedThrough waits until the stream's published progress
// (docs/adr/0015-stream-progress.md) on every non-empty partition of its
// raw topic has purged through end — from then on a reconciliation of the
// day in progress checks every window ending by end — or until timeout.
// It returns the partitions' purged-through points as a line, and on
// timeout an error saying which partition is behind.
func (s *Stack) WaitPurgedThrough(ctx context.Context, stream string, end time.Time, timeout time.Duration) (string, error) {
	st, ok := s.Cfg.StreamByName(stream)
	if !ok {
		return "", fmt.Errorf("no stream %s in the configuration", stream)
	}
	opts, err := kafkaconn.Options(s.Cfg.Kafka, "chaos-progress")
	if err != nil {
		return "", err
	}
	view, err := progress.NewView(progress.Options{Topic: s.Cfg.Topics.StreamProgress, Kafka: opts}, slog.New(slog.DiscardHandler))
	if err != nil {
		return "", err
	}
	defer view.Close()
	adm, closeAdm, err := kafkaconn.NewAdmin(s.Cfg.Kafka, "chaos-progress")
	if err != nil {
		return "", err
	}
	defer closeAdm()
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := "nothing read yet"
	for {
		line, behind, err := purgedThrough(wctx, view, adm, st.Name, st.Topic, end)
		switch {
		case err == nil && behind == "":
			return line, nil
		case err != nil:
			last = err.Error()
		default:
			last = behind
		}
		select {
		case <-wctx.Done():
			return line, fmt.Errorf("%s not purged through %s after %v: %s", stream, end.UTC().Format(time.TimeOnly), timeout, last)
		case <-time.After(time.Second):
		}
	}
}

// purgedThrough reads every non-empty partition's latest progress once:
// the points as a line, and the first partition behind end ("" if none).
func purgedThrough(ctx context.Context, view *progress.View, adm *kadm.Client, stream, topic string, end time.Time) (
	line, behind string, err error) {
	if err := view.Sync(ctx); err != nil {
		return "", "", err
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return "", "", err
	}
	var parts []kadm.ListedOffset
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			parts = append(parts, o)
		}
	})
	slices.SortFunc(parts, func(a, b kadm.ListedOffset) int { return cmp.Compare(a.Partition, b.Partition) })
	for _, o := range parts {
		pr, ok := view.Get(stream, topic, o.Partition)
		at := "no progress"
		if ok {
			at = pr.PurgedThrough.UTC().Format(time.TimeOnly)
		}
		line += fmt.Sprintf(" %s/%d %s", topic, o.Partition, at)
		if (!ok || pr.PurgedThrough.Before(end)) && behind == "" {
			behind = fmt.Sprintf("%s/%d purged through %s", topic, o.Partition, at)
		}
	}
	return line, behind, nil
}
