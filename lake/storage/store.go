package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
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
type Store interface {
	// put makes key hold exactly what write writes, visible to readers and
	// listings only once write returned nil and the content is durable: a
	// failed or interrupted put leaves the previous content (or nothing)
	// under key. It returns the size written.
	Put(ctx context.Context, key string, write func(w io.Writer) error) (int64, error)
	// open opens key for random reads. size is the object's size when the
	// caller knows it from a listing, or -1.
	Open(ctx context.Context, key string, size int64) (ObjectReader, error)
	// readFile returns the content of key; an error wrapping
	// fs.ErrNotExist when there is none.
	ReadFile(ctx context.Context, key string) ([]byte, error)
	// list returns the entries directly under dir (files and
	// subdirectories, hidden names included) in name order. A directory
	// that does not exist is empty.
	List(ctx context.Context, dir string) ([]Entry, error)
	// walk calls fn with every file under dir at any depth, in key order,
	// the key relative to the lake root.
	Walk(ctx context.Context, dir string, fn func(key string, e Entry) error) error
	// remove deletes files of one directory; missing ones are not an error.
	Remove(ctx context.Context, dir string, names []string) error
	// lock takes the compaction lock of dir, taking over a lock older than
	// maxAge by now; unlock releases it. A lock held by another fails with
	// an error wrapping errLockHeld. It is lockAs with a new token.
	Lock(ctx context.Context, dir string, now time.Time, maxAge time.Duration) (unlock func(), err error)
	// lockAs is lock naming its taker: the lock holds token, and a lock
	// that already holds token is taken as the caller's own, so a call
	// repeated after a lost answer does not wait maxAge for itself.
	LockAs(ctx context.Context, dir, token string, now time.Time, maxAge time.Duration) (unlock func(), err error)
	// removeStale removes what writes that crashed left in dir (temporary
	// files, unfinished multipart uploads) that is older than maxAge by
	// now, and returns their keys.
	RemoveStale(ctx context.Context, dir string, now time.Time, maxAge time.Duration) ([]string, error)
	// remote reports whether reads cost a network round trip each, so
	// readers should fetch column chunks in few, larger requests.
	Remote() bool
}

// Errors a Store returns, re-exported by package lake (lake.ErrBadFile,
// lake.ErrBadName): a retry never repeats a call that failed with one.
var (
	// ErrBadFile marks a file that cannot be decoded or changed while it
	// was being read.
	ErrBadFile = errors.New("lake: bad file")
	// ErrBadName marks a key or name outside the lake's rules.
	ErrBadName = errors.New("lake: bad name")
)

// Op names a storage operation: what a retry counter counts and what an
// injected fault (lake/storage/errorfs) applies to.
type Op string

// The storage operations.
const (
	OpPut         Op = "put"          // writing a file: raw, panes, truth, progress, reports, Z-reports, compaction output
	OpOpen        Op = "open"         // opening a file for reads (on S3 its footer GET)
	OpRead        Op = "read"         // a ranged read of an open file (ReadAt, prefetch)
	OpReadFile    Op = "read_file"    // reading a whole small file (progress, reports, Z-reports)
	OpList        Op = "list"         // listing one directory
	OpWalk        Op = "walk"         // listing a tree
	OpRemove      Op = "remove"       // deleting files (superseded, compacted)
	OpLock        Op = "lock"         // the compaction lock: an exclusive create, on S3 a conditional PUT
	OpRemoveStale Op = "remove_stale" // sweeping crashed writes' debris
)

// Ops is every Op.
var Ops = []Op{OpPut, OpOpen, OpRead, OpReadFile, OpList, OpWalk, OpRemove, OpLock, OpRemoveStale}

// entry is one name in a listing.
type Entry struct {
	Name    string
	Dir     bool
	Size    int64
	ModTime time.Time
	// etag is the object's ETag on S3 (a new one for every write), ""
	// in a directory.
	ETag string
}

// objectReader is an open lake file: what parquet.OpenFile needs.
type ObjectReader interface {
	io.ReaderAt
	io.Closer
	Size() int64
}

// prefetcher is implemented by objectReaders of remote storage: fetch the
// byte ranges [off, off+n) now, in as few requests as reasonable, so the
// ReadAt calls that follow are served from memory.
type Prefetcher interface {
	Prefetch(ranges []ByteRange) error
}

// byteRange is a span of a file.
type ByteRange struct{ Off, N int64 }

// joinKey joins key elements with "/".
func JoinKey(elem ...string) string { return path.Join(elem...) }

