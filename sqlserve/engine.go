//go:build duckdb_arrow

package sqlserve

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unicode"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/duckdb/duckdb-go/v2"
)

// Engine is the embedded DuckDB database every query of the endpoint runs
// on: in memory, reading only the lake directory, with the views of
// views.go. It is safe for concurrent use; each query gets its own DuckDB
// connection, closed when its result is released.
type Engine struct {
	opts      Options
	root      string // absolute lake directory, no trailing slash
	spill     string // private temporary directory for spilling
	connector *duckdb.Connector
	db        *sql.DB // setup and metadata; results are small
	version   string  // DuckDB's version()
	log       *slog.Logger
	metrics   engineMetrics

	mu      sync.Mutex      // protects present (and serialises view re-creation)
	present map[string]bool // base table directories holding a file
}

// Open creates the engine over the lake directory opts.Root and locks it
// down: external access limited to the lake, no extensions, configuration
// locked (docs/adr/0017-sql-endpoint.md). Close releases it.
func Open(ctx context.Context, opts Options) (*Engine, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("sqlserve: lake root: %w", err)
	}
	root = strings.TrimRight(filepath.ToSlash(root), "/")
	if root == "" {
		return nil, errors.New("sqlserve: lake root: / would let queries read every file")
	}
	spill, err := os.MkdirTemp("", "reckon-sql-spill-")
	if err != nil {
		return nil, fmt.Errorf("sqlserve: spill directory: %w", err)
	}
	connector, err := duckdb.NewConnector("", nil)
	if err != nil {
		os.RemoveAll(spill)
		return nil, fmt.Errorf("sqlserve: open duckdb: %w", err)
	}
	e := &Engine{opts: opts, root: root, spill: spill, connector: connector, db: sql.OpenDB(connector),
		present: map[string]bool{},
		log:     opts.Log, metrics: newEngineMetrics(opts.Metrics)}
	if e.log == nil {
		e.log = slog.Default()
	}
	if err := e.setup(ctx); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// setup applies the settings, creates the views and then locks the
// configuration. Global settings hold for every later connection.
func (e *Engine) setup(ctx context.Context) error {
	threads := e.opts.Threads
	if threads == 0 {
		threads = max(1, runtimeCPUs())
	}
	stmts := []string{
		"SET GLOBAL TimeZone = 'UTC'",
		fmt.Sprintf("SET GLOBAL threads = %d", threads),
		"SET GLOBAL memory_limit = " + sqlString(e.opts.MemoryLimit),
		"SET GLOBAL temp_directory = " + sqlString(e.spill),
		"SET GLOBAL autoinstall_known_extensions = false",
		"SET GLOBAL autoload_known_extensions = false",
		"SET GLOBAL parquet_metadata_cache = true",
	}
	for _, s := range stmts {
		if _, err := e.db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("sqlserve: %s: %w", s, err)
		}
	}
	if err := e.db.QueryRowContext(ctx, "SELECT version()").Scan(&e.version); err != nil {
		return fmt.Errorf("sqlserve: version: %w", err)
	}
	if err := e.refresh(ctx, true); err != nil {
		return err
	}
	for _, s := range []string{
		"SET GLOBAL allowed_directories = [" + sqlString(e.root+"/") + "]",
		"SET GLOBAL enable_external_access = false",
		"SET GLOBAL lock_configuration = true",
	} {
		if _, err := e.db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("sqlserve: %s: %w", s, err)
		}
	}
	return nil
}

// Close closes the database and removes the spill directory.
func (e *Engine) Close() error {
	err := errors.Join(e.db.Close(), e.connector.Close())
	os.RemoveAll(e.spill)
	return err
}

// Root is the lake directory the engine reads.
func (e *Engine) Root() string { return e.root }

// refresh re-creates the views when a base table that had no file has one
// now (or always, when force): DuckDB binds a view when it is created, so
// a view cannot name files that do not exist yet.
func (e *Engine) refresh(ctx context.Context, force bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	changed := force
	for _, b := range baseTables {
		if e.present[b.dir] {
			continue
		}
		if hasParquet(filepath.Join(e.root, b.dir)) {
			e.present[b.dir] = true
			changed = true
		}
	}
	if !changed {
		return nil
	}
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlserve: views: %w", err)
	}
	defer tx.Rollback()
	for _, s := range definitions(e.root, e.present) {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("sqlserve: views: %s: %w", firstLine(s), err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlserve: views: %w", err)
	}
	return nil
}

