// Package errorfs injects faults into a lake's storage
// (docs/adr/0022-lake-fault-injection.md, docs/adr/0039-lake-storage-package.md): a
// storage.Store that wraps the real one (directory or S3) and makes chosen
// operations fail the way object stores and disks fail. It exists for tests
// and for `make chaos` only: the wiring applies it through lake.Options.Wrap
// when the chaos-only lake.faults configuration keys are set, and no
// configuration reckon ships sets them. Package lake does not import it.
package errorfs

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"reckon/lake/storage"
)

// FaultKind is how an injected fault shows.
type FaultKind string

// The kinds of fault. All but FaultDenied are transient: the same call
// succeeds when tried again (unless it draws another fault).
const (
	// FaultError: the operation fails without doing anything (an S3 503
	// Slow Down, a reset connection). A remove fails after deleting a
	// prefix of its names, as a multi-object delete can; a walk after
	// passing a few files to its callback, as a paged listing can.
	FaultError FaultKind = "error"
	// FaultLatency: the operation waits Faults.Latency first, then runs.
	FaultLatency FaultKind = "latency"
	// FaultTimeout: the operation hangs for Faults.Timeout (or until its
	// ctx is done) and then fails with an i/o timeout, doing nothing.
	FaultTimeout FaultKind = "timeout"
	// FaultShortRead: a read gets fewer bytes than it asked for and
	// io.ErrUnexpectedEOF (a connection cut mid-body). Reads only.
	FaultShortRead FaultKind = "short_read"
	// FaultNoSpace: a write fails partway with ENOSPC, after write handed
	// over some of the file. Put and lock only.
	FaultNoSpace FaultKind = "enospc"
	// FaultLost: the operation runs and succeeds, but the caller sees an
	// error (the answer was lost on the way back): a put landed, a lock
	// was taken, a remove removed.
	FaultLost FaultKind = "lost"
	// FaultDenied: the operation is refused for good (access denied, the
	// bucket gone); the error wraps fs.ErrPermission, so IsPermanent
	// reports it.
	FaultDenied FaultKind = "denied"
)

// TransientFaultKinds are the kinds a retry gets past.
var TransientFaultKinds = []FaultKind{FaultError, FaultLatency, FaultTimeout, FaultShortRead, FaultNoSpace, FaultLost}

// FaultRule injects Kind into a fraction Rate of the calls of Op.
type FaultRule struct {
	// Op is the operation; "" means every operation Kind applies to.
	Op storage.Op
	// Kind of the fault.
	Kind FaultKind
	// Rate is the probability, 0..1, that a call draws this fault. The
	// rules of one operation are drawn together: their rates add up.
	Rate float64
}

// Faults configures fault injection into a lake's storage. Test and chaos
// use only. The zero value of each field means its default; a lake whose
// Options.Wrap is not Faults.Wrap (or New) has none.
type Faults struct {
	// Seed makes the faults deterministic: the n-th call of an operation
	// on a key draws the same fault in every run with the same seed,
	// however calls on different keys interleave. Default 0 (a seed like
	// any other).
	Seed uint64
	// Rules say which faults each operation draws.
	Rules []FaultRule
	// Latency is the delay of FaultLatency. Default 20ms.
	Latency time.Duration
	// Timeout is how long FaultTimeout hangs. Default 200ms.
	Timeout time.Duration
	// OnFault, when set, is called with every fault injected, from the
	// goroutine of the operation (so concurrently).
	OnFault func(Fault)
}

// UniformFaults returns Faults that give every operation each transient
// fault kind it can suffer with probability rate/len(TransientFaultKinds),
// so about rate of all calls fail or stall; ranged reads (OpRead) draw at
// a twentieth of that, because one file read makes tens of them (one per
// page on a directory), where a put or a list is one request.
func UniformFaults(seed uint64, rate float64) *Faults {
	f := &Faults{Seed: seed}
	each := rate / float64(len(TransientFaultKinds))
	for _, k := range TransientFaultKinds {
		for _, op := range storage.Ops {
			switch {
			case !faultApplies(k, op):
			case op == storage.OpRead:
				f.Rules = append(f.Rules, FaultRule{Op: op, Kind: k, Rate: each / 20})
			default:
				f.Rules = append(f.Rules, FaultRule{Op: op, Kind: k, Rate: each})
			}
		}
	}
	return f
}

// Fault is one injected fault, as InjectedError and OnFault report it.
type Fault struct {
	Op   storage.Op
	Kind FaultKind
	Key  string
}

// Validate reports every problem with f at once.
func (f *Faults) Validate() error { return errors.Join(f.validate()...) }

// Wrap returns next with f's faults injected: a Store for
// lake.Options.Wrap. f is copied; changing it later changes nothing.
func (f *Faults) Wrap(next storage.Store) storage.Store { return New(next, *f) }

