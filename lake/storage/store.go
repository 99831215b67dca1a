package lake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// storage is where a lake keeps its files: a local directory (localStore)
// or a bucket prefix on S3-compatible object storage (s3Store, ADR 0011).
// Keys are slash-separated paths relative to the lake root, the same on
// both ("raw/topic=t/event_date=2026-11-07/event_hour=08/t-0-1-9.parquet");
// a "directory" is a key prefix. Every method is safe for concurrent use
// and honours ctx: once ctx is done it stops (on S3 the request in flight
// is aborted) and returns an error wrapping ctx.Err(), never a partial
// listing or a write reported done that is not.
type storage interface {
	// put makes key hold exactly what write writes, visible to readers and
	// listings only once write returned nil and the content is durable: a
	// failed or interrupted put leaves the previous content (or nothing)
	// under key. It returns the size written.
	put(ctx context.Context, key string, write func(w io.Writer) error) (int64, error)
	// open opens key for random reads. size is the object's size when the
	// caller knows it from a listing, or -1.
	open(ctx context.Context, key string, size int64) (objectReader, error)
	// readFile returns the content of key; an error wrapping
	// fs.ErrNotExist when there is none.
	readFile(ctx context.Context, key string) ([]byte, error)
	// list returns the entries directly under dir (files and
	// subdirectories, hidden names included) in name order. A directory
	// that does not exist is empty.
	list(ctx context.Context, dir string) ([]entry, error)
	// walk calls fn with every file under dir at any depth, in key order,
	// the key relative to the lake root.
	walk(ctx context.Context, dir string, fn func(key string, e entry) error) error
	// remove deletes files of one directory; missing ones are not an error.
	remove(ctx context.Context, dir string, names []string) error
	// lock takes the compaction lock of dir, taking over a lock older than
	// maxAge by now; unlock releases it. A lock held by another fails with
	// an error wrapping errLockHeld. It is lockAs with a new token.
	lock(ctx context.Context, dir string, now time.Time, maxAge time.Duration) (unlock func(), err error)
	// lockAs is lock naming its taker: the lock holds token, and a lock
	// that already holds token is taken as the caller's own, so a call
	// repeated after a lost answer does not wait maxAge for itself.
	lockAs(ctx context.Context, dir, token string, now time.Time, maxAge time.Duration) (unlock func(), err error)
	// removeStale removes what writes that crashed left in dir (temporary
	// files, unfinished multipart uploads) that is older than maxAge by
	// now, and returns their keys.
	removeStale(ctx context.Context, dir string, now time.Time, maxAge time.Duration) ([]string, error)
	// remote reports whether reads cost a network round trip each, so
	// readers should fetch column chunks in few, larger requests.
	remote() bool
}

// entry is one name in a listing.
type entry struct {
	name    string
	dir     bool
	size    int64
	modTime time.Time
	// etag is the object's ETag on S3 (a new one for every write), ""
	// in a directory.
	etag string
}

// objectReader is an open lake file: what parquet.OpenFile needs.
type objectReader interface {
	io.ReaderAt
	io.Closer
	Size() int64
}

// prefetcher is implemented by objectReaders of remote storage: fetch the
// byte ranges [off, off+n) now, in as few requests as reasonable, so the
// ReadAt calls that follow are served from memory.
type prefetcher interface {
	prefetch(ranges []byteRange) error
}

// byteRange is a span of a file.
type byteRange struct{ off, n int64 }

// joinKey joins key elements with "/".
func joinKey(elem ...string) string { return path.Join(elem...) }

// validKey reports whether key names a file under the lake root: relative,
// clean, no "." or ".." elements.
func validKey(key string) bool {
	if key == "" || strings.HasPrefix(key, "/") || strings.Contains(key, "\\") || path.Clean(key) != key {
		return false
	}
	for _, e := range strings.Split(key, "/") {
		if e == "." || e == ".." {
			return false
		}
	}
	return true
}

// localStore keeps the lake in a directory: today's on-disk layout, written
// through writeAtomic (hidden temp file, fsync, rename, directory fsync) so
// existing lakes and DuckDB/Spark globs keep working unchanged. File system
// calls cannot be interrupted, so every method checks ctx before it starts,
// put also at every buffer flush and before its rename, and walk before
// each file: a cancelled call returns an error wrapping ctx.Err() and
// changes nothing more.
type localStore struct {
	root string
}

func (s *localStore) path(key string) string { return filepath.Join(s.root, filepath.FromSlash(key)) }

// ctxErr returns an error wrapping ctx.Err() naming op and key, or nil
// while ctx is live.
func ctxErr(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("lake: %s %s: %w", op, key, err)
	}
	return nil
}

func (s *localStore) put(ctx context.Context, key string, write func(w io.Writer) error) (int64, error) {
	p := s.path(key)
	return writeAtomic(ctx, filepath.Dir(p), filepath.Base(p), write)
}

// localFile is an *os.File with its size: reads go straight to the file.
type localFile struct {
	*os.File
	size int64
}