// hasParquet reports whether dir holds a visible *.parquet file at any
// depth (names starting with "." or "_" are hidden, as in lake/doc.go).
func hasParquet(dir string) bool {
	found := false
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a missing or unreadable directory holds nothing
		}
		name := d.Name()
		if p != dir && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.IsDir() && strings.HasSuffix(name, ".parquet") {
			found = true
			return fs.SkipAll
		}
		return nil
	})
	return found
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

// Query runs one read-only SELECT (DESCRIBE, SHOW, SUMMARIZE and FROM-first
// queries are SELECTs), or EXPLAIN [ANALYZE] of one, with args bound to
// its parameters, and returns the result as Arrow record batches straight
// from DuckDB. Anything else — several statements, COPY, ATTACH, SET,
// INSTALL/LOAD, CREATE, PRAGMA — is refused with ErrNotReadOnly before it
// runs. ctx bounds the query; the caller must Release the reader, which
// closes its connection.
//
// A query that fails because a lake file it listed was deleted before it
// opened it (a compaction replaced the file) is run again, up to
// vanishedAttempts in all (retry.go): the answer is complete, never short
// of the replaced file's rows.
func (e *Engine) Query(ctx context.Context, query string, args ...any) (array.RecordReader, error) {
	var rdr array.RecordReader
	err := e.retryVanished(ctx, "query", query, func() error {
		var err error
		rdr, err = e.queryOnce(ctx, query, args...)
		return err
	})
	if err != nil {
		return nil, classify(ctx, err)
	}
	return rdr, nil
}

// queryOnce is one attempt of Query; its errors are DuckDB's, unclassified.
func (e *Engine) queryOnce(ctx context.Context, query string, args ...any) (array.RecordReader, error) {
	if err := e.refresh(ctx, false); err != nil {
		return nil, err
	}
	dc, err := e.connector.Connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlserve: connect: %w", err)
	}
	conn := dc.(*duckdb.Conn)
	if _, err := checkReadOnly(ctx, conn, query); err != nil {
		conn.Close()
		return nil, err
	}
	ar, err := duckdb.NewArrowFromConn(conn)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("sqlserve: arrow: %w", err)
	}
	rdr, err := ar.QueryContext(ctx, query, args...)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &connReader{RecordReader: rdr, conn: conn, ctx: ctx}, nil
}

// Check runs Query's checks on query without running it and returns its
// number of parameters. Preparing binds the views, which lists and opens
// lake files: a file vanishing meanwhile is retried as in Query.
func (e *Engine) Check(ctx context.Context, query string) (nparams int, err error) {
	err = e.retryVanished(ctx, "query check", query, func() error {
		var err error
		nparams, err = e.checkOnce(ctx, query)
		return err
	})
	return nparams, classify(ctx, err)
}

func (e *Engine) checkOnce(ctx context.Context, query string) (nparams int, err error) {
	if err := e.refresh(ctx, false); err != nil {
		return 0, err
	}
	dc, err := e.connector.Connect(ctx)
	if err != nil {
		return 0, fmt.Errorf("sqlserve: connect: %w", err)
	}
	defer dc.Close()
	return checkReadOnly(ctx, dc.(*duckdb.Conn), query)
}

// Schema returns the result schema of query without reading the lake's
// rows: DuckDB binds it under LIMIT 0. Parameters bind as NULL.
func (e *Engine) Schema(ctx context.Context, query string, nparams int) (*arrow.Schema, error) {
	args := make([]any, nparams)
	rdr, err := e.Query(ctx, "SELECT * FROM (\n"+strings.TrimRight(strings.TrimSpace(query), ";")+"\n) LIMIT 0", args...)
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	return rdr.Schema(), nil
}