func (f *Faults) validate() []error {
	var errs []error
	for i, r := range f.Rules {
		if r.Op != "" && !opKnown(r.Op) {
			errs = append(errs, fmt.Errorf("lake: options: Faults.Rules[%d]: unknown op %q", i, r.Op))
		}
		if !faultApplies(r.Kind, r.Op) && (r.Op != "" || !kindKnown(r.Kind)) {
			errs = append(errs, fmt.Errorf("lake: options: Faults.Rules[%d]: kind %q does not apply to op %q", i, r.Kind, r.Op))
		}
		if !(r.Rate >= 0 && r.Rate <= 1) {
			errs = append(errs, fmt.Errorf("lake: options: Faults.Rules[%d]: rate %v outside 0..1", i, r.Rate))
		}
	}
	if f.Latency < 0 || f.Timeout < 0 {
		errs = append(errs, errors.New("lake: options: Faults.Latency and Faults.Timeout must not be negative"))
	}
	return errs
}

func opKnown(op storage.Op) bool {
	for _, o := range storage.Ops {
		if o == op {
			return true
		}
	}
	return false
}

func kindKnown(k FaultKind) bool {
	for _, o := range storage.Ops {
		if faultApplies(k, o) {
			return true
		}
	}
	return false
}

// faultApplies reports whether kind can happen to op.
func faultApplies(kind FaultKind, op storage.Op) bool {
	switch kind {
	case FaultError, FaultLatency, FaultTimeout, FaultLost, FaultDenied:
		return op != ""
	case FaultShortRead:
		return op == storage.OpRead || op == storage.OpReadFile
	case FaultNoSpace:
		return op == storage.OpPut || op == storage.OpLock
	}
	return false
}

// InjectedError is the error of an injected fault. It unwraps to what the
// real failure would: fs.ErrPermission (FaultDenied), syscall.ENOSPC,
// io.ErrUnexpectedEOF (a short read), os.ErrDeadlineExceeded (a timeout)
// or ErrInjected.
type InjectedError struct {
	Fault
	Err error
}

func (e *InjectedError) Error() string {
	return fmt.Sprintf("lake: injected %s: %s %s: %v", e.Kind, e.Op, e.Key, e.Err)
}

func (e *InjectedError) Unwrap() error { return e.Err }

// ErrInjected is what the InjectedError of a FaultError or FaultLost wraps: a
// transient failure of the storage.
var ErrInjected = errors.New("storage failed (injected fault, transient)")

// Store injects Faults into the storage it wraps.
type Store struct {
	next storage.Store
	f    Faults
	// injected counts the faults injected so far.
	injected atomic.Int64

	mu    sync.Mutex        // protects the following fields
	calls map[string]uint64 // per op and key: calls drawn so far
	rules []FaultRule       // f.Rules, or what SetRules set
}

// New returns next with the faults of f injected.
func New(next storage.Store, f Faults) *Store {
	if f.Latency == 0 {
		f.Latency = 20 * time.Millisecond
	}
	if f.Timeout == 0 {
		f.Timeout = 200 * time.Millisecond
	}
	return &Store{next: next, f: f, calls: map[string]uint64{}, rules: f.Rules}
}

// SetRules replaces the rules s draws from, e.g. nil when the storage
// recovers. Safe for concurrent use.
func (s *Store) SetRules(rules []FaultRule) {
	s.mu.Lock()
	s.rules = rules
	s.mu.Unlock()
}

