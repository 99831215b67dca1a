package storage

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Bounded retries of transient storage failures
// (docs/adr/0022-lake-fault-injection.md, amendment of 2026-12-01): one S3
// 503, reset connection or short read must not fail a whole activity
// attempt that made hundreds of storage calls. The retry store wraps the
// lake's storage outside the fault injector, so injected faults are
// retried like real ones. It retries every operation whose repetition is
// harmless: reads (open, ranged reads, whole-file reads, listings, walks),
// remove (a missing file is not an error), put (it replaces the whole file
// from its write func, which every lake caller can run twice: see put),
// the compaction lock (which recognises its own taker, see lockAs) and
// removeStale. It never retries a permanent failure (IsPermanent), the
// caller's ctx being done, a missing file (fs.ErrNotExist), a corrupt file
// (ErrBadFile), a bad name, a lock another holds, or an error of the
// caller's own code (a put's write func, a walk's fn).

// RetryOptions bounds the lake's retries of transient storage failures.
// The zero value of each field means its default.
type RetryOptions struct {
	// MaxAttempts is the most calls one storage operation makes, the
	// first included. Default 6; 1 turns retries off.
	MaxAttempts int
	// InitialBackoff is the wait before the first retry; each later wait
	// doubles up to MaxBackoff. A wait is drawn between half of it and
	// all of it (jitter), so retries of many callers spread out.
	// Default 25ms.
	InitialBackoff time.Duration
	// MaxBackoff bounds one wait. Default 1s.
	MaxBackoff time.Duration
	// MaxElapsed bounds the time one operation spends retrying: no retry
	// starts whose wait would end later than this after the first call.
	// Default 10s.
	MaxElapsed time.Duration
}

// Validate reports every problem with o at once.
func (o RetryOptions) Validate() error {
	var errs []error
	if o.MaxAttempts < 0 {
		errs = append(errs, fmt.Errorf("lake: options: Retry.MaxAttempts %d is negative", o.MaxAttempts))
	}
	if o.InitialBackoff < 0 || o.MaxBackoff < 0 || o.MaxElapsed < 0 {
		errs = append(errs, errors.New("lake: options: Retry.InitialBackoff, MaxBackoff and MaxElapsed must not be negative"))
	}
	return errors.Join(errs...)
}

func (o *RetryOptions) fillDefaults() {
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 6
	}
	if o.InitialBackoff == 0 {
		o.InitialBackoff = 25 * time.Millisecond
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = time.Second
	}
	if o.MaxElapsed == 0 {
		o.MaxElapsed = 10 * time.Second
	}
}

// OpStats counts the retries of one storage operation (an Op name: put,
// open, read, read_file, list, walk, remove, lock, remove_stale) through
// one Retry since it was made.
type OpStats struct {
	Op string
	// Retries is how many calls were made again after a transient failure.
	Retries int64
	// Recovered is how many operations succeeded after at least one retry.
	Recovered int64
	// GaveUp is how many operations failed for good after retrying: their
	// attempts or their time ran out. Each such failure reached the caller
	// (and fails its activity attempt).
	GaveUp int64
}

type opCounters struct {
	retries, recovered, gaveUp atomic.Int64
}

// Stats returns s's retry counters of every storage operation, in Ops
// order, for metrics. Safe for concurrent use.
func (s *Retry) Stats() []OpStats {
	out := make([]OpStats, len(Ops))
	for i, op := range Ops {
		c := &s.counters[i]
		out[i] = OpStats{Op: string(op), Retries: c.retries.Load(), Recovered: c.recovered.Load(), GaveUp: c.gaveUp.Load()}
	}
	return out
}

func opIndex(op Op) int {
	for i, o := range Ops {
		if o == op {
			return i
		}
	}
	panic("lake: unknown storage op " + string(op))
}

// noRetry marks an error a retry cannot help: the caller's own code failed.
// It is transparent: its message and chain are the error's.
type noRetry struct{ err error }

// NoRetry marks err as one no retry can help: a caller's own failure
// inside a call (a put's write func) that must reach it unrepeated.
func NoRetry(err error) error { return noRetry{err} }

func (e noRetry) Error() string { return e.err.Error() }
func (e noRetry) Unwrap() error { return e.err }

