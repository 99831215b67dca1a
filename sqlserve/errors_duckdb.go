//go:build duckdb_arrow

package sqlserve

import (
	"context"
	"errors"

	"github.com/duckdb/duckdb-go/v2"
)

// classify wraps a DuckDB error into a QueryError of the right kind; ctx
// is the query's context, whose expiry makes an interruption a timeout.
func classify(ctx context.Context, err error) error {
	var qe *QueryError
	if err == nil || errors.As(err, &qe) || errors.Is(err, ErrNotReadOnly) {
		return err
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return &QueryError{Kind: KindTimeout, Err: err}
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return &QueryError{Kind: KindCanceled, Err: err}
	}
	var de *duckdb.Error
	if !errors.As(err, &de) {
		return &QueryError{Kind: KindInternal, Err: err}
	}
	switch de.Type {
	case duckdb.ErrorTypePermission:
		return &QueryError{Kind: KindDenied, Err: err}
	case duckdb.ErrorTypeOutOfMemory:
		return &QueryError{Kind: KindResources, Err: err}
	case duckdb.ErrorTypeInterrupt:
		return &QueryError{Kind: KindCanceled, Err: err}
	case duckdb.ErrorTypeIO, duckdb.ErrorTypeInternal, duckdb.ErrorTypeFatal, duckdb.ErrorTypeConnection:
		return &QueryError{Kind: KindInternal, Err: err}
	default:
		return &QueryError{Kind: KindInvalid, Err: err}
	}
}
