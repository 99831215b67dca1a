package lake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"reckon/lake/storage"
)

// MirrorTmpDir is the hidden directory under a mirror's root where Mirror
// builds what it puts in place: downloads in flight and directories being
// replaced. It is outside every table's directory, so no glob over a
// table (raw/**/*.parquet) matches a file in it.
const MirrorTmpDir = ".mirror-tmp"

// MirrorLockFile, under a mirror's root, serialises Mirror passes.
const MirrorLockFile = ".mirror.lock"

// mirrorETags, in each directory of a mirror of S3, lists the ETag of
// each file ("name\tetag" lines): S3 gives modification times to the
// second, and a curated file rewritten within a second at the same size
// must still be seen as changed.
const mirrorETags = ".mirror-etags"

// MirrorResult reports one Mirror pass.
type MirrorResult struct {
	// Files and Bytes are the visible .parquet files the mirror holds
	// after the pass, and their size.
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	// Downloaded and DownloadedBytes count the files fetched from the lake
	// (new or changed ones); Removed the files deleted from the mirror
	// because the lake no longer has them (compaction inputs, replaced
	// curated files).
	Downloaded      int   `json:"downloaded"`
	DownloadedBytes int64 `json:"downloaded_bytes"`
	Removed         int   `json:"removed"`
	// Dirs counts the directories put in place, replaced or removed.
	Dirs int `json:"dirs"`
	// Relisted counts directories listed again because a file listed was
	// gone (or replaced) when downloaded: a compaction finished meanwhile.
	Relisted int `json:"relisted"`
}

// Mirror makes the local directory root a copy of the visible .parquet
// files under the lake's directories tables (e.g. "raw", "summaries"), as
// they are now: it downloads new and changed files (a file is unchanged
// when its size, modification time and, on S3, ETag are the lake's;
// Mirror sets the time on the copies and keeps the ETags beside them) and
// deletes those the lake no longer has; up to mirrorParallel directories
// at once. Other directories of root are left alone. A file listed but
// gone when downloaded (a compaction deleted it) is not an error: its
// directory is listed again, as the reader does (TestReadRacesCompaction).
//
// Consistency: each directory of files — a raw hour, a day of a pane or
// curated table — changes as a unit, from one listing of the lake to a
// later one, never through a mix. The new content is built in
// MirrorTmpDir (unchanged files hard-linked, new ones downloaded, synced)
// and swapped with the old directory in one atomic rename (on Linux
// renameat2 RENAME_EXCHANGE). A compaction writes its outputs before it
// deletes its inputs (docs/adr/0018-continuous-compaction.md), so every
// listing holds all of its inputs or all of its outputs, and so does the
// mirror's directory at every instant: a query sees what a reader of the
// lake could have seen, never a compaction's inputs half gone without its
// outputs. Elsewhere (other systems, or a directory holding
// subdirectories too) new files are renamed in first and removed ones
// deleted after, which can show inputs and outputs together (as the lake
// itself does during a compaction) but never neither.
//
// A partial download is never visible: it is written in MirrorTmpDir,
// synced, and renamed into place. Debris of a killed pass is removed by
// the next. Passes on one root, in this process or others, run one at a
// time (a lock file, MirrorLockFile, on Linux; elsewhere they must not
// overlap).
func (l *Lake) Mirror(ctx context.Context, root string, tables []string) (MirrorResult, error) {
	var res MirrorResult
	root = filepath.Clean(root)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return res, fmt.Errorf("lake: mirror: %w", err)
	}
	unlock, err := lockMirror(ctx, filepath.Join(root, MirrorLockFile))
	if err != nil {
		return res, fmt.Errorf("lake: mirror: lock: %w", err)
	}
	defer unlock()
	tmp := filepath.Join(root, MirrorTmpDir)
	if err := os.RemoveAll(tmp); err != nil {
		return res, fmt.Errorf("lake: mirror: %w", err)
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return res, fmt.Errorf("lake: mirror: %w", err)
	}
	m := &mirror{l: l, root: root, tmp: tmp, res: &res}
	for _, t := range tables {
		if !storage.ValidKey(t) {
			return res, fmt.Errorf("lake: mirror: table directory %q", t)
		}
		if err := m.table(ctx, t); err != nil {
			return res, err
		}
	}
	return res, nil
}