// ErrNotReadOnly refuses a statement that is not one read-only SELECT.
var ErrNotReadOnly = errors.New("sqlserve: only one read-only SELECT statement per query is allowed")

// checkReadOnly lets through exactly one SELECT statement, or EXPLAIN
// [ANALYZE] of one. DuckDB's parser decides: json_serialize_sql
// serializes SELECT statements only, and counts them, without running
// anything; the prepared statement's type is checked again (preparing one
// statement runs nothing).
func checkReadOnly(ctx context.Context, conn *duckdb.Conn, query string) (nparams int, err error) {
	body, explain := explained(query)
	if err := checkSelects(ctx, conn, body); err != nil {
		return 0, err
	}
	st, err := conn.PrepareContext(ctx, query)
	if err != nil {
		return 0, classify(ctx, err)
	}
	defer st.Close()
	stype, err := st.(*duckdb.Stmt).StatementType()
	if err != nil {
		return 0, fmt.Errorf("sqlserve: check query: %w", err)
	}
	want := duckdb.STATEMENT_TYPE_SELECT
	if explain {
		want = duckdb.STATEMENT_TYPE_EXPLAIN
	}
	if stype != want {
		return 0, ErrNotReadOnly
	}
	return st.NumInput(), nil
}

// explained returns the statement EXPLAIN [ANALYZE] applies to, and
// whether query is one.
func explained(query string) (string, bool) {
	rest, ok := cutWord(strings.TrimSpace(query), "EXPLAIN")
	if !ok {
		return query, false
	}
	if r, ok := cutWord(rest, "ANALYZE"); ok {
		rest = r
	}
	return rest, true
}

// cutWord cuts the keyword w (any case) and the space after it from the
// start of s.
func cutWord(s, w string) (string, bool) {
	if len(s) <= len(w) || !strings.EqualFold(s[:len(w)], w) || !unicode.IsSpace(rune(s[len(w)])) {
		return s, false
	}
	return strings.TrimSpace(s[len(w):]), true
}

// checkSelects reports whether query is exactly one SELECT statement,
// by DuckDB's json_serialize_sql; a syntax error comes back as DuckDB
// reports it, with its position.
func checkSelects(ctx context.Context, conn *duckdb.Conn, query string) error {
	rows, err := conn.QueryContext(ctx, `SELECT coalesce((j->>'error')::BOOLEAN, true), coalesce(j->>'error_type', ''),
	        coalesce(j->>'error_message', ''), coalesce(j->>'position', ''), coalesce(json_array_length(j->'statements'),
		0)::BIGINT
	        FROM (SELECT json_serialize_sql(?::VARCHAR) AS j)`,
		[]driver.NamedValue{{Ordinal: 1, Value: query}})
	if err != nil {
		return fmt.Errorf("sqlserve: check query: %w", err)
	}
	vals := make([]driver.Value, 5)
	err = rows.Next(vals)
	rows.Close()
	if err != nil {
		return fmt.Errorf("sqlserve: check query: %w", err)
	}
	failed, _ := vals[0].(bool)
	typ, _ := vals[1].(string)
	msg, _ := vals[2].(string)
	pos, _ := vals[3].(string)
	n, _ := vals[4].(int64)
	switch {
	case failed && typ == "not implemented":
		return ErrNotReadOnly
	case failed:
		if pos != "" {
			msg += " (at character " + pos + ")"
		}
		return &QueryError{Kind: KindInvalid, Err: fmt.Errorf("%s error: %s", typ, msg)}
	case n != 1:
		return fmt.Errorf("%w (this query holds %d)", ErrNotReadOnly, n)
	}
	return nil
}

// connReader closes the query's connection with the reader, and turns a
// failure while reading into a QueryError.
type connReader struct {
	array.RecordReader
	conn *duckdb.Conn
	ctx  context.Context
	once sync.Once
}

func (r *connReader) Release() {
	r.RecordReader.Release()
	r.once.Do(func() { r.conn.Close() })
}

// Err is the reader's error, classified.
func (r *connReader) Err() error {
	if err := r.RecordReader.Err(); err != nil {
		return classify(r.ctx, err)
	}
	return nil
}
