package lake

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"reckon/lake/storage"
)

// exchangeDirs swaps the directories a and b in one atomic rename, then
// syncs their parents: a reader opening b sees all of its old content or
// all of a's. A file system without RENAME_EXCHANGE gives errNoExchange.
func exchangeDirs(a, b string) error {
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
		return errNoExchange
	}
	if err != nil {
		return err
	}
	return errors.Join(storage.SyncDir(filepath.Dir(a)), storage.SyncDir(filepath.Dir(b)))
}

// lockMirror takes an exclusive flock on the file p, polling until ctx is
// done; unlock releases it.
func lockMirror(ctx context.Context, p string) (unlock func(), err error) {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, err
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}
