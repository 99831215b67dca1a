package lake

import (
	"context"
	"fmt"
	"io"

	"reckon/lake/storage"
)

// The methods below let tables the lake does not model itself (Z-reports)
// live in the lake on either storage with the same guarantees. A key is a
// slash-separated path relative to the lake root, e.g.
// "zreports/close_date=2026-11-07/0001-2-v1.parquet".

// WriteFile writes the file key through write, atomically: it becomes
// visible only once write returned nil and the content is durable,
// replacing an earlier file of the same key. It returns the size written.
func (l *Lake) WriteFile(ctx context.Context, key string, write func(w io.Writer) error) (int64, error) {
	if !storage.ValidKey(key) {
		return 0, fmt.Errorf("%w: key %q", ErrBadName, key)
	}
	return l.store.Put(ctx, key, write)
}

// ReadFile returns the content of key; the error wraps fs.ErrNotExist when
// there is no such file.
func (l *Lake) ReadFile(ctx context.Context, key string) ([]byte, error) {
	if !storage.ValidKey(key) {
		return nil, fmt.Errorf("%w: key %q", ErrBadName, key)
	}
	return l.store.ReadFile(ctx, key)
}

// Files returns the names of the visible files directly in dir (a key
// prefix), in name order: none for a directory that does not exist.
// Temporary files of writes in flight are hidden.
func (l *Lake) Files(ctx context.Context, dir string) ([]string, error) {
	if !storage.ValidKey(dir) {
		return nil, fmt.Errorf("%w: directory %q", ErrBadName, dir)
	}
	es, err := l.store.List(ctx, dir)
	if err != nil {
		return nil, err
	}
	return visibleFiles(es, ""), nil
}