// retryable reports whether err, the failure of a storage call under ctx,
// is transient: worth calling again.
func retryable(ctx context.Context, err error) bool {
	var nr noRetry
	switch {
	case ctx.Err() != nil,
		errors.As(err, &nr),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		IsPermanent(err),
		errors.Is(err, fs.ErrNotExist),
		errors.Is(err, ErrBadFile), errors.Is(err, ErrBadName),
		errors.Is(err, ErrLockHeld),
		errors.Is(err, io.EOF):
		return false
	}
	return true
}

// retryStore retries transient failures of the storage it wraps.
type Retry struct {
	next Store
	o    RetryOptions
	// abandoned maps a directory to the token of a lock whose retries gave
	// up: the lock may have been taken (an answer lost), so the next lock
	// of the directory through this store uses the token again.
	abandoned sync.Map
	// counters are the retry counters, one per Ops entry.
	counters []opCounters
}

// NewRetry returns next with the transient failures of its calls retried
// as o says.
func NewRetry(next Store, o RetryOptions) *Retry {
	o.fillDefaults()
	return &Retry{next: next, o: o, counters: make([]opCounters, len(Ops))}
}

func (s *Retry) Unwrap() Store { return s.next }

// do calls fn until it succeeds, fails for good, or the attempts or the
// time run out. An error after retries names how many were made.
func (s *Retry) do(ctx context.Context, op Op, what string, fn func() error) error {
	c := &s.counters[opIndex(op)]
	start := time.Now()
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil {
			if attempt > 1 {
				c.recovered.Add(1)
			}
			return nil
		}
		if !retryable(ctx, err) {
			if attempt > 1 {
				return fmt.Errorf("lake: %s %s: after %d attempts: %w", op, what, attempt, err)
			}
			return err
		}
		wait := s.backoff(attempt)
		if attempt >= s.o.MaxAttempts || time.Since(start)+wait > s.o.MaxElapsed {
			if s.o.MaxAttempts == 1 {
				return err
			}
			c.gaveUp.Add(1)
			return fmt.Errorf("lake: %s %s: gave up after %d attempts in %v: %w",
				op, what, attempt, time.Since(start).Round(time.Millisecond), err)
		}
		c.retries.Add(1)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("lake: %s %s: retry after %w abandoned: %w", op, what, err, ctx.Err())
		}
	}
}

// backoff is the wait after the attempt-th call: InitialBackoff doubled
// per earlier retry, at most MaxBackoff, drawn from its upper half.
func (s *Retry) backoff(attempt int) time.Duration {
	d := s.o.InitialBackoff << min(attempt-1, 30)
	if d <= 0 || d > s.o.MaxBackoff {
		d = s.o.MaxBackoff
	}
	return d/2 + rand.N(d/2+1)
}

// put retries by calling write again: every lake caller's write func
// encodes from data in memory (or, for the first compaction form, opens
// its inputs anew), so a second call writes the same file. The streaming
// compaction of a closed hour cannot (its rows come from one merge) and
// uses putOnce. A failure of write itself that is not the storage's (an
// encoding error, a failed read of compaction input, which its own reads
// retried) is not retried.
func (s *Retry) Put(ctx context.Context, key string, write func(w io.Writer) error) (int64, error) {
	var size int64
	err := s.do(ctx, OpPut, key, func() error {
		var werr error // the last error the storage's writer returned
		var err error
		size, err = s.next.Put(ctx, key, func(w io.Writer) error {
			err := write(&errWriter{w: w, err: &werr})
			if err != nil && (werr == nil || !errors.Is(err, werr)) {
				return noRetry{err}
			}
			return err
		})
		return err
	})
	return size, err
}

// putOnce is put without retries, for a write func that cannot run twice.
func (s *Retry) PutOnce(ctx context.Context, key string, write func(w io.Writer) error) (int64, error) {
	return s.next.Put(ctx, key, write)
}

// errWriter records the errors of the writer it wraps.
type errWriter struct {
	w   io.Writer
	err *error
}

func (e *errWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err != nil {
		*e.err = err
	}
	return n, err
}

func (s *Retry) Open(ctx context.Context, key string, size int64) (ObjectReader, error) {
	var r ObjectReader
	err := s.do(ctx, OpOpen, key, func() (err error) {
		r, err = s.next.Open(ctx, key, size)
		return err
	})
	if err != nil {
		return nil, err
	}
	rr := &retryReader{s: s, ctx: ctx, key: key, next: r}
	if p, ok := r.(Prefetcher); ok {
		return &retryPrefetchReader{rr, p}, nil
	}
	return rr, nil
}

// retryReader retries the ranged reads of an open file. Errors it returns
// (but io.EOF) are storage errors: a decoder that meets one reports a
// storage failure, not a bad file (see badFile).
type retryReader struct {
	s    *Retry
	ctx  context.Context
	key  string
	next ObjectReader
}