func (f localFile) Size() int64 { return f.size }

func (s *localStore) open(ctx context.Context, key string, _ int64) (objectReader, error) {
	if err := ctxErr(ctx, "open", key); err != nil {
		return nil, err
	}
	f, err := os.Open(s.path(key))
	if err != nil {
		return nil, fmt.Errorf("lake: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lake: %w", err)
	}
	return localFile{f, st.Size()}, nil
}

func (s *localStore) readFile(ctx context.Context, key string) ([]byte, error) {
	if err := ctxErr(ctx, "read", key); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(s.path(key))
	if err != nil {
		return nil, fmt.Errorf("lake: %w", err)
	}
	return b, nil
}

func (s *localStore) list(ctx context.Context, dir string) ([]entry, error) {
	if err := ctxErr(ctx, "list", dir); err != nil {
		return nil, err
	}
	des, err := os.ReadDir(s.path(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lake: list: %w", err)
	}
	out := make([]entry, 0, len(des))
	for _, d := range des {
		e := entry{name: d.Name(), dir: d.IsDir()}
		if !e.dir {
			info, err := d.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since ReadDir
			}
			if err != nil {
				return nil, fmt.Errorf("lake: list: %w", err)
			}
			e.size, e.modTime = info.Size(), info.ModTime()
		}
		out = append(out, e)
	}
	return out, nil
}

func (s *localStore) walk(ctx context.Context, dir string, fn func(key string, e entry) error) error {
	base := s.path(dir)
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if err != nil {
			if p == base && errors.Is(err, fs.ErrNotExist) {
				return filepath.SkipDir
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		return fn(filepath.ToSlash(rel), entry{name: d.Name(), size: info.Size(), modTime: info.ModTime()})
	})
	if err != nil {
		return fmt.Errorf("lake: walk %s: %w", dir, err)
	}
	return nil
}

func (s *localStore) remove(ctx context.Context, dir string, names []string) error {
	if err := ctxErr(ctx, "remove in", dir); err != nil {
		return err
	}
	return removeSync(s.path(dir), names)
}

// lockName is the hidden lock file of a compaction.
const lockName = ".compact.lock"

// errLockHeld is what lock fails with when another taker holds the lock.
var errLockHeld = errors.New("another compaction holds " + lockName)

// lockBody is the content of a lock taken by token at now.
func lockBody(token string, now time.Time) []byte {
	return []byte("compaction lock taken at " + now.UTC().Format(time.RFC3339Nano) + " by " + token + "\n")
}

// ownsLock reports whether the lock content b names token as its taker.
func ownsLock(b []byte, token string) bool {
	return token != "" && strings.HasSuffix(string(b), " by "+token+"\n")
}

func (s *localStore) lock(ctx context.Context, dir string, now time.Time, maxAge time.Duration) (func(), error) {
	return s.lockAs(ctx, dir, newLockToken(), now, maxAge)
}

func (s *localStore) lockAs(ctx context.Context, dir, token string, now time.Time, maxAge time.Duration) (func(), error) {
	if err := ctxErr(ctx, "compact", dir); err != nil {
		return nil, err
	}
	p := filepath.Join(s.path(dir), lockName)
	unlock := func() { os.Remove(p) }
	for attempt := 0; ; attempt++ {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			_, err := f.Write(lockBody(token, now))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				// A lock nobody can recognise would hold for maxAge.
				os.Remove(p)
				return nil, fmt.Errorf("lake: compact %s: lock: %w", dir, err)
			}
			return unlock, nil
		}
		if !errors.Is(err, os.ErrExist) || attempt > 0 {
			return nil, fmt.Errorf("lake: compact %s: lock: %w", dir, err)
		}
		if b, err := os.ReadFile(p); err == nil && ownsLock(b, token) {
			return unlock, nil // taken by an earlier call whose answer was lost
		}
		st, serr := os.Stat(p)
		if serr != nil || now.Sub(st.ModTime()) < maxAge {
			return nil, fmt.Errorf("lake: compact %s: %w", dir, errLockHeld)
		}
		os.Remove(p)
	}
}

func (s *localStore) removeStale(ctx context.Context, dir string, now time.Time, maxAge time.Duration) ([]string, error) {
	es, err := s.list(ctx, dir) // checks ctx
	if err != nil {
		return nil, err
	}
	var names, gone []string
	for _, e := range es {
		if e.dir || !isTemp(e.name) || now.Sub(e.modTime) < maxAge {
			continue
		}
		names = append(names, e.name)
		gone = append(gone, joinKey(dir, e.name))
	}
	return gone, removeSync(s.path(dir), names)
}

func (s *localStore) remote() bool { return false }

// visibleFiles returns the names of the visible files in es with suffix,
// in name order.
func visibleFiles(es []entry, suffix string) []string {
	var out []string
	for _, e := range es {
		if !e.dir && !hidden(e.name) && strings.HasSuffix(e.name, suffix) {
			out = append(out, e.name)
		}
	}
	slices.Sort(out)
	return out
}
