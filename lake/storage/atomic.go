package storage

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// WriteFileAtomic is writeAtomic for other tables kept in a lake on a local
// directory (e.g. Z-reports): the same hidden temp name, fsync, rename,
// directory fsync. Lake.WriteFile does the same on any storage.
func WriteFileAtomic(ctx context.Context, dir, name string, write func(w io.Writer) error) (int64, error) {
	return WriteAtomic(ctx, dir, name, write)
}

// writeAtomic writes dir/name through write: to a hidden temporary file in
// dir, fsynced, renamed over dir/name, then dir fsynced so the rename is
// durable. Concurrent writers of the same name each use their own temporary
// file; the last rename wins, which is harmless because a name always
// denotes the same content. It returns the file size.
//
// ctx is checked before the file is created, at every flush of the write
// buffer and before the rename: a cancelled write stops there, removes its
// temporary file and leaves dir/name as it was.
func WriteAtomic(ctx context.Context, dir, name string, write func(w io.Writer) error) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("lake: write %s: %w", filepath.Join(dir, name), err)
	}
	if err := MkdirAllSync(dir); err != nil {
		return 0, err
	}
	f, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return 0, fmt.Errorf("lake: create temp for %s: %w", name, err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(ctxWriter{ctx, f}, 1<<20)
	if err := write(bw); err != nil {
		return 0, fmt.Errorf("lake: write %s: %w", filepath.Join(dir, name), err)
	}
	if err := bw.Flush(); err != nil {
		return 0, fmt.Errorf("lake: write %s: %w", filepath.Join(dir, name), err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("lake: fsync %s: %w", tmp, err)
	}
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("lake: stat %s: %w", tmp, err)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("lake: write %s: %w", filepath.Join(dir, name), err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("lake: close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return 0, fmt.Errorf("lake: rename into %s: %w", filepath.Join(dir, name), err)
	}
	ok = true
	if err := SyncDir(dir); err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// ctxWriter fails writes once ctx is done, so a long write stops at its
// next buffer flush.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// RemoveSync removes files (base names) from dir and fsyncs dir once.
// Missing files are not an error: removal is idempotent.
func RemoveSync(dir string, names []string) error {
	if len(names) == 0 {
		return nil
	}
	var errs []error
	for _, n := range names {
		if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("lake: remove: %w", err))
		}
	}
	if err := SyncDir(dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// SyncDir fsyncs a directory so renames and removals in it survive a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("lake: open dir for fsync: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("lake: fsync dir %s: %w", dir, err)
	}
	return nil
}

// MkdirAllSync creates dir and its missing parents, fsyncing the parent of
// every directory it creates so the new entries survive a crash.
func MkdirAllSync(dir string) error {
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() {
			return fmt.Errorf("lake: %s is not a directory", dir)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := MkdirAllSync(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil
		}
		return fmt.Errorf("lake: mkdir: %w", err)
	}
	return SyncDir(parent)
}

// isTemp reports whether name is one of writeAtomic's temporary files.
func IsTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp")
}