// mirror is one Mirror pass.
type mirror struct {
	l    *Lake
	root string // the mirror's directory
	tmp  string // root/MirrorTmpDir

	mu  sync.Mutex // protects res: directories are synced in parallel
	res *MirrorResult
}

// mirrored reports whether the lake file key belongs in a mirror: a
// .parquet file with no hidden element on its path (temporary files,
// locks, _progress).
func mirrored(key string) bool {
	if !storage.ValidKey(key) || !strings.HasSuffix(key, ".parquet") {
		return false
	}
	for _, e := range strings.Split(key, "/") {
		if hidden(e) {
			return false
		}
	}
	return true
}

// table mirrors the lake directory t.
func (m *mirror) table(ctx context.Context, t string) error {
	remote := map[string][]storage.Entry{}
	if err := m.l.store.Walk(ctx, t, func(key string, e storage.Entry) error {
		if mirrored(key) {
			d := path.Dir(key)
			remote[d] = append(remote[d], e)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("lake: mirror: %w", err)
	}
	local, err := localFiles(m.root, t)
	if err != nil {
		return err
	}
	var changed []string
	for d, files := range remote {
		if !sameFiles(files, local[d]) {
			changed = append(changed, d)
		}
	}
	slices.Sort(changed)
	synced := make([][]storage.Entry, len(changed))
	err = forEach(ctx, len(changed), mirrorParallel, func(ctx context.Context, i int) (err error) {
		synced[i], err = m.syncDir(ctx, changed[i], remote[changed[i]])
		return err
	})
	if err != nil {
		return err
	}
	for i, d := range changed {
		remote[d] = synced[i]
	}
	m.mu.Lock()
	for _, files := range remote {
		for _, f := range files {
			m.res.Files++
			m.res.Bytes += f.Size
		}
	}
	m.mu.Unlock()
	for d, files := range local {
		if _, ok := remote[d]; !ok {
			if err := m.removeDir(d, len(files)); err != nil {
				return err
			}
		}
	}
	return nil
}

// mirrorParallel is how many directories a Mirror pass syncs at once:
// round trips to S3 overlap, and at most this many downloads hold their
// read-ahead (mirrorChunk × the reader's segments) in memory.
const mirrorParallel = 4

// forEach calls fn(ctx, i) for i in [0, n), at most limit at a time, and
// returns the first error; the calls not started by then are not made and
// those running see ctx done.
func forEach(ctx context.Context, n, limit int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		next  atomic.Int64
		once  sync.Once
		first error
	)
	for range min(limit, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("lake: mirror: %w", err)
		}
	}
	return first
}

// localFiles returns the visible .parquet files under root/t, by
// directory key.
func localFiles(root, t string) (map[string][]storage.Entry, error) {
	out := map[string][]storage.Entry{}
	base := filepath.Join(root, filepath.FromSlash(t))
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == base && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipDir
			}
			return err
		}
		if p != base && hidden(d.Name()) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), ".parquet") {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		k := filepath.ToSlash(rel)
		out[k] = append(out[k], storage.Entry{Name: d.Name(), Size: info.Size(), ModTime: info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lake: mirror: %w", err)
	}
	for k, es := range out {
		etags, err := readETags(filepath.Join(root, filepath.FromSlash(k)))
		if err != nil {
			return nil, err
		}
		for i := range es {
			es[i].ETag = etags[es[i].Name]
		}
	}
	return out, nil
}

// readETags reads the mirrorETags file of the mirror's directory dir;
// none is an empty map.
func readETags(dir string) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, mirrorETags))
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lake: mirror: %w", err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if name, etag, ok := strings.Cut(line, "\t"); ok {
			out[name] = etag
		}
	}
	return out, nil
}