func (r *retryReader) Size() int64  { return r.next.Size() }
func (r *retryReader) Close() error { return r.next.Close() }

func (r *retryReader) ReadAt(p []byte, off int64) (int, error) {
	var n int
	err := r.s.do(r.ctx, OpRead, r.key, func() (err error) {
		n, err = r.next.ReadAt(p, off)
		return err
	})
	if err != nil && err != io.EOF {
		return n, &ReadError{Key: r.key, Err: err}
	}
	return n, err
}

// retryPrefetchReader is a retryReader of remote storage: its prefetches
// are retried too.
type retryPrefetchReader struct {
	*retryReader
	p Prefetcher
}

func (r *retryPrefetchReader) Prefetch(ranges []ByteRange) error {
	err := r.s.do(r.ctx, OpRead, r.key, func() error { return r.p.Prefetch(ranges) })
	if err != nil {
		return &ReadError{Key: r.key, Err: err}
	}
	return nil
}

// ReadError is a failure of the storage while reading an open file: it
// says the file could not be read, not that it is corrupt, so a reader
// reports it as itself rather than as ErrBadFile. It unwraps to the
// storage's error.
type ReadError struct {
	Key string
	Err error
}

func (e *ReadError) Error() string {
	return "lake: read " + e.Key + ": storage failed: " + e.Err.Error()
}
func (e *ReadError) Unwrap() error { return e.Err }

func (s *Retry) ReadFile(ctx context.Context, key string) ([]byte, error) {
	var b []byte
	err := s.do(ctx, OpReadFile, key, func() (err error) {
		b, err = s.next.ReadFile(ctx, key)
		return err
	})
	return b, err
}

func (s *Retry) List(ctx context.Context, dir string) ([]Entry, error) {
	var es []Entry
	err := s.do(ctx, OpList, dir, func() (err error) {
		es, err = s.next.List(ctx, dir)
		return err
	})
	return es, err
}

// walk retries a listing that failed partway without passing a file to fn
// twice: a retry skips the keys fn already saw. An error of fn is not
// retried.
func (s *Retry) Walk(ctx context.Context, dir string, fn func(key string, e Entry) error) error {
	seen := map[string]bool{}
	return s.do(ctx, OpWalk, dir, func() error {
		var fnErr error
		err := s.next.Walk(ctx, dir, func(key string, e Entry) error {
			if seen[key] {
				return nil
			}
			seen[key] = true
			fnErr = fn(key, e)
			return fnErr
		})
		if err != nil && fnErr != nil {
			return noRetry{err}
		}
		return err
	})
}

func (s *Retry) Remove(ctx context.Context, dir string, names []string) error {
	return s.do(ctx, OpRemove, dir, func() error { return s.next.Remove(ctx, dir, names) })
}

// lock takes the lock with a new token, or with the token of an earlier
// lock of dir that gave up (it may hold the lock without knowing).
func (s *Retry) Lock(ctx context.Context, dir string, now time.Time, maxAge time.Duration) (func(), error) {
	token := NewLockToken()
	if t, ok := s.abandoned.LoadAndDelete(dir); ok {
		token = t.(string)
	}
	return s.LockAs(ctx, dir, token, now, maxAge)
}

// lockAs retries with one token: a retry after a lock whose answer was
// lost finds the lock naming it and takes it as its own.
func (s *Retry) LockAs(ctx context.Context, dir, token string, now time.Time, maxAge time.Duration) (func(), error) {
	var unlock func()
	err := s.do(ctx, OpLock, dir, func() (err error) {
		unlock, err = s.next.LockAs(ctx, dir, token, now, maxAge)
		return err
	})
	if err != nil && !errors.Is(err, ErrLockHeld) {
		s.abandoned.Store(dir, token)
	}
	return unlock, err
}

// removeStale returns the keys every attempt removed.
func (s *Retry) RemoveStale(ctx context.Context, dir string, now time.Time, maxAge time.Duration) ([]string, error) {
	var all []string
	err := s.do(ctx, OpRemoveStale, dir, func() error {
		gone, err := s.next.RemoveStale(ctx, dir, now, maxAge)
		all = append(all, gone...)
		return err
	})
	return all, err
}

func (s *Retry) Remote() bool { return s.next.Remote() }

// newLockToken returns a token naming one taker of a lock.
func NewLockToken() string { return crand.Text() }