// validKey reports whether key names a file under the lake root: relative,
// clean, no "." or ".." elements.
func ValidKey(key string) bool {
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
type Local struct {
	root string
}

// NewLocal returns the storage of a lake in the directory root.
func NewLocal(root string) *Local { return &Local{root: root} }

// Root returns the directory.
func (s *Local) Root() string { return s.root }

// Path returns the file of key.
func (s *Local) Path(key string) string { return filepath.Join(s.root, filepath.FromSlash(key)) }

// ctxErr returns an error wrapping ctx.Err() naming op and key, or nil
// while ctx is live.
func ctxErr(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("lake: %s %s: %w", op, key, err)
	}
	return nil
}

func (s *Local) Put(ctx context.Context, key string, write func(w io.Writer) error) (int64, error) {
	p := s.Path(key)
	return WriteAtomic(ctx, filepath.Dir(p), filepath.Base(p), write)
}

// localFile is an *os.File with its size: reads go straight to the file.
type localFile struct {
	*os.File
	size int64
}

func (f localFile) Size() int64 { return f.size }

func (s *Local) Open(ctx context.Context, key string, _ int64) (ObjectReader, error) {
	if err := ctxErr(ctx, "open", key); err != nil {
		return nil, err
	}
	f, err := os.Open(s.Path(key))
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

func (s *Local) ReadFile(ctx context.Context, key string) ([]byte, error) {
	if err := ctxErr(ctx, "read", key); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(s.Path(key))
	if err != nil {
		return nil, fmt.Errorf("lake: %w", err)
	}
	return b, nil
}

func (s *Local) List(ctx context.Context, dir string) ([]Entry, error) {
	if err := ctxErr(ctx, "list", dir); err != nil {
		return nil, err
	}
	des, err := os.ReadDir(s.Path(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lake: list: %w", err)
	}
	out := make([]Entry, 0, len(des))
	for _, d := range des {
		e := Entry{Name: d.Name(), Dir: d.IsDir()}
		if !e.Dir {
			info, err := d.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since ReadDir
			}
			if err != nil {
				return nil, fmt.Errorf("lake: list: %w", err)
			}
			e.Size, e.ModTime = info.Size(), info.ModTime()
		}
		out = append(out, e)
	}
	return out, nil
}

func (s *Local) Walk(ctx context.Context, dir string, fn func(key string, e Entry) error) error {
	base := s.Path(dir)
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
		return fn(filepath.ToSlash(rel), Entry{Name: d.Name(), Size: info.Size(), ModTime: info.ModTime()})
	})
	if err != nil {
		return fmt.Errorf("lake: walk %s: %w", dir, err)
	}
	return nil
}

func (s *Local) Remove(ctx context.Context, dir string, names []string) error {
	if err := ctxErr(ctx, "remove in", dir); err != nil {
		return err
	}
	return RemoveSync(s.Path(dir), names)
}

// lockName is the hidden lock file of a compaction.
const LockName = ".compact.lock"

// errLockHeld is what lock fails with when another taker holds the lock.
var ErrLockHeld = errors.New("another compaction holds " + LockName)

// lockBody is the content of a lock taken by token at now.
func lockBody(token string, now time.Time) []byte {
	return []byte("compaction lock taken at " + now.UTC().Format(time.RFC3339Nano) + " by " + token + "\n")
}

// ownsLock reports whether the lock content b names token as its taker.
func ownsLock(b []byte, token string) bool {
	return token != "" && strings.HasSuffix(string(b), " by "+token+"\n")
}

func (s *Local) Lock(ctx context.Context, dir string, now time.Time, maxAge time.Duration) (func(), error) {
	return s.LockAs(ctx, dir, NewLockToken(), now, maxAge)
}

func (s *Local) LockAs(ctx context.Context, dir, token string, now time.Time, maxAge time.Duration) (func(), error) {
	if err := ctxErr(ctx, "compact", dir); err != nil {
		return nil, err
	}
	p := filepath.Join(s.Path(dir), LockName)
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
			return nil, fmt.Errorf("lake: compact %s: %w", dir, ErrLockHeld)
		}
		os.Remove(p)
	}
}

func (s *Local) RemoveStale(ctx context.Context, dir string, now time.Time, maxAge time.Duration) ([]string, error) {
	es, err := s.List(ctx, dir) // checks ctx
	if err != nil {
		return nil, err
	}
	var names, gone []string
	for _, e := range es {
		if e.Dir || !IsTemp(e.Name) || now.Sub(e.ModTime) < maxAge {
			continue
		}
		names = append(names, e.Name)
		gone = append(gone, JoinKey(dir, e.Name))
	}
	return gone, RemoveSync(s.Path(dir), names)
}

func (s *Local) Remote() bool { return false }