// writeETags writes the mirrorETags file of files into dir, synced, when
// they have ETags.
func writeETags(dir string, files []storage.Entry) error {
	var b strings.Builder
	for _, f := range files {
		if f.ETag != "" {
			b.WriteString(f.Name + "\t" + f.ETag + "\n")
		}
	}
	if b.Len() == 0 {
		return nil
	}
	f, err := os.Create(filepath.Join(dir, mirrorETags))
	if err != nil {
		return err
	}
	_, err = f.WriteString(b.String())
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// sameFiles reports whether two listings of a directory name the same
// files with the same sizes and modification times.
func sameFiles(a, b []storage.Entry) bool {
	if len(a) != len(b) {
		return false
	}
	byName := make(map[string]storage.Entry, len(b))
	for _, e := range b {
		byName[e.Name] = e
	}
	for _, e := range a {
		o, ok := byName[e.Name]
		if !ok || o.Size != e.Size || !o.ModTime.Equal(e.ModTime) || o.ETag != e.ETag {
			return false
		}
	}
	return true
}

// syncDir makes the mirror's directory d hold files, listing d again when
// a file is gone from the lake before it is downloaded. It returns the
// files the directory holds.
func (m *mirror) syncDir(ctx context.Context, d string, files []storage.Entry) ([]storage.Entry, error) {
	for attempt := 0; ; attempt++ {
		err := m.replaceDir(ctx, d, files)
		if err == nil {
			return files, nil
		}
		if !(errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrBadFile)) || attempt == 4 {
			return nil, err
		}
		m.mu.Lock()
		m.res.Relisted++
		m.mu.Unlock()
		if files, err = m.l.lakeFiles(ctx, d); err != nil {
			return nil, fmt.Errorf("lake: mirror: %w", err)
		}
		if len(files) == 0 {
			local, err := localFiles(m.root, d)
			if err != nil {
				return nil, err
			}
			return nil, m.removeDir(d, len(local[d]))
		}
	}
}