// draw returns the fault the next call of op on key suffers ("" for none)
// and a second random number for the fault's details.
func (s *Store) draw(op storage.Op, key string) (FaultKind, uint64) {
	id := string(op) + "\x00" + key
	s.mu.Lock()
	n := s.calls[id]
	s.calls[id] = n + 1
	rules := s.rules
	s.mu.Unlock()
	h := fnv.New64a()
	h.Write([]byte(id))
	x := splitmix(s.f.Seed ^ splitmix(h.Sum64()^splitmix(n)))
	u := float64(x>>11) / (1 << 53)
	extra := splitmix(x)
	acc := 0.0
	for _, r := range rules {
		if r.Op != "" && r.Op != op || !faultApplies(r.Kind, op) {
			continue
		}
		acc += r.Rate
		if u < acc {
			return r.Kind, extra
		}
	}
	return "", extra
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// fault records an injected fault and returns its error.
func (s *Store) fault(op storage.Op, kind FaultKind, key string) error {
	s.injected.Add(1)
	fl := Fault{Op: op, Kind: kind, Key: key}
	if s.f.OnFault != nil {
		s.f.OnFault(fl)
	}
	var err error
	switch kind {
	case FaultTimeout:
		err = os.ErrDeadlineExceeded
	case FaultShortRead:
		err = io.ErrUnexpectedEOF
	case FaultNoSpace:
		err = &fs.PathError{Op: "write", Path: key, Err: syscall.ENOSPC}
	case FaultDenied:
		err = fs.ErrPermission
	case FaultLost:
		err = fmt.Errorf("the operation succeeded, its answer was lost: %w", ErrInjected)
	default:
		err = ErrInjected
	}
	return &InjectedError{Fault: fl, Err: err}
}

// before applies the faults that strike before an operation runs: it
// returns (true, err) when the operation must not run and fail with err.
// A FaultLatency waits and lets it run; FaultLost, FaultShortRead and
// FaultNoSpace are the caller's to apply, after or during the operation.
func (s *Store) before(ctx context.Context, op storage.Op, kind FaultKind, key string) (bool, error) {
	switch kind {
	case FaultLatency:
		s.fault(op, kind, key)
		return false, sleepCtx(ctx, s.f.Latency, op, key)
	case FaultTimeout:
		err := s.fault(op, kind, key)
		if cerr := sleepCtx(ctx, s.f.Timeout, op, key); cerr != nil {
			return true, cerr
		}
		return true, err
	case FaultError, FaultDenied:
		return true, s.fault(op, kind, key)
	}
	return false, nil
}

// sleepCtx waits d or until ctx is done, whichever is first.
func sleepCtx(ctx context.Context, d time.Duration, op storage.Op, key string) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("lake: %s %s: %w", op, key, ctx.Err())
	}
}

func (s *Store) Put(ctx context.Context, key string, write func(w io.Writer) error) (int64, error) {
	kind, extra := s.draw(storage.OpPut, key)
	if stop, err := s.before(ctx, storage.OpPut, kind, key); stop || err != nil {
		return 0, err
	}
	switch kind {
	case FaultNoSpace:
		room := int64(extra % (64 << 10))
		ferr := s.fault(storage.OpPut, kind, key)
		_, err := s.next.Put(ctx, key, func(w io.Writer) error {
			if err := write(&fullWriter{w: w, room: room, err: ferr}); err != nil {
				return err
			}
			return ferr // the file fit in room: the flush fails
		})
		return 0, err
	case FaultLost:
		if _, err := s.next.Put(ctx, key, write); err != nil {
			return 0, err
		}
		return 0, s.fault(storage.OpPut, kind, key)
	}
	return s.next.Put(ctx, key, write)
}

// fullWriter takes room bytes, then fails like a full disk.
type fullWriter struct {
	w    io.Writer
	room int64
	err  error
}

func (f *fullWriter) Write(p []byte) (int, error) {
	if int64(len(p)) <= f.room {
		n, err := f.w.Write(p)
		f.room -= int64(n)
		return n, err
	}
	n, err := f.w.Write(p[:f.room])
	f.room -= int64(n)
	if err != nil {
		return n, err
	}
	return n, f.err
}

func (s *Store) Open(ctx context.Context, key string, size int64) (storage.ObjectReader, error) {
	kind, _ := s.draw(storage.OpOpen, key)
	if stop, err := s.before(ctx, storage.OpOpen, kind, key); stop || err != nil {
		return nil, err
	}
	r, err := s.next.Open(ctx, key, size)
	if err != nil {
		return nil, err
	}
	if kind == FaultLost {
		r.Close()
		return nil, s.fault(storage.OpOpen, kind, key)
	}
	fr := &faultReader{s: s, ctx: ctx, key: key, next: r}
	if p, ok := r.(storage.Prefetcher); ok {
		return &faultPrefetchReader{fr, p}, nil
	}
	return fr, nil
}

// faultReader injects OpRead faults into the reads of an open file.
type faultReader struct {
	s    *Store
	ctx  context.Context
	key  string
	next storage.ObjectReader
}

func (r *faultReader) Size() int64  { return r.next.Size() }
func (r *faultReader) Close() error { return r.next.Close() }

func (r *faultReader) ReadAt(p []byte, off int64) (int, error) {
	at := r.key + "@" + strconv.FormatInt(off, 10)
	kind, extra := r.s.draw(storage.OpRead, at)
	if stop, err := r.s.before(r.ctx, storage.OpRead, kind, r.key); stop || err != nil {
		return 0, err
	}
	n, err := r.next.ReadAt(p, off)
	switch kind {
	case FaultShortRead:
		if n > 0 {
			n = int(extra % uint64(n))
		}
		return n, r.s.fault(storage.OpRead, kind, r.key)
	case FaultLost:
		return 0, r.s.fault(storage.OpRead, kind, r.key)
	}
	return n, err
}

// faultPrefetchReader is a faultReader of remote storage: its prefetches
// draw OpRead faults too.
type faultPrefetchReader struct {
	*faultReader
	p storage.Prefetcher
}

