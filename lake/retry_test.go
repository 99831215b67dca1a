package lake

import (
	"errors"
	"testing"
	"time"

	"reckon/lake/storage"
	"reckon/lake/storage/errorfs"
)

// TestRetryLockLostAnswer: a lock whose answers were lost is taken by the
// retry as its own (the lock names its taker), another taker still finds
// it held; when the retries give up, the next lock through the same lake
// uses the token again instead of waiting TempMaxAge.
func TestRetryLockLostAnswer(t *testing.T) {
	forEachStore(t, func(t *testing.T, opts Options) {
		clean := mustOpen(t, opts)
		putFile(t, clean, "raw/x/f.parquet", []byte("x"))
		o := opts
		var faults *errorfs.Store
		o.Wrap = func(next storage.Store) storage.Store {
			faults = errorfs.New(next, errorfs.Faults{Rules: []errorfs.FaultRule{{Op: storage.OpLock, Kind: errorfs.FaultLost, Rate: 1}}})
			return faults
		}
		o.Retry = fastRetry
		lost := mustOpen(t, o)
		if _, err := lost.store.Lock(t.Context(), "raw/x", time.Now(), time.Hour); !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("lock with every answer lost: %v", err)
		}
		if _, err := clean.store.Lock(t.Context(), "raw/x", time.Now(), time.Hour); !errors.Is(err, storage.ErrLockHeld) {
			t.Errorf("another taker: %v, want the lock held", err)
		}
		// The answers come back: the lake that lost them takes its lock.
		faults.SetRules(nil)
		unlock, err := lost.store.Lock(t.Context(), "raw/x", time.Now(), time.Hour)
		if err != nil {
			t.Fatalf("lock again after the retries gave up: %v, want the lock taken as its own", err)
		}
		unlock()
		unlock, err = clean.store.Lock(t.Context(), "raw/x", time.Now(), time.Hour)
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
		o.Wrap = (&errorfs.Faults{Rules: []errorfs.FaultRule{{Op: storage.OpRead, Kind: errorfs.FaultError, Rate: 1}}}).Wrap
		o.Retry = storage.RetryOptions{MaxAttempts: 2, InitialBackoff: time.Millisecond}
		l := mustOpen(t, o)
		q := Query{Topic: topic, From: testStart, To: testStart.Add(3 * time.Hour)}
		_, _, err := l.Aggregate(t.Context(), q, 5*time.Minute)
		var re *storage.ReadError
		if !errors.As(err, &re) || errors.Is(err, ErrBadFile) || !errors.Is(err, errorfs.ErrInjected) {
			t.Errorf("a query whose reads fail in the storage: %v, want a ReadError wrapping the fault, not ErrBadFile", err)
		}
	})
}
