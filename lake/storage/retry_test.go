package lake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// flakyStore fails the first fail calls of each operation with err, then
// passes them to the storage it wraps. ReadAt calls of the files it opens
// count as OpRead.
type flakyStore struct {
	storage
	fail int
	err  error

	mu    sync.Mutex // protects the following field
	calls map[FaultOp]int
}

func newFlaky(t *testing.T, fail int, err error) *flakyStore {
	return &flakyStore{storage: &localStore{root: t.TempDir()}, fail: fail, err: err, calls: map[FaultOp]int{}}
}

// call counts a call of op and returns the error it must fail with.
func (s *flakyStore) call(op FaultOp) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[op]++
	if s.calls[op] <= s.fail {
		return fmt.Errorf("flaky %s call %d: %w", op, s.calls[op], s.err)
	}
	return nil
}

func (s *flakyStore) count(op FaultOp) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

func (s *flakyStore) put(ctx context.Context, key string, write func(w io.Writer) error) (int64, error) {
	if err := s.call(OpPut); err != nil {
		// Like a write that fails partway: write ran, nothing landed.
		s.storage.put(ctx, key, func(w io.Writer) error { write(w); return err })
		return 0, err
	}
	return s.storage.put(ctx, key, write)
}

func (s *flakyStore) open(ctx context.Context, key string, size int64) (objectReader, error) {
	if err := s.call(OpOpen); err != nil {
		return nil, err
	}
	r, err := s.storage.open(ctx, key, size)
	if err != nil {
		return nil, err
	}
	return flakyReader{r, s}, nil
}

type flakyReader struct {
	objectReader
	s *flakyStore
}

func (r flakyReader) ReadAt(p []byte, off int64) (int, error) {
	if err := r.s.call(OpRead); err != nil {
		return 0, err
	}
	return r.objectReader.ReadAt(p, off)
}

func (s *flakyStore) readFile(ctx context.Context, key string) ([]byte, error) {
	if err := s.call(OpReadFile); err != nil {
		return nil, err
	}
	return s.storage.readFile(ctx, key)
}

func (s *flakyStore) list(ctx context.Context, dir string) ([]entry, error) {
	if err := s.call(OpList); err != nil {
		return nil, err
	}
	return s.storage.list(ctx, dir)
}

// walk fails after passing the first file, as a paged listing can.
func (s *flakyStore) walk(ctx context.Context, dir string, fn func(key string, e entry) error) error {
	err := s.call(OpWalk)
	first := true
	werr := s.storage.walk(ctx, dir, func(key string, e entry) error {
		if err != nil && !first {
			return err
		}
		first = false
		return fn(key, e)
	})
	if werr == nil {
		werr = err
	}
	return werr
}

func (s *flakyStore) remove(ctx context.Context, dir string, names []string) error {
	if err := s.call(OpRemove); err != nil {
		return err
	}
	return s.storage.remove(ctx, dir, names)
}

// lockAs loses its answers: the lock is taken, the caller sees err.
func (s *flakyStore) lockAs(ctx context.Context, dir, token string, now time.Time, maxAge time.Duration) (func(), error) {
	unlock, lerr := s.storage.lockAs(ctx, dir, token, now, maxAge)
	if err := s.call(OpLock); err != nil && lerr == nil {
		return nil, err
	}
	return unlock, lerr
}

func (s *flakyStore) removeStale(ctx context.Context, dir string, now time.Time, maxAge time.Duration) ([]string, error) {
	if err := s.call(OpRemoveStale); err != nil {
		return nil, err
	}
	return s.storage.removeStale(ctx, dir, now, maxAge)
}

var errFlaky = errors.New("flaky storage")

// storageOps runs one call of every storage operation through st and
// returns the error of each.
func storageOps(t *testing.T, ctx context.Context, st storage) map[FaultOp]error {
	t.Helper()
	errs := map[FaultOp]error{}
	_, errs[OpPut] = st.put(ctx, "d/f.bin", func(w io.Writer) error { _, err := w.Write([]byte("content")); return err })
	_, errs[OpReadFile] = st.readFile(ctx, "d/f.bin")
	_, errs[OpList] = st.list(ctx, "d")
	if r, err := st.open(ctx, "d/f.bin", -1); err != nil {
		errs[OpOpen] = err
	} else {
		var b [4]byte
		_, errs[OpRead] = r.ReadAt(b[:], 1)
		r.Close()
	}
	errs[OpWalk] = st.walk(ctx, "d", func(string, entry) error { return nil })
	errs[OpRemoveStale] = func() error { _, err := st.removeStale(ctx, "d", time.Now(), time.Hour); return err }()
	if unlock, err := st.lock(ctx, "d", time.Now(), time.Hour); err != nil {
		errs[OpLock] = err
	} else {
		unlock()
	}
	errs[OpRemove] = st.remove(ctx, "d", []string{"f.bin"})
	return errs
}

