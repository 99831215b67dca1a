//go:build duckdb_arrow

package sqlserve

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/duckdb/duckdb-go/v2"

	"reckon/internal/metrics"
	"reckon/internal/testing/testlog"
)

// vanishedErr is DuckDB's error for a file of the glob that was gone when
// it opened it, as TestLiveLakeQueries sees it come from the library.
func vanishedErr(path string) error {
	return &duckdb.Error{Type: duckdb.ErrorTypeIO, Msg: `IO Error: Cannot open file "` + path + `": No such file or directory`}
}

// TestRetryVanished drives the retry with attempts that fail as DuckDB
// does: a vanished lake file is re-run until it succeeds or the attempts
// are used, counted and logged; any other failure is not re-run.
func TestRetryVanished(t *testing.T) {
	root := t.TempDir()
	var logs testlog.Buffer
	reg := metrics.NewRegistry()
	e := openEngine(t, root, func(o *Options) { o.Log, o.Metrics = newTestLogger(&logs), reg })
	lakeFile := e.root + "/raw/topic=t/event_date=2026-11-07/event_hour=01/t-c3-0.parquet"
	counters := func() (retries, gaveUp float64) {
		return e.metrics.retries.With(reasonVanished).Get(), e.metrics.gaveUp.With(reasonVanished).Get()
	}
	ctx := context.Background()

	t.Run("recovers", func(t *testing.T) {
		r0, g0 := counters()
		calls := 0
		err := e.retryVanished(ctx, "query", "SELECT 1", func() error {
			if calls++; calls <= 2 {
				return vanishedErr(lakeFile)
			}
			return nil
		})
		r, g := counters()
		if err != nil || calls != 3 || r-r0 != 2 || g != g0 {
			t.Errorf("err %v after %d attempts; counters moved by %v retries, %v gave up; want nil after 3, 2 and 0",
				err, calls, r-r0, g-g0)
		}
		if n := strings.Count(logs.String(), `path="`+lakeFile+`"`); n != 2 {
			t.Errorf("%d log lines name the vanished file, want 2:\n%s", n, logs.String())
		}
	})
	t.Run("gives up", func(t *testing.T) {
		r0, g0 := counters()
		calls := 0
		err := e.retryVanished(ctx, "query", "SELECT 1", func() error { calls++; return vanishedErr(lakeFile) })
		r, g := counters()
		var de *duckdb.Error
		if !errors.As(err, &de) || calls != vanishedAttempts || r-r0 != float64(vanishedAttempts-1) || g-g0 != 1 {
			t.Errorf("err %v after %d attempts; counters moved by %v retries, %v gave up; want DuckDB's error after %d, %d and 1",
				err, calls, r-r0, g-g0, vanishedAttempts, vanishedAttempts-1)
		}
		if !strings.Contains(logs.String(), "level=WARN msg=\"sql: gave up re-running a query") {
			t.Errorf("no warning for the query given up:\n%s", logs.String())
		}
	})
	t.Run("not a vanished lake file", func(t *testing.T) {
		for _, fail := range []error{
			&duckdb.Error{Type: duckdb.ErrorTypeIO, Msg: `IO Error: Cannot open file "` + lakeFile + `": Permission denied`},
			&duckdb.Error{Type: duckdb.ErrorTypeIO, Msg: `IO Error: No files found that match the pattern "` + lakeFile + `"`},
			vanishedErr("/elsewhere/x.parquet"),
			vanishedErr(e.root + "x/y.parquet"), // beside the root, not in it
			&duckdb.Error{Type: duckdb.ErrorTypeBinder, Msg: `Binder Error: Cannot open file "` + lakeFile + `": No such file or directory`},
			errors.New(`IO Error: Cannot open file "` + lakeFile + `": No such file or directory`), // not from DuckDB
		} {
			r0, _ := counters()
			calls := 0
			err := e.retryVanished(ctx, "query", "SELECT 1", func() error { calls++; return fail })
			if r, _ := counters(); err != fail || calls != 1 || r != r0 {
				t.Errorf("%v: %d attempts, %v retries counted, err %v; want 1, 0 and the failure", fail, calls, r-r0, err)
			}
		}
	})
	t.Run("the query's time runs out", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		calls := 0
		err := e.retryVanished(cctx, "query", "SELECT 1", func() error {
			calls++
			cancel() // during the pause before the next attempt
			return vanishedErr(lakeFile)
		})
		var qe *QueryError
		if calls != 1 || !errors.As(classify(cctx, err), &qe) || qe.Kind != KindCanceled {
			t.Errorf("%d attempts, then %v; want 1, then a cancelled query", calls, classify(cctx, err))
		}
	})
}

// TestResultMaterialised: a query's reader holds its whole answer when
// Query returns it (duckdb-go runs the query to its end first), so files
// deleted while a client reads the batches do not cut the answer short.
// The retry relies on it (retry.go): a file can only vanish under a query
// before any batch was sent. Should duckdb-go stream results instead, this
// fails, and a vanished file could end a stream after rows were sent.
func TestResultMaterialised(t *testing.T) {
	tl := buildLake(t)
	e := openEngine(t, tl.root)
	rdr, err := e.Query(context.Background(), "SELECT * FROM raw")
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	if err := os.RemoveAll(filepath.Join(tl.root, "raw")); err != nil {
		t.Fatal(err)
	}
	rows, batches := 0, 0
	for rdr.Next() {
		rows += int(rdr.RecordBatch().NumRows())
		batches++
	}
	if err := rdr.Err(); err != nil || rows != tl.rawRows || batches < 2 {
		t.Errorf("%d rows in %d batches read after the files were deleted, then %v; want %d rows in several batches",
			rows, batches, err, tl.rawRows)
	}
}

func newTestLogger(w *testlog.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
