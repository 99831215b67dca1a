package lake

import (
	"errors"
	"path/filepath"

	"golang.org/x/sys/unix"
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
	return errors.Join(syncDir(filepath.Dir(a)), syncDir(filepath.Dir(b)))
}
