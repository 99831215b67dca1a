//go:build duckdb_arrow

package sqlserve

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/duckdb/duckdb-go/v2"
)

// A query on a live lake can fail because a file it listed is gone when it
// opens it: DuckDB expands a view's glob (raw/**/*.parquet) when it binds
// the query and opens each file as it scans, and the lake's compaction
// deletes its input files once its outputs are durable
// (docs/adr/0018-continuous-compaction.md). The files left after the
// compaction hold the same rows, so the query run again, with a fresh
// listing, gives a complete answer (docs/adr/0031-sql-retry-on-vanished-files.md).

// vanishedAttempts bounds the attempts of a query whose every failure is
// a vanished file, the first included (1 turns the retry off).
var vanishedAttempts = 5

// vanishedBackoff is the pause before the second attempt; it doubles
// (20, 40, 80, 160 ms: 300 ms at most over five attempts), which leaves a
// compaction time to delete the rest of its inputs before the next listing.
const vanishedBackoff = 20 * time.Millisecond

// vanishedFile reports whether err is DuckDB failing to open a lake file
// that is gone ("IO Error: Cannot open file \"…\": No such file or
// directory"), and which file. A missing file the query names itself
// fails at bind with "No files found that match the pattern", which is
// not retried, nor is any file outside the lake root.
func (e *Engine) vanishedFile(err error) (string, bool) {
	var de *duckdb.Error
	if !errors.As(err, &de) || de.Type != duckdb.ErrorTypeIO {
		return "", false
	}
	msg := de.Msg
	_, rest, ok := strings.Cut(msg, `Cannot open file "`)
	if !ok {
		return "", false
	}
	path, rest, ok := strings.Cut(rest, `"`)
	if !ok || !strings.Contains(rest, "No such file or directory") || !strings.HasPrefix(path, e.root+"/") {
		return "", false
	}
	return path, true
}

// retryVanished runs attempt until it succeeds, fails for another reason
// than a vanished lake file, vanishedAttempts are used or ctx is done. It
// counts and logs every retry, and a give-up. what names the call in the
// log ("query", "check").
//
// A retry is safe: attempt has handed nothing to the client when it
// fails. DuckDB runs a query to its end before the first batch exists
// (duckdb-go executes a pending result, not a streaming one), so a file
// vanishing under it fails the query before Query returns a reader.
func (e *Engine) retryVanished(ctx context.Context, what, query string, attempt func() error) error {
	wait := vanishedBackoff
	for n := 1; ; n++ {
		err := attempt()
		if err == nil {
			return nil
		}
		path, vanished := e.vanishedFile(err)
		if !vanished {
			return err
		}
		if n >= vanishedAttempts || ctx.Err() != nil {
			e.metrics.gaveUp.With(reasonVanished).Add(1)
			e.log.Warn("sql: gave up re-running a "+what+" whose lake files vanished (compactions kept replacing them)",
				"attempts", n, "path", path, "query", firstLine(query), "err", err)
			return err
		}
		e.metrics.retries.With(reasonVanished).Add(1)
		e.log.Info("sql: re-running a "+what+": a lake file vanished under it (compaction replaced it)",
			"attempt", n, "path", path, "query", firstLine(query), "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err // classified by the caller with ctx: a timeout or a cancel
		}
		wait *= 2
	}
}
