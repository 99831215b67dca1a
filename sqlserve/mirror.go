package sqlserve

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"reckon/internal/config"
	"reckon/internal/lakeconn"
	"reckon/lake"
	"reckon/lake/storage"
)

// LakeMirror keeps a local copy of an s3:// lake's tables — those the
// views read — for DuckDB, which cannot read S3 in this build (its httpfs
// extension is not linked, docs/adr/0017-sql-endpoint.md). Each pass is
// lake.Mirror: new files downloaded, files gone from the bucket deleted,
// each directory swapped whole from one listing of the bucket to a later
// one, a download never visible before it is complete. Queries see the
// bucket as of the last pass: at most about the sync interval old while
// passes succeed. Safe for concurrent use; passes of one LakeMirror (and
// of processes sharing its directory) run one at a time.
type LakeMirror struct {
	lake     *lake.Lake
	dir      string
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time

	mu       sync.Mutex // protects the following fields; held for a whole pass
	lastOK   time.Time  // end of the last successful pass
	failures int        // passes failed since then
}

// MirrorTables are the lake directories the views read: what a
// LakeMirror copies.
func MirrorTables() []string {
	out := make([]string, len(baseTables))
	for i, b := range baseTables {
		out[i] = b.dir
	}
	return out
}

// NewLakeMirror returns the mirror of l (an s3:// lake) in dir, synced
// every interval by Run. log receives a line per pass that changed the
// mirror or failed; nil means slog.Default().
func NewLakeMirror(l *lake.Lake, dir string, interval time.Duration, log *slog.Logger) *LakeMirror {
	if log == nil {
		log = slog.Default()
	}
	return &LakeMirror{lake: l, dir: dir, interval: interval, log: log, now: time.Now}
}

// OpenLakeMirror opens the lake of cfg (lake.root, an s3:// URL reached
// as lake.s3 says) and returns its mirror under sql.cache_dir:
// <cache_dir>/s3/<bucket>/<prefix>, so mirrors of two lakes never share a
// directory.
func OpenLakeMirror(cfg *config.Config, log *slog.Logger) (*LakeMirror, error) {
	opts, err := s3LakeOptions(cfg.Lake)
	if err != nil {
		return nil, err
	}
	l, err := lake.Open(opts)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cfg.SQL.CacheDir, "s3",
		filepath.FromSlash(strings.Trim(strings.TrimPrefix(cfg.Lake.Root, storage.S3Scheme), "/")))
	return NewLakeMirror(l, dir, cfg.SQL.SyncInterval, log), nil
}

// s3LakeOptions maps the lake section onto lake.Options for an s3:// root,
// as reckon's other commands do (workers/cmd_lake.go lakeOptions; the
// fault injection of chaos runs is left out: the endpoint only reads).
func s3LakeOptions(c config.Lake) (lake.Options, error) {
	s3, err := lakeconn.S3Options(c.S3)
	return lake.Options{Root: c.Root, S3: s3}, err
}

// Dir is the mirror's directory: the lake root DuckDB reads.
func (m *LakeMirror) Dir() string { return m.dir }

// Sync runs one pass and logs it: at Info when it changed the mirror (or
// is the first), at Debug otherwise, at Warn with the mirror's lag when it
// failed.
func (m *LakeMirror) Sync(ctx context.Context) (lake.MirrorResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	start := m.now()
	res, err := m.lake.Mirror(ctx, m.dir, MirrorTables())
	took := m.now().Sub(start)
	if err != nil && ctx.Err() != nil {
		return res, err // stopping
	}
	if err != nil {
		m.failures++
		args := []any{"lake", m.lake.Root(), "dir", m.dir, "failures", m.failures, "err", err}
		if !m.lastOK.IsZero() {
			args = append(args, "lag", m.now().Sub(m.lastOK).Round(time.Second), "synced_at",
				m.lastOK.UTC().Format(time.RFC3339))
		}
		m.log.Warn("sql: lake mirror sync failed; queries see the bucket as of the last successful sync", args...)
		return res, fmt.Errorf("sqlserve: mirror %s into %s: %w", m.lake.Root(), m.dir, err)
	}
	level := slog.LevelDebug
	if m.lastOK.IsZero() || res.Downloaded > 0 || res.Removed > 0 || m.failures > 0 {
		level = slog.LevelInfo
	}
	m.log.Log(ctx, level, "sql: lake mirror synced", "lake", m.lake.Root(), "dir", m.dir,
		"files", res.Files, "bytes", res.Bytes, "downloaded", res.Downloaded, "downloaded_bytes", res.DownloadedBytes,
		"removed", res.Removed, "relisted", res.Relisted, "took", took.Round(time.Millisecond))
	m.lastOK, m.failures = m.now(), 0
	return res, nil
}

// Run syncs the mirror every interval until ctx is done; a failed pass is
// logged and tried again at the next tick.
func (m *LakeMirror) Run(ctx context.Context) {
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.Sync(ctx)
		}
	}
}