func statsOf(op FaultOp) StorageOpStats {
	return StorageStats()[opIndex(op)]
}

// TestRetryEveryOp: each operation failing twice is retried to success,
// and the counters say so.
func TestRetryEveryOp(t *testing.T) {
	fl := newFlaky(t, 2, errFlaky)
	st := newRetryStore(fl, fastRetry)
	before := StorageStats()
	for op, err := range storageOps(t, t.Context(), st) {
		if err != nil {
			t.Errorf("%s failing twice, retried: %v", op, err)
		}
	}
	after := StorageStats()
	for i, op := range FaultOps {
		if got := fl.count(op); got != 3 {
			t.Errorf("%s: %d calls, want 3 (two failures and a success)", op, got)
		}
		if d := after[i].Retries - before[i].Retries; d < 2 {
			t.Errorf("%s: retries counter moved by %d, want at least 2", op, d)
		}
		if d := after[i].Recovered - before[i].Recovered; d < 1 {
			t.Errorf("%s: recovered counter moved by %d, want at least 1", op, d)
		}
	}
}

// TestRetryBounded: an operation that always fails is called MaxAttempts
// times, then fails naming the attempts and wrapping the cause, and the
// give-up counter moves; a time budget stops it sooner.
func TestRetryBounded(t *testing.T) {
	fl := newFlaky(t, 1<<30, errFlaky)
	o := fastRetry
	o.MaxAttempts = 4
	st := newRetryStore(fl, o)
	before := statsOf(OpList)
	_, err := st.list(t.Context(), "d")
	if !errors.Is(err, errFlaky) || !strings.Contains(err.Error(), "gave up after 4 attempts") {
		t.Errorf("list always failing: %v, want it to give up after 4 attempts wrapping the cause", err)
	}
	if got := fl.count(OpList); got != 4 {
		t.Errorf("list always failing: %d calls, want 4", got)
	}
	if d := statsOf(OpList).GaveUp - before.GaveUp; d < 1 {
		t.Errorf("give-up counter moved by %d", d)
	}

	fl = newFlaky(t, 1<<30, errFlaky)
	st = newRetryStore(fl, RetryOptions{MaxAttempts: 1000, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, MaxElapsed: 100 * time.Millisecond})
	start := time.Now()
	if _, err := st.readFile(t.Context(), "d/f"); !errors.Is(err, errFlaky) {
		t.Errorf("readFile always failing: %v", err)
	}
	if el, n := time.Since(start), fl.count(OpReadFile); n > 15 || el > 2*time.Second {
		t.Errorf("a 100ms budget made %d calls in %v", n, el)
	}

	fl = newFlaky(t, 1<<30, errFlaky)
	st = newRetryStore(fl, RetryOptions{MaxAttempts: 1})
	if _, err := st.readFile(t.Context(), "d/f"); !errors.Is(err, errFlaky) || fl.count(OpReadFile) != 1 {
		t.Errorf("MaxAttempts 1: %v after %d calls, want the error after one", err, fl.count(OpReadFile))
	}
}

// TestRetryNotPermanent: permanent failures, a missing file, a lock
// another holds and the caller's own errors are not retried.
func TestRetryNotPermanent(t *testing.T) {
	for _, cause := range []error{fs.ErrPermission, fs.ErrNotExist, ErrBadFile, errLockHeld, context.Canceled} {
		fl := newFlaky(t, 1<<30, cause)
		if _, err := fl.storage.put(t.Context(), "d/f.bin", func(w io.Writer) error { return nil }); err != nil {
			t.Fatal(err)
		}
		st := newRetryStore(fl, fastRetry)
		for op, err := range storageOps(t, t.Context(), st) {
			if !errors.Is(err, cause) {
				t.Errorf("%s failing with %v: %v", op, cause, err)
			}
		}
		for _, op := range FaultOps {
			if n := fl.count(op); n > 1 {
				t.Errorf("%s failing with %v was called %d times, want once", op, cause, n)
			}
		}
	}

	fl := newFlaky(t, 0, nil)
	st := newRetryStore(fl, fastRetry)
	boom := errors.New("encoder failed")
	calls := 0
	if _, err := st.put(t.Context(), "d/x", func(w io.Writer) error { calls++; w.Write([]byte("x")); return boom }); !errors.Is(err, boom) || calls != 1 {
		t.Errorf("put whose write func fails: %v after %d calls, want it once", err, calls)
	}
	st.put(t.Context(), "d/a", func(w io.Writer) error { return nil })
	st.put(t.Context(), "d/b", func(w io.Writer) error { return nil })
	calls = 0
	if err := st.walk(t.Context(), "d", func(string, entry) error { calls++; return boom }); !errors.Is(err, boom) || calls != 1 {
		t.Errorf("walk whose fn fails: %v after %d calls, want it once", err, calls)
	}
}

