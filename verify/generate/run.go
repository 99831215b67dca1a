package generate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Sink receives records in order. Write may buffer; Flush waits until every
// record written so far is durable (acknowledged, on disk buffers flushed).
type Sink interface {
	Write(ctx context.Context, r Record) error
	Flush(ctx context.Context) error
}

// Clock paces Run. SystemClock is the wall clock; tests use a fake.
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx ends.
	Sleep(ctx context.Context, d time.Duration) error
}

// SystemClock is the real clock.
var SystemClock Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
func (systemClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// RunOptions tunes Run.
type RunOptions struct {
	// Clock paces the run: each record is released when the clock reaches
	// Epoch + (record arrival − Options.Start), so with Start = Epoch = now
	// the records' simulated arrivals (their Kafka timestamps) track the
	// wall clock and event times advance at Rate. Nil: as fast as possible.
	// Pacing only delays records; it never changes their content.
	Clock Clock
	// Epoch is the clock time that corresponds to Options.Start. Default:
	// the clock's time when Run starts (a replay at real speed). Live
	// traffic passes Options.Start, so time spent before Run (waiting for
	// brokers) is caught up rather than shifting every record late.
	Epoch time.Time
	// OnRecord, if set, sees every record before the sink does (the CLI
	// feeds a Recorder with it).
	OnRecord func(Record)
}

// Run writes g's records into sink until Count records are
// written (then it flushes and returns nil) or ctx ends (it returns the
// context's error without flushing; the caller decides).
func (g *Generator) Run(ctx context.Context, sink Sink, ro RunOptions) error {
	clockStart := ro.Epoch
	if ro.Clock != nil && clockStart.IsZero() {
		clockStart = ro.Clock.Now()
	}
	start := g.o.Start
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, ok := g.Next()
		if !ok {
			return sink.Flush(ctx)
		}
		if ro.Clock != nil {
			due := clockStart.Add(r.Arrival.Sub(start))
			if wait := due.Sub(ro.Clock.Now()); wait > time.Millisecond {
				if err := ro.Clock.Sleep(ctx, wait); err != nil {
					return err
				}
			}
		}
		if ro.OnRecord != nil {
			ro.OnRecord(r)
		}
		if err := sink.Write(ctx, r); err != nil {
			return err
		}
	}
}

// JSONLSink writes records as JSONL (see Record.AppendJSONL): records that
// are not JSON objects are skipped and counted in Skipped.
type JSONLSink struct {
	w       *bufio.Writer
	buf     []byte
	Lines   int64 // lines written
	Skipped int64 // records that are not JSON
}

// NewJSONLSink returns a sink writing to w.
func NewJSONLSink(w io.Writer) *JSONLSink {
	return &JSONLSink{w: bufio.NewWriterSize(w, 1<<16)}
}

// Write implements Sink.
func (s *JSONLSink) Write(_ context.Context, r Record) error {
	if !r.JSON {
		s.Skipped++
		return nil
	}
	s.buf = r.AppendJSONL(s.buf[:0])
	if _, err := s.w.Write(s.buf); err != nil {
		return fmt.Errorf("generate: jsonl: %w", err)
	}
	s.Lines++
	return nil
}

// Flush implements Sink.
func (s *JSONLSink) Flush(context.Context) error {
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("generate: jsonl: %w", err)
	}
	return nil
}

// Tee writes every record to each sink in turn.
type Tee []Sink

// Write implements Sink.
func (t Tee) Write(ctx context.Context, r Record) error {
	for _, s := range t {
		if err := s.Write(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// Flush implements Sink.
func (t Tee) Flush(ctx context.Context) error {
	var errs []error
	for _, s := range t {
		errs = append(errs, s.Flush(ctx))
	}
	return errors.Join(errs...)
}
