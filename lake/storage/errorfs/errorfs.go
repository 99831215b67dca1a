package lake

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
)

// Fault injection (docs/adr/0022-lake-fault-injection.md): a storage that
// wraps the real one (directory or S3) and makes chosen operations fail the
// way object stores and disks fail. It exists for tests and for `make chaos`
// only: Options.Faults is nil in every configuration reckon ships, and the
// lake.faults configuration keys are documented as chaos-only.

// FaultOp names a storage operation a FaultRule applies to.
type FaultOp string

// The storage operations.
const (
	OpPut         FaultOp = "put"          // writing a file: raw, panes, truth, progress, reports, Z-reports, compaction output
	OpOpen        FaultOp = "open"         // opening a file for reads (on S3 its footer GET)
	OpRead        FaultOp = "read"         // a ranged read of an open file (ReadAt, prefetch)
	OpReadFile    FaultOp = "read_file"    // reading a whole small file (progress, reports, Z-reports)
	OpList        FaultOp = "list"         // listing one directory
	OpWalk        FaultOp = "walk"         // listing a tree
	OpRemove      FaultOp = "remove"       // deleting files (superseded, compacted)
	OpLock        FaultOp = "lock"         // the compaction lock: an exclusive create, on S3 a conditional PUT
	OpRemoveStale FaultOp = "remove_stale" // sweeping crashed writes' debris
)

// FaultOps is every FaultOp.
var FaultOps = []FaultOp{OpPut, OpOpen, OpRead, OpReadFile, OpList, OpWalk, OpRemove, OpLock, OpRemoveStale}

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
	Op FaultOp
	// Kind of the fault.
	Kind FaultKind
	// Rate is the probability, 0..1, that a call draws this fault. The
	// rules of one operation are drawn together: their rates add up.
	Rate float64
}

