package storage

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
	Store
	fail int
	err  error

	mu    sync.Mutex // protects the following field
	calls map[Op]int
}

func newFlaky(t *testing.T, fail int, err error) *flakyStore {
	return &flakyStore{Store: &Local{root: t.TempDir()}, fail: fail, err: err, calls: map[Op]int{}}
}

// call counts a call of op and returns the error it must fail with.
func (s *flakyStore) call(op Op) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[op]++
	if s.calls[op] <= s.fail {
		return fmt.Errorf("flaky %s call %d: %w", op, s.calls[op], s.err)
	}
	return nil
}

func (s *flakyStore) count(op Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

func (s *flakyStore) Put(ctx context.Context, key string, write func(w io.Writer) error) (int64, error) {
	if err := s.call(OpPut); err != nil {
		// Like a write that fails partway: write ran, nothing landed.
		s.Store.Put(ctx, key, func(w io.Writer) error { write(w); return err })
		return 0, err
	}
	return s.Store.Put(ctx, key, write)
}

func (s *flakyStore) Open(ctx context.Context, key string, size int64) (ObjectReader, error) {
	if err := s.call(OpOpen); err != nil {
		return nil, err
	}
	r, err := s.Store.Open(ctx, key, size)
	if err != nil {
		return nil, err
	}
	return flakyReader{r, s}, nil
}

type flakyReader struct {
	ObjectReader
	s *flakyStore
}

func (r flakyReader) ReadAt(p []byte, off int64) (int, error) {
	if err := r.s.call(OpRead); err != nil {
		return 0, err
	}
	return r.ObjectReader.ReadAt(p, off)
}

func (s *flakyStore) ReadFile(ctx context.Context, key string) ([]byte, error) {
	if err := s.call(OpReadFile); err != nil {
		return nil, err
	}
	return s.Store.ReadFile(ctx, key)
}

func (s *flakyStore) List(ctx context.Context, dir string) ([]Entry, error) {
	if err := s.call(OpList); err != nil {
		return nil, err
	}
	return s.Store.List(ctx, dir)
}

// walk fails after passing the first file, as a paged listing can.
func (s *flakyStore) Walk(ctx context.Context, dir string, fn func(key string, e Entry) error) error {
	err := s.call(OpWalk)
	first := true
	werr := s.Store.Walk(ctx, dir, func(key string, e Entry) error {
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

func (s *flakyStore) Remove(ctx context.Context, dir string, names []string) error {
	if err := s.call(OpRemove); err != nil {
		return err
	}
	return s.Store.Remove(ctx, dir, names)
}

// lockAs loses its answers: the lock is taken, the caller sees err.
func (s *flakyStore) LockAs(ctx context.Context, dir, token string, now time.Time, maxAge time.Duration) (func(), error) {
	unlock, lerr := s.Store.LockAs(ctx, dir, token, now, maxAge)
	if err := s.call(OpLock); err != nil && lerr == nil {
		return nil, err
	}
	return unlock, lerr
}

func (s *flakyStore) RemoveStale(ctx context.Context, dir string, now time.Time, maxAge time.Duration) ([]string, error) {
	if err := s.call(OpRemoveStale); err != nil {
		return nil, err
	}
	return s.Store.RemoveStale(ctx, dir, now, maxAge)
}

var errFlaky = errors.New("flaky storage")

// storageOps runs one call of every storage operation through st and
// returns the error of each.
func storageOps(t *testing.T, ctx context.Context, st Store) map[Op]error {
	t.Helper()
	errs := map[Op]error{}
	_, errs[OpPut] = st.Put(ctx, "d/f.bin", func(w io.Writer) error { _, err := w.Write([]byte("content")); return err })
	_, errs[OpReadFile] = st.ReadFile(ctx, "d/f.bin")
	_, errs[OpList] = st.List(ctx, "d")
	if r, err := st.Open(ctx, "d/f.bin", -1); err != nil {
		errs[OpOpen] = err
	} else {
		var b [4]byte
		_, errs[OpRead] = r.ReadAt(b[:], 1)
		r.Close()
	}
	errs[OpWalk] = st.Walk(ctx, "d", func(string, Entry) error { return nil })
	errs[OpRemoveStale] = func() error { _, err := st.RemoveStale(ctx, "d", time.Now(), time.Hour); return err }()
	if unlock, err := st.Lock(ctx, "d", time.Now(), time.Hour); err != nil {
		errs[OpLock] = err
	} else {
		unlock()
	}
	errs[OpRemove] = st.Remove(ctx, "d", []string{"f.bin"})
	return errs
}

func statsOf(st *Retry, op Op) OpStats {
	return st.Stats()[opIndex(op)]
}

// TestRetryEveryOp: each operation failing twice is retried to success,
// and the counters say so.
func TestRetryEveryOp(t *testing.T) {
	fl := newFlaky(t, 2, errFlaky)
	st := NewRetry(fl, fastRetry)
	for op, err := range storageOps(t, t.Context(), st) {
		if err != nil {
			t.Errorf("%s failing twice, retried: %v", op, err)
		}
	}
	// The counters are the store's own: nothing else moved them.
	after := st.Stats()
	for i, op := range Ops {
		if got := fl.count(op); got != 3 {
			t.Errorf("%s: %d calls, want 3 (two failures and a success)", op, got)
		}
		if d := after[i].Retries; d != 2 {
			t.Errorf("%s: retries counter %d, want 2", op, d)
		}
		if d := after[i].Recovered; d != 1 {
			t.Errorf("%s: recovered counter %d, want 1", op, d)
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
	st := NewRetry(fl, o)
	before := statsOf(st, OpList)
	_, err := st.List(t.Context(), "d")
	if !errors.Is(err, errFlaky) || !strings.Contains(err.Error(), "gave up after 4 attempts") {
		t.Errorf("list always failing: %v, want it to give up after 4 attempts wrapping the cause", err)
	}
	if got := fl.count(OpList); got != 4 {
		t.Errorf("list always failing: %d calls, want 4", got)
	}
	if d := statsOf(st, OpList).GaveUp - before.GaveUp; d != 1 {
		t.Errorf("give-up counter moved by %d", d)
	}

	fl = newFlaky(t, 1<<30, errFlaky)
	st = NewRetry(fl, RetryOptions{MaxAttempts: 1000, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, MaxElapsed: 100 * time.Millisecond})
	start := time.Now()
	if _, err := st.ReadFile(t.Context(), "d/f"); !errors.Is(err, errFlaky) {
		t.Errorf("readFile always failing: %v", err)
	}
	if el, n := time.Since(start), fl.count(OpReadFile); n > 15 || el > 2*time.Second {
		t.Errorf("a 100ms budget made %d calls in %v", n, el)
	}

	fl = newFlaky(t, 1<<30, errFlaky)
	st = NewRetry(fl, RetryOptions{MaxAttempts: 1})
	if _, err := st.ReadFile(t.Context(), "d/f"); !errors.Is(err, errFlaky) || fl.count(OpReadFile) != 1 {
		t.Errorf("MaxAttempts 1: %v after %d calls, want the error after one", err, fl.count(OpReadFile))
	}
}

// TestRetryNotPermanent: permanent failures, a missing file, a lock
// another holds and the caller's own errors are not retried.
func TestRetryNotPermanent(t *testing.T) {
	for _, cause := range []error{fs.ErrPermission, fs.ErrNotExist, ErrBadFile, ErrLockHeld, context.Canceled} {
		fl := newFlaky(t, 1<<30, cause)
		if _, err := fl.Store.Put(t.Context(), "d/f.bin", func(w io.Writer) error { return nil }); err != nil {
			t.Fatal(err)
		}
		st := NewRetry(fl, fastRetry)
		for op, err := range storageOps(t, t.Context(), st) {
			if !errors.Is(err, cause) {
				t.Errorf("%s failing with %v: %v", op, cause, err)
			}
		}
		for _, op := range Ops {
			if n := fl.count(op); n > 1 {
				t.Errorf("%s failing with %v was called %d times, want once", op, cause, n)
			}
		}
	}

	fl := newFlaky(t, 0, nil)
	st := NewRetry(fl, fastRetry)
	boom := errors.New("encoder failed")
	calls := 0
	if _, err := st.Put(t.Context(), "d/x", func(w io.Writer) error { calls++; w.Write([]byte("x")); return boom }); !errors.Is(err, boom) || calls != 1 {
		t.Errorf("put whose write func fails: %v after %d calls, want it once", err, calls)
	}
	st.Put(t.Context(), "d/a", func(w io.Writer) error { return nil })
	st.Put(t.Context(), "d/b", func(w io.Writer) error { return nil })
	calls = 0
	if err := st.Walk(t.Context(), "d", func(string, Entry) error { calls++; return boom }); !errors.Is(err, boom) || calls != 1 {
		t.Errorf("walk whose fn fails: %v after %d calls, want it once", err, calls)
	}
}

// TestRetryRespectsCtx: a ctx done during the wait ends the retries at
// once with an error wrapping both the cause and ctx.Err().
func TestRetryRespectsCtx(t *testing.T) {
	fl := newFlaky(t, 1<<30, errFlaky)
	st := NewRetry(fl, RetryOptions{MaxAttempts: 100, InitialBackoff: time.Hour, MaxBackoff: time.Hour, MaxElapsed: 10 * time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		for fl.count(OpList) == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	start := time.Now()
	_, err := st.List(ctx, "d")
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
	st := NewRetry(fl, fastRetry)
	for _, n := range []string{"a", "b", "c", "d"} {
		if _, err := st.Put(t.Context(), "w/"+n, func(w io.Writer) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	fl.fail, fl.err = fl.count(OpWalk)+2, errFlaky
	var got []string
	if err := st.Walk(t.Context(), "w", func(key string, _ Entry) error { got = append(got, key); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"w/a", "w/b", "w/c", "w/d"}; !slices.Equal(got, want) {
		t.Errorf("walk retried twice passed %q, want %q once each", got, want)
	}
}

var fastRetry = RetryOptions{InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}