// replaceDir puts the directory d in place holding files: unchanged files
// hard-linked from the current copy, the others downloaded.
func (m *mirror) replaceDir(ctx context.Context, d string, files []storage.Entry) error {
	live := filepath.Join(m.root, filepath.FromSlash(d))
	stage, err := os.MkdirTemp(m.tmp, "dir-")
	if err != nil {
		return fmt.Errorf("lake: mirror: %w", err)
	}
	defer os.RemoveAll(stage) // after a swap it holds the old copy
	old, err := os.ReadDir(live)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("lake: mirror: %w", err)
	}
	hasSubdirs := slices.ContainsFunc(old, func(e fs.DirEntry) bool { return e.IsDir() })
	oldETags := map[string]string{}
	if exists {
		if oldETags, err = readETags(live); err != nil {
			return err
		}
	}
	want := map[string]bool{}
	var fetched []string
	var downloaded int
	var downloadedBytes int64
	for _, f := range files {
		want[f.Name] = true
		src, dst := filepath.Join(live, f.Name), filepath.Join(stage, f.Name)
		if st, err := os.Stat(src); err == nil && st.Size() == f.Size && st.ModTime().Equal(f.ModTime) && oldETags[f.Name] == f.ETag {
			if hasSubdirs {
				continue // left in place
			}
			if err := os.Link(src, dst); err == nil {
				continue
			}
		}
		if err := m.download(ctx, storage.JoinKey(d, f.Name), f, dst); err != nil {
			return err
		}
		fetched = append(fetched, f.Name)
		downloaded++
		downloadedBytes += f.Size
	}
	var gone []string
	for _, e := range old {
		if !e.IsDir() && !hidden(e.Name()) && strings.HasSuffix(e.Name(), ".parquet") && !want[e.Name()] {
			gone = append(gone, e.Name())
		}
	}
	if err := writeETags(stage, files); err != nil {
		return fmt.Errorf("lake: mirror: %w", err)
	}
	if err := storage.SyncDir(stage); err != nil {
		return err
	}
	switch {
	case !exists:
		err = m.putNew(stage, live)
	case hasSubdirs:
		err = renameThenRemove(stage, live, fetched, gone)
	default:
		err = exchangeDirs(stage, live)
		if errors.Is(err, errNoExchange) {
			err = renameThenRemove(stage, live, fetched, gone)
		}
	}
	if err != nil {
		return fmt.Errorf("lake: mirror %s: %w", d, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.res.Dirs++
	m.res.Downloaded += downloaded
	m.res.DownloadedBytes += downloadedBytes
	m.res.Removed += len(gone)
	return nil
}

// putNew renames the staged directory to live, which does not exist yet.
func (m *mirror) putNew(stage, live string) error {
	parent := filepath.Dir(live)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	if err := os.Rename(stage, live); err != nil {
		return err
	}
	return storage.SyncDir(parent)
}

// renameThenRemove moves the fetched files of stage into live, then
// deletes the gone ones from it: the directory holds the old and the new
// files together for a moment, never neither.
func renameThenRemove(stage, live string, fetched, gone []string) error {
	if _, err := os.Stat(filepath.Join(stage, mirrorETags)); err == nil {
		fetched = append(fetched, mirrorETags) // after the files it names
	}
	for _, name := range fetched {
		if err := os.Rename(filepath.Join(stage, name), filepath.Join(live, name)); err != nil {
			return err
		}
	}
	if err := storage.SyncDir(live); err != nil {
		return err
	}
	return storage.RemoveSync(live, gone)
}

// removeDir removes the mirror's directory d (holding n files), the lake
// having no file there any more, then its parents left empty.
func (m *mirror) removeDir(d string, n int) error {
	live := filepath.Join(m.root, filepath.FromSlash(d))
	var b [8]byte
	rand.Read(b[:])
	trash := filepath.Join(m.tmp, "gone-"+hex.EncodeToString(b[:]))
	if err := os.Rename(live, trash); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("lake: mirror: %w", err)
	}
	if err := os.RemoveAll(trash); err != nil {
		return fmt.Errorf("lake: mirror: %w", err)
	}
	for p := filepath.Dir(live); p != m.root && strings.HasPrefix(p, m.root); p = filepath.Dir(p) {
		if os.Remove(p) != nil {
			break // not empty
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.res.Dirs++
	m.res.Removed += n
	return nil
}

// mirrorChunk is how much of a file one read asks the lake for.
const mirrorChunk = 2 << 20

// download copies the lake file key (listed as f) to dst, a new file,
// synced, with f's modification time.
func (m *mirror) download(ctx context.Context, key string, f storage.Entry, dst string) error {
	r, err := m.l.store.Open(ctx, key, f.Size)
	if err != nil {
		return err
	}
	defer r.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("lake: mirror: %w", err)
	}
	defer out.Close()
	buf := make([]byte, min(mirrorChunk, max(f.Size, 1)))
	for off := int64(0); off < f.Size; {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("lake: mirror %s: %w", key, err)
		}
		n, err := r.ReadAt(buf[:min(int64(len(buf)), f.Size-off)], off)
		if n > 0 {
			if _, werr := out.Write(buf[:n]); werr != nil {
				return fmt.Errorf("lake: mirror: %w", werr)
			}
			off += int64(n)
		}
		if err == io.EOF && off < f.Size {
			return fmt.Errorf("%w: %s: %d bytes, listed with %d", ErrBadFile, key, off, f.Size)
		}
		if err != nil && err != io.EOF {
			return err
		}
	}
	if err := os.Chtimes(dst, time.Time{}, f.ModTime); err != nil {
		return fmt.Errorf("lake: mirror: %w", err)
	}
	if err := out.Sync(); err != nil {
		return fmt.Errorf("lake: mirror: %w", err)
	}
	return out.Close()
}

// errNoExchange: the system cannot swap two directories atomically.
var errNoExchange = errors.New("lake: mirror: no atomic directory exchange")