// Faults configures fault injection into a lake's storage. Test and chaos
// use only. The zero value of each field means its default; nil
// Options.Faults means no injection.
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
		for _, op := range FaultOps {
			switch {
			case !faultApplies(k, op):
			case op == OpRead:
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
	Op   FaultOp
	Kind FaultKind
	Key  string
}

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

func opKnown(op FaultOp) bool {
	for _, o := range FaultOps {
		if o == op {
			return true
		}
	}
	return false
}

func kindKnown(k FaultKind) bool {
	for _, o := range FaultOps {
		if faultApplies(k, o) {
			return true
		}
	}
	return false
}

// faultApplies reports whether kind can happen to op.
func faultApplies(kind FaultKind, op FaultOp) bool {
	switch kind {
	case FaultError, FaultLatency, FaultTimeout, FaultLost, FaultDenied:
		return op != ""
	case FaultShortRead:
		return op == OpRead || op == OpReadFile
	case FaultNoSpace:
		return op == OpPut || op == OpLock
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

// faultStore injects Faults into the storage it wraps.
type faultStore struct {
	next storage
	f    Faults
	// injected counts the faults injected so far.
	injected atomic.Int64

	mu    sync.Mutex        // protects the following field
	calls map[string]uint64 // per op and key: calls drawn so far
}

func newFaultStore(next storage, f Faults) *faultStore {
	if f.Latency == 0 {
		f.Latency = 20 * time.Millisecond
	}
	if f.Timeout == 0 {
		f.Timeout = 200 * time.Millisecond
	}
	return &faultStore{next: next, f: f, calls: map[string]uint64{}}
}

// draw returns the fault the next call of op on key suffers ("" for none)
// and a second random number for the fault's details.
func (s *faultStore) draw(op FaultOp, key string) (FaultKind, uint64) {
	id := string(op) + "\x00" + key
	s.mu.Lock()
	n := s.calls[id]
	s.calls[id] = n + 1
	s.mu.Unlock()
	h := fnv.New64a()
	h.Write([]byte(id))
	x := splitmix(s.f.Seed ^ splitmix(h.Sum64()^splitmix(n)))
	u := float64(x>>11) / (1 << 53)
	extra := splitmix(x)
	acc := 0.0
	for _, r := range s.f.Rules {
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
func (s *faultStore) fault(op FaultOp, kind FaultKind, key string) error {
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
func (s *faultStore) before(ctx context.Context, op FaultOp, kind FaultKind, key string) (bool, error) {
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
func sleepCtx(ctx context.Context, d time.Duration, op FaultOp, key string) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("lake: %s %s: %w", op, key, ctx.Err())
	}
}

func (s *faultStore) put(ctx context.Context, key string, write func(w io.Writer) error) (int64, error) {
	kind, extra := s.draw(OpPut, key)
	if stop, err := s.before(ctx, OpPut, kind, key); stop || err != nil {
		return 0, err
	}
	switch kind {
	case FaultNoSpace:
		room := int64(extra % (64 << 10))
		ferr := s.fault(OpPut, kind, key)
		_, err := s.next.put(ctx, key, func(w io.Writer) error {
			if err := write(&fullWriter{w: w, room: room, err: ferr}); err != nil {
				return err
			}
			return ferr // the file fit in room: the flush fails
		})
		return 0, err
	case FaultLost:
		if _, err := s.next.put(ctx, key, write); err != nil {
			return 0, err
		}
		return 0, s.fault(OpPut, kind, key)
	}
	return s.next.put(ctx, key, write)
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

func (s *faultStore) open(ctx context.Context, key string, size int64) (objectReader, error) {
	kind, _ := s.draw(OpOpen, key)
	if stop, err := s.before(ctx, OpOpen, kind, key); stop || err != nil {
		return nil, err
	}
	r, err := s.next.open(ctx, key, size)
	if err != nil {
		return nil, err
	}
	if kind == FaultLost {
		r.Close()
		return nil, s.fault(OpOpen, kind, key)
	}
	fr := &faultReader{s: s, ctx: ctx, key: key, next: r}
	if p, ok := r.(prefetcher); ok {
		return &faultPrefetchReader{fr, p}, nil
	}
	return fr, nil
}

// faultReader injects OpRead faults into the reads of an open file.
type faultReader struct {
	s    *faultStore
	ctx  context.Context
	key  string
	next objectReader
}

func (r *faultReader) Size() int64  { return r.next.Size() }
func (r *faultReader) Close() error { return r.next.Close() }

func (r *faultReader) ReadAt(p []byte, off int64) (int, error) {
	at := r.key + "@" + strconv.FormatInt(off, 10)
	kind, extra := r.s.draw(OpRead, at)
	if stop, err := r.s.before(r.ctx, OpRead, kind, r.key); stop || err != nil {
		return 0, err
	}
	n, err := r.next.ReadAt(p, off)
	switch kind {
	case FaultShortRead:
		if n > 0 {
			n = int(extra % uint64(n))
		}
		return n, r.s.fault(OpRead, kind, r.key)
	case FaultLost:
		return 0, r.s.fault(OpRead, kind, r.key)
	}
	return n, err
}

// faultPrefetchReader is a faultReader of remote storage: its prefetches
// draw OpRead faults too.
type faultPrefetchReader struct {
	*faultReader
	p prefetcher
}

func (r *faultPrefetchReader) prefetch(ranges []byteRange) error {
	kind, _ := r.s.draw(OpRead, r.key+"@prefetch")
	if stop, err := r.s.before(r.ctx, OpRead, kind, r.key); stop || err != nil {
		return err
	}
	err := r.p.prefetch(ranges)
	if err == nil && (kind == FaultLost || kind == FaultShortRead) {
		return r.s.fault(OpRead, kind, r.key)
	}
	return err
}

func (s *faultStore) readFile(ctx context.Context, key string) ([]byte, error) {
	kind, _ := s.draw(OpReadFile, key)
	if stop, err := s.before(ctx, OpReadFile, kind, key); stop || err != nil {
		return nil, err
	}
	b, err := s.next.readFile(ctx, key)
	if err == nil && (kind == FaultLost || kind == FaultShortRead) {
		return nil, s.fault(OpReadFile, kind, key)
	}
	return b, err
}

func (s *faultStore) list(ctx context.Context, dir string) ([]entry, error) {
	kind, _ := s.draw(OpList, dir)
	if stop, err := s.before(ctx, OpList, kind, dir); stop || err != nil {
		return nil, err
	}
	es, err := s.next.list(ctx, dir)
	if err == nil && kind == FaultLost {
		return nil, s.fault(OpList, kind, dir)
	}
	return es, err
}

// walk's FaultError strikes midway, after some files were passed to fn,
// as a paged listing fails on a later page.
func (s *faultStore) walk(ctx context.Context, dir string, fn func(key string, e entry) error) error {
	kind, extra := s.draw(OpWalk, dir)
	if kind == FaultError {
		ferr := s.fault(OpWalk, kind, dir)
		after := extra % 8
		err := s.next.walk(ctx, dir, func(key string, e entry) error {
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
	if stop, err := s.before(ctx, OpWalk, kind, dir); stop || err != nil {
		return err
	}
	err := s.next.walk(ctx, dir, fn)
	if err == nil && kind == FaultLost {
		return s.fault(OpWalk, kind, dir)
	}
	return err
}

// remove's FaultError removes a prefix of names first.
func (s *faultStore) remove(ctx context.Context, dir string, names []string) error {
	kind, extra := s.draw(OpRemove, dir)
	if kind == FaultError && len(names) > 0 {
		ferr := s.fault(OpRemove, kind, dir)
		if err := s.next.remove(ctx, dir, names[:extra%uint64(len(names))]); err != nil {
			return err
		}
		return ferr
	}
	if stop, err := s.before(ctx, OpRemove, kind, dir); stop || err != nil {
		return err
	}
	err := s.next.remove(ctx, dir, names)
	if err == nil && kind == FaultLost {
		return s.fault(OpRemove, kind, dir)
	}
	return err
}

func (s *faultStore) lock(ctx context.Context, dir string, now time.Time, maxAge time.Duration) (func(), error) {
	return s.lockAs(ctx, dir, newLockToken(), now, maxAge)
}

func (s *faultStore) lockAs(ctx context.Context, dir, token string, now time.Time, maxAge time.Duration) (func(), error) {
	kind, _ := s.draw(OpLock, dir)
	if stop, err := s.before(ctx, OpLock, kind, dir); stop || err != nil {
		return nil, err
	}
	if kind == FaultNoSpace {
		return nil, s.fault(OpLock, kind, dir)
	}
	unlock, err := s.next.lockAs(ctx, dir, token, now, maxAge)
	if err == nil && kind == FaultLost {
		// The lock was taken and the taker does not know: a call again
		// with token takes it as its own; anyone else waits until it is
		// maxAge old and taken over.
		return nil, s.fault(OpLock, kind, dir)
	}
	return unlock, err
}

func (s *faultStore) removeStale(ctx context.Context, dir string, now time.Time, maxAge time.Duration) ([]string, error) {
	kind, _ := s.draw(OpRemoveStale, dir)
	if stop, err := s.before(ctx, OpRemoveStale, kind, dir); stop || err != nil {
		return nil, err
	}
	gone, err := s.next.removeStale(ctx, dir, now, maxAge)
	if err == nil && kind == FaultLost {
		return nil, s.fault(OpRemoveStale, kind, dir)
	}
	return gone, err
}

func (s *faultStore) remote() bool { return s.next.remote() }

func (s *faultStore) unwrap() storage { return s.next }

// FaultsInjected returns how many faults the lake's storage injected so
// far: 0 without Options.Faults.
func (l *Lake) FaultsInjected() int64 {
	for st := l.store; st != nil; st = unwrapStore(st) {
		if s, ok := st.(*faultStore); ok {
			return s.injected.Load()
		}
	}
	return 0
}