// TestRetryRespectsCtx: a ctx done during the wait ends the retries at
// once with an error wrapping both the cause and ctx.Err().
func TestRetryRespectsCtx(t *testing.T) {
	fl := newFlaky(t, 1<<30, errFlaky)
	st := newRetryStore(fl, RetryOptions{MaxAttempts: 100, InitialBackoff: time.Hour, MaxBackoff: time.Hour, MaxElapsed: 10 * time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		for fl.count(OpList) == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	start := time.Now()
	_, err := st.list(ctx, "d")
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errFlaky) {
		t.Errorf("list cancelled while waiting to retry: %v", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("the cancelled retry returned after %v", el)
	}
	if n := fl.count(OpList); n != 1 {
		t.Errorf("%d calls after the cancel, want 1", n)
	}
}

// TestRetryWalkOnce: a walk failing partway and retried passes each file
// to fn once.
func TestRetryWalkOnce(t *testing.T) {
	fl := newFlaky(t, 0, nil)
	st := newRetryStore(fl, fastRetry)
	for _, n := range []string{"a", "b", "c", "d"} {
		if _, err := st.put(t.Context(), "w/"+n, func(w io.Writer) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	fl.fail, fl.err = fl.count(OpWalk)+2, errFlaky
	var got []string
	if err := st.walk(t.Context(), "w", func(key string, _ entry) error { got = append(got, key); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"w/a", "w/b", "w/c", "w/d"}; !slices.Equal(got, want) {
		t.Errorf("walk retried twice passed %q, want %q once each", got, want)
	}
}

// TestRetryLockLostAnswer: a lock whose answers were lost is taken by the
// retry as its own (the lock names its taker), another taker still finds
// it held; when the retries give up, the next lock through the same lake
// uses the token again instead of waiting TempMaxAge.
func TestRetryLockLostAnswer(t *testing.T) {
	forEachStore(t, func(t *testing.T, opts Options) {
		clean := mustOpen(t, opts)
		putFile(t, clean, "raw/x/f.parquet", []byte("x"))
		o := opts
		o.Faults = &Faults{Rules: []FaultRule{{Op: OpLock, Kind: FaultLost, Rate: 1}}}
		o.Retry = fastRetry
		lost := mustOpen(t, o)
		if _, err := lost.store.lock(t.Context(), "raw/x", time.Now(), time.Hour); !errors.Is(err, ErrInjected) {
			t.Fatalf("lock with every answer lost: %v", err)
		}
		if _, err := clean.store.lock(t.Context(), "raw/x", time.Now(), time.Hour); !errors.Is(err, errLockHeld) {
			t.Errorf("another taker: %v, want the lock held", err)
		}
		// The answers come back: the lake that lost them takes its lock.
		lost.store.(*retryStore).next.(*faultStore).f.Rules = nil
		unlock, err := lost.store.lock(t.Context(), "raw/x", time.Now(), time.Hour)
		if err != nil {
			t.Fatalf("lock again after the retries gave up: %v, want the lock taken as its own", err)
		}
		unlock()
		unlock, err = clean.store.lock(t.Context(), "raw/x", time.Now(), time.Hour)
		if err != nil {
			t.Fatalf("lock after unlock: %v", err)
		}
		unlock()
	})
}

// TestStorageFailureIsNotBadFile: a read of a file that fails in the
// storage, retries exhausted, is reported as a ReadError wrapping the
// fault, not as a corrupt file, whether it strikes the footer or a row
// group's pages.
func TestStorageFailureIsNotBadFile(t *testing.T) {
	forEachStore(t, func(t *testing.T, opts Options) {
		clean := mustOpen(t, opts)
		if _, err := clean.WriteRaw(t.Context(), topic, 0, 0, 499, genRows(500, 3, 20, 0, 0, 1)); err != nil {
			t.Fatal(err)
		}
		o := opts
		o.Faults = &Faults{Rules: []FaultRule{{Op: OpRead, Kind: FaultError, Rate: 1}}}
		o.Retry = RetryOptions{MaxAttempts: 2, InitialBackoff: time.Millisecond}
		l := mustOpen(t, o)
		q := Query{Topic: topic, From: testStart, To: testStart.Add(3 * time.Hour)}
		_, _, err := l.Aggregate(t.Context(), q, 5*time.Minute)
		var re *ReadError
		if !errors.As(err, &re) || errors.Is(err, ErrBadFile) || !errors.Is(err, ErrInjected) {
			t.Errorf("a query whose reads fail in the storage: %v, want a ReadError wrapping the fault, not ErrBadFile", err)
		}
	})
}
