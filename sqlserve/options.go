package sqlserve

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"time"

	"reckon/internal/config"
	"reckon/internal/metrics"
)

// Options configure the engine. The zero value of each field but Root
// means its default; they map 1:1 onto the sql.* config keys.
type Options struct {
	// Root is the lake DuckDB reads: a local directory. Required; an
	// s3:// root is refused (ErrS3Lake): serve its LakeMirror's Dir.
	Root string
	// MemoryLimit is DuckDB's memory limit for all queries together.
	// Default "2GB".
	MemoryLimit string
	// Threads DuckDB uses. Default: one per CPU.
	Threads int
	// QueryTimeout bounds one query, start to last batch. Default 5m.
	QueryTimeout time.Duration

	// Log receives a line per query re-run after a lake file vanished
	// under it (not a config key). Default slog.Default().
	Log *slog.Logger
	// Metrics, when not nil, gets the engine's families (metrics.go; not
	// a config key). Default: a private registry.
	Metrics *metrics.Registry
}

// ErrS3Lake refuses an s3:// root for the engine: DuckDB reads S3 through
// its httpfs extension, which is not built into the DuckDB library reckon
// links and cannot be installed on a machine without network access, so
// the engine reads a local mirror of the bucket (LakeMirror; `reckon sql`
// and `reckon serve sql` set it up, docs/adr/0017-sql-endpoint.md).
var ErrS3Lake = errors.New("sqlserve: the engine reads a lake in a local directory; serve an s3:// lake through its " +
	"mirror (LakeMirror, sql.cache_dir; docs/adr/0017-sql-endpoint.md)")

// OptionsFrom maps the configuration onto Options.
func OptionsFrom(c *config.Config) Options {
	return Options{Root: c.Lake.Root, MemoryLimit: c.SQL.MemoryLimit, Threads: c.SQL.Threads,
		QueryTimeout: c.SQL.QueryTimeout}
}

// Validate reports every problem at once and fills the defaults.
func (o *Options) Validate() error {
	var errs []error
	switch {
	case o.Root == "":
		errs = append(errs, errors.New("sqlserve: lake root: required"))
	case strings.HasPrefix(o.Root, "s3://"):
		errs = append(errs, fmt.Errorf("%w: lake.root %s", ErrS3Lake, o.Root))
	}
	if o.MemoryLimit == "" {
		o.MemoryLimit = "2GB"
	}
	if strings.ContainsAny(o.MemoryLimit, "'\\") {
		errs = append(errs, fmt.Errorf("sqlserve: memory limit %q", o.MemoryLimit))
	}
	if o.Threads < 0 {
		errs = append(errs, errors.New("sqlserve: threads must not be negative"))
	}
	if o.QueryTimeout == 0 {
		o.QueryTimeout = 5 * time.Minute
	}
	return errors.Join(errs...)
}

func runtimeCPUs() int { return runtime.NumCPU() }

// Kind classifies a failed query for the client.
type Kind int

// Kinds of query failure.
const (
	KindInvalid   Kind = iota // the query is wrong: syntax, unknown name, types
	KindDenied                // refused by the lock-down (a file outside the lake, a write, ATTACH, SET ...)
	KindTimeout               // past sql.query_timeout
	KindCanceled              // the client went away or cancelled
	KindResources             // past sql.memory_limit
	KindInternal              // the engine failed (I/O on the lake, a DuckDB bug)
)

// QueryError is a failed query with its kind; Unwrap gives DuckDB's error.
type QueryError struct {
	Kind Kind
	Err  error
}

func (e *QueryError) Error() string { return e.Err.Error() }
func (e *QueryError) Unwrap() error { return e.Err }