func (r *faultPrefetchReader) Prefetch(ranges []storage.ByteRange) error {
	kind, _ := r.s.draw(storage.OpRead, r.key+"@prefetch")
	if stop, err := r.s.before(r.ctx, storage.OpRead, kind, r.key); stop || err != nil {
		return err
	}
	err := r.p.Prefetch(ranges)
	if err == nil && (kind == FaultLost || kind == FaultShortRead) {
		return r.s.fault(storage.OpRead, kind, r.key)
	}
	return err
}

func (s *Store) ReadFile(ctx context.Context, key string) ([]byte, error) {
	kind, _ := s.draw(storage.OpReadFile, key)
	if stop, err := s.before(ctx, storage.OpReadFile, kind, key); stop || err != nil {
		return nil, err
	}
	b, err := s.next.ReadFile(ctx, key)
	if err == nil && (kind == FaultLost || kind == FaultShortRead) {
		return nil, s.fault(storage.OpReadFile, kind, key)
	}
	return b, err
}

func (s *Store) List(ctx context.Context, dir string) ([]storage.Entry, error) {
	kind, _ := s.draw(storage.OpList, dir)
	if stop, err := s.before(ctx, storage.OpList, kind, dir); stop || err != nil {
		return nil, err
	}
	es, err := s.next.List(ctx, dir)
	if err == nil && kind == FaultLost {
		return nil, s.fault(storage.OpList, kind, dir)
	}
	return es, err
}

// walk's FaultError strikes midway, after some files were passed to fn,
// as a paged listing fails on a later page.
func (s *Store) Walk(ctx context.Context, dir string, fn func(key string, e storage.Entry) error) error {
	kind, extra := s.draw(storage.OpWalk, dir)
	if kind == FaultError {
		ferr := s.fault(storage.OpWalk, kind, dir)
		after := extra % 8
		err := s.next.Walk(ctx, dir, func(key string, e storage.Entry) error {
			if after == 0 {
				return ferr
			}
			after--
			return fn(key, e)
		})
		if err == nil {
			err = ferr
		}
		return err
	}
	if stop, err := s.before(ctx, storage.OpWalk, kind, dir); stop || err != nil {
		return err
	}
	err := s.next.Walk(ctx, dir, fn)
	if err == nil && kind == FaultLost {
		return s.fault(storage.OpWalk, kind, dir)
	}
	return err
}

// remove's FaultError removes a prefix of names first.
func (s *Store) Remove(ctx context.Context, dir string, names []string) error {
	kind, extra := s.draw(storage.OpRemove, dir)
	if kind == FaultError && len(names) > 0 {
		ferr := s.fault(storage.OpRemove, kind, dir)
		if err := s.next.Remove(ctx, dir, names[:extra%uint64(len(names))]); err != nil {
			return err
		}
		return ferr
	}
	if stop, err := s.before(ctx, storage.OpRemove, kind, dir); stop || err != nil {
		return err
	}
	err := s.next.Remove(ctx, dir, names)
	if err == nil && kind == FaultLost {
		return s.fault(storage.OpRemove, kind, dir)
	}
	return err
}

func (s *Store) Lock(ctx context.Context, dir string, now time.Time, maxAge time.Duration) (func(), error) {
	return s.LockAs(ctx, dir, storage.NewLockToken(), now, maxAge)
}

func (s *Store) LockAs(ctx context.Context, dir, token string, now time.Time, maxAge time.Duration) (func(), error) {
	kind, _ := s.draw(storage.OpLock, dir)
	if stop, err := s.before(ctx, storage.OpLock, kind, dir); stop || err != nil {
		return nil, err
	}
	if kind == FaultNoSpace {
		return nil, s.fault(storage.OpLock, kind, dir)
	}
	unlock, err := s.next.LockAs(ctx, dir, token, now, maxAge)
	if err == nil && kind == FaultLost {
		// The lock was taken and the taker does not know: a call again
		// with token takes it as its own; anyone else waits until it is
		// maxAge old and taken over.
		return nil, s.fault(storage.OpLock, kind, dir)
	}
	return unlock, err
}

func (s *Store) RemoveStale(ctx context.Context, dir string, now time.Time, maxAge time.Duration) ([]string, error) {
	kind, _ := s.draw(storage.OpRemoveStale, dir)
	if stop, err := s.before(ctx, storage.OpRemoveStale, kind, dir); stop || err != nil {
		return nil, err
	}
	gone, err := s.next.RemoveStale(ctx, dir, now, maxAge)
	if err == nil && kind == FaultLost {
		return nil, s.fault(storage.OpRemoveStale, kind, dir)
	}
	return gone, err
}

func (s *Store) Remote() bool { return s.next.Remote() }

func (s *Store) Unwrap() storage.Store { return s.next }

// Injected returns how many faults s injected so far.
func (s *Store) Injected() int64 { return s.injected.Load() }
