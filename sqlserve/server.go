//go:build duckdb_arrow

package sqlserve

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// maxPrepared bounds the prepared statements open at once (all clients).
const maxPrepared = 10_000

// ServeOptions are how the Flight SQL server listens.
type ServeOptions struct {
	// Listen is host:port. Required.
	Listen string
	// TLS, when not nil, encrypts the endpoint; with ClientCAs and
	// RequireAndVerifyClientCert it is mutual TLS.
	TLS *tls.Config
	// Auth authenticates clients; the zero value accepts every call.
	Auth Auth
	// Log receives one line per failed query. Default: slog.Default().
	Log *slog.Logger
	// Ready, when not nil, is called with the bound address once the
	// server accepts connections.
	Ready func(net.Addr)
}

// Server is the Flight SQL service over an Engine: statements, prepared
// statements (with parameters) and the metadata calls. Safe for concurrent
// use.
type Server struct {
	flightsql.BaseServer
	eng     *Engine
	timeout time.Duration
	log     *slog.Logger

	mu       sync.Mutex           // protects prepared
	prepared map[string]*prepared // handle -> statement
}

// prepared is an open prepared statement.
type prepared struct {
	query   string
	nparams int
	params  []any // bound by DoPut; nil until then
}

// NewServer returns the Flight SQL service of eng.
func NewServer(eng *Engine, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	s := &Server{eng: eng, timeout: eng.opts.QueryTimeout, log: log, prepared: map[string]*prepared{}}
	s.Alloc = memory.DefaultAllocator
	for id, v := range map[flightsql.SqlInfo]any{
		flightsql.SqlInfoFlightSqlServerName:             "reckon",
		flightsql.SqlInfoFlightSqlServerVersion:          "duckdb " + eng.version,
		flightsql.SqlInfoFlightSqlServerArrowVersion:     "arrow-go v18",
		flightsql.SqlInfoFlightSqlServerReadOnly:         true,
		flightsql.SqlInfoFlightSqlServerSql:              true,
		flightsql.SqlInfoFlightSqlServerSubstrait:        false,
		flightsql.SqlInfoFlightSqlServerTransaction:      int32(0), // SQL_SUPPORTED_TRANSACTION_NONE
		flightsql.SqlInfoFlightSqlServerCancel:           false,
		flightsql.SqlInfoFlightSqlServerStatementTimeout: int32(eng.opts.QueryTimeout / time.Second),
		flightsql.SqlInfoDDLCatalog:                      false,
		flightsql.SqlInfoDDLSchema:                       false,
		flightsql.SqlInfoDDLTable:                        false,
		flightsql.SqlInfoIdentifierQuoteChar:             `"`,
		flightsql.SqlInfoAllTablesAreASelectable:         true,
		flightsql.SqlInfoTransactionsSupported:           false,
	} {
		if err := s.RegisterSqlInfo(id, v); err != nil {
			return nil, fmt.Errorf("sqlserve: sql info %d: %w", id, err)
		}
	}
	return s, nil
}

// Serve runs the Flight SQL server of eng until ctx is done, then stops
// it: calls in flight get a few seconds to finish.
func Serve(ctx context.Context, eng *Engine, opts ServeOptions) error {
	srv, err := NewServer(eng, opts.Log)
	if err != nil {
		return err
	}
	var gopts []grpc.ServerOption
	if opts.TLS != nil {
		gopts = append(gopts, grpc.Creds(credentials.NewTLS(opts.TLS)))
	}
	if opts.Auth.enabled() {
		au := newAuthenticator(opts.Auth, time.Now)
		gopts = append(gopts, grpc.ChainUnaryInterceptor(au.unary), grpc.ChainStreamInterceptor(au.stream))
	}
	gs := grpc.NewServer(gopts...)
	flight.RegisterFlightServiceServer(gs, flightsql.NewFlightServer(srv))
	lis, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return fmt.Errorf("sqlserve: listen: %w", err)
	}
	if opts.Ready != nil {
		opts.Ready(lis.Addr())
	}
	done := make(chan error, 1)
	go func() { done <- gs.Serve(lis) }()
	select {
	case err := <-done:
		return fmt.Errorf("sqlserve: serve: %w", err)
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		gs.Stop()
	}
	return nil
}

// flightError turns an error of the engine into a gRPC status a Flight
// client shows as is.
func (s *Server) flightError(query string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	code := codes.Internal
	var qe *QueryError
	switch {
	case errors.Is(err, ErrNotReadOnly):
		code = codes.PermissionDenied
	case errors.As(err, &qe):
		code = map[Kind]codes.Code{
			KindInvalid: codes.InvalidArgument, KindDenied: codes.PermissionDenied, KindTimeout: codes.DeadlineExceeded,
			KindCanceled: codes.Canceled, KindResources: codes.ResourceExhausted, KindInternal: codes.Internal,
		}[qe.Kind]
		if qe.Kind == KindTimeout {
			err = fmt.Errorf("query ran past sql.query_timeout (%v): %w", s.timeout, err)
		}
	}
	s.log.Warn("sql query failed", "code", code.String(), "err", err, "query", firstLine(query))
	return status.Error(code, err.Error())
}

// run executes query and streams its batches; the query's time limit
// covers the execution and the transfer.
func (s *Server) run(ctx context.Context, query string, args []any) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	qctx, cancel := context.WithTimeout(ctx, s.timeout)
	rdr, err := s.eng.Query(qctx, query, args...)
	if err != nil {
		cancel()
		return nil, nil, s.flightError(query, err)
	}
	ch := make(chan flight.StreamChunk, 2)
	go func() {
		defer cancel()
		defer close(ch)
		defer rdr.Release()
		for rdr.Next() {
			parts := splitBatch(rdr.RecordBatch(), maxBatchBytes)
			for i, rec := range parts {
				select {
				case ch <- flight.StreamChunk{Data: rec}:
				case <-qctx.Done():
					for _, r := range parts[i:] {
						r.Release()
					}
					s.sendErr(ctx, ch, query, classify(qctx, qctx.Err()))
					return
				}
			}
		}
		if err := rdr.Err(); err != nil {
			s.sendErr(ctx, ch, query, err)
		}
	}()
	return rdr.Schema(), ch, nil
}

// maxBatchBytes bounds one batch sent: gRPC clients refuse messages over
// 4 MiB unless configured otherwise, and DuckDB's 2,048-row chunks of wide
// rows can be larger.
const maxBatchBytes = 2 << 20

// splitBatch returns rec as zero-copy slices of at most about limit bytes
// each (one row may be more), each retained for the caller; limit is in
// bytes.
func splitBatch(rec arrow.RecordBatch, limit int64) []arrow.RecordBatch {
	var size int64
	for _, col := range rec.Columns() {
		size += arrayBytes(col.Data())
	}
	rows := rec.NumRows()
	if size <= limit || rows <= 1 {
		rec.Retain()
		return []arrow.RecordBatch{rec}
	}
	parts := (size + limit - 1) / limit
	step := max(1, (rows+parts-1)/parts)
	out := make([]arrow.RecordBatch, 0, parts)
	for lo := int64(0); lo < rows; lo += step {
		out = append(out, rec.NewSlice(lo, min(lo+step, rows)))
	}
	return out
}

// arrayBytes is the size of an array's buffers, children included.
func arrayBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += arrayBytes(c)
	}
	return n
}

// sendErr ends a stream with err, unless the client has gone.
func (s *Server) sendErr(ctx context.Context, ch chan<- flight.StreamChunk, query string, err error) {
	select {
	case ch <- flight.StreamChunk{Err: s.flightError(query, err)}:
	case <-ctx.Done():
	}
}

// GetFlightInfoStatement checks the query (a bad or refused query fails
// here, before any DoGet) and hands back a ticket holding it.
func (s *Server) GetFlightInfoStatement(ctx context.Context, cmd flightsql.StatementQuery,
	desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if len(cmd.GetTransactionId()) > 0 {
		return nil, status.Error(codes.Unimplemented, "sqlserve: transactions are not supported (read-only endpoint)")
	}
	q := cmd.GetQuery()
	if _, err := s.eng.Check(ctx, q); err != nil {
		return nil, s.flightError(q, err)
	}
	tkt, err := flightsql.CreateStatementQueryTicket([]byte(q))
	if err != nil {
		return nil, err
	}
	return &flight.FlightInfo{
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: tkt}}},
		FlightDescriptor: desc, TotalRecords: -1, TotalBytes: -1,
	}, nil
}

// DoGetStatement runs the ticket's query; it is checked again, a ticket
// being whatever the client sends.
func (s *Server) DoGetStatement(ctx context.Context,
	tkt flightsql.StatementQueryTicket) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return s.run(ctx, string(tkt.GetStatementHandle()), nil)
}

// GetSchemaStatement returns the query's result schema without running it.
func (s *Server) GetSchemaStatement(ctx context.Context, cmd flightsql.StatementQuery,
	_ *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	sc, err := s.eng.Schema(ctx, cmd.GetQuery(), 0)
	if err != nil {
		return nil, s.flightError(cmd.GetQuery(), err)
	}
	return &flight.SchemaResult{Schema: flight.SerializeSchema(sc, s.Alloc)}, nil
}

// CreatePreparedStatement checks the query and keeps it under a new
// handle, with its result schema (JDBC clients show it before running).
func (s *Server) CreatePreparedStatement(ctx context.Context,
	req flightsql.ActionCreatePreparedStatementRequest) (flightsql.ActionCreatePreparedStatementResult, error) {
	var res flightsql.ActionCreatePreparedStatementResult
	if len(req.GetTransactionId()) > 0 {
		return res, status.Error(codes.Unimplemented, "sqlserve: transactions are not supported (read-only endpoint)")
	}
	q := req.GetQuery()
	n, err := s.eng.Check(ctx, q)
	if err != nil {
		return res, s.flightError(q, err)
	}
	if sc, err := s.eng.Schema(ctx, q, n); err == nil {
		res.DatasetSchema = sc
	}
	var b [16]byte
	rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.prepared) >= maxPrepared {
		return res, status.Errorf(codes.ResourceExhausted, "sqlserve: %d prepared statements are open; close some",
			maxPrepared)
	}
	s.prepared[h] = &prepared{query: q, nparams: n}
	res.Handle = []byte(h)
	return res, nil
}

func (s *Server) lookup(handle []byte) (*prepared, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.prepared[string(handle)]
	if !ok {
		return nil, status.Error(codes.InvalidArgument, "sqlserve: no such prepared statement")
	}
	return p, nil
}

// ClosePreparedStatement forgets the handle.
func (s *Server) ClosePreparedStatement(_ context.Context, req flightsql.ActionClosePreparedStatementRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.prepared, string(req.GetPreparedStatementHandle()))
	return nil
}

// DoPutPreparedStatementQuery binds the parameters: the first row of the
// batch sent, one column per parameter.
func (s *Server) DoPutPreparedStatementQuery(_ context.Context, cmd flightsql.PreparedStatementQuery,
	rdr flight.MessageReader, _ flight.MetadataWriter) ([]byte, error) {
	p, err := s.lookup(cmd.GetPreparedStatementHandle())
	if err != nil {
		return nil, err
	}
	var params []any
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if rec.NumRows() == 0 || params != nil {
			continue
		}
		params = make([]any, rec.NumCols())
		for i, col := range rec.Columns() {
			if params[i], err = paramValue(col); err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "sqlserve: parameter %d: %v", i+1, err)
			}
		}
	}
	if err := rdr.Err(); err != nil {
		return nil, err
	}
	if len(params) != p.nparams {
		return nil, status.Errorf(codes.InvalidArgument, "sqlserve: the statement takes %d parameters, got %d", p.nparams,
			len(params))
	}
	s.mu.Lock()
	p.params = params
	s.mu.Unlock()
	return cmd.GetPreparedStatementHandle(), nil
}

// paramValue is the Go value of row 0 of a parameter column.
func paramValue(a arrow.Array) (any, error) {
	if a.IsNull(0) {
		return nil, nil
	}
	switch a := a.(type) {
	case *array.Boolean:
		return a.Value(0), nil
	case *array.Int8:
		return int64(a.Value(0)), nil
	case *array.Int16:
		return int64(a.Value(0)), nil
	case *array.Int32:
		return int64(a.Value(0)), nil
	case *array.Int64:
		return a.Value(0), nil
	case *array.Uint32:
		return int64(a.Value(0)), nil
	case *array.Float32:
		return float64(a.Value(0)), nil
	case *array.Float64:
		return a.Value(0), nil
	case *array.String:
		return a.Value(0), nil
	case *array.LargeString:
		return a.Value(0), nil
	case *array.Binary:
		return a.Value(0), nil
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return a.Value(0).ToTime(unit).UTC(), nil
	case *array.Time64:
		// arrow-go's database/sql driver sends a time.Time as a Time64
		// holding its UnixNano (driver/utils.go); a true time of day is
		// below one day.
		v := int64(a.Value(0))
		if unit := a.DataType().(*arrow.Time64Type).Unit; unit == arrow.Nanosecond && v >= int64(24*time.Hour) {
			return time.Unix(0, v).UTC(), nil
		}
		return nil, fmt.Errorf("a time of day (%s) is not supported; cast a string", a.DataType())
	case *array.Date32:
		return a.Value(0).ToTime().UTC(), nil
	case *array.Date64:
		return a.Value(0).ToTime().UTC(), nil
	}
	return nil, fmt.Errorf("type %s is not supported", a.DataType())
}

// GetFlightInfoPreparedStatement hands back a ticket naming the handle.
func (s *Server) GetFlightInfoPreparedStatement(_ context.Context, cmd flightsql.PreparedStatementQuery,
	desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if _, err := s.lookup(cmd.GetPreparedStatementHandle()); err != nil {
		return nil, err
	}
	return &flight.FlightInfo{
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: desc.Cmd}}},
		FlightDescriptor: desc, TotalRecords: -1, TotalBytes: -1,
	}, nil
}

// GetSchemaPreparedStatement returns the result schema.
func (s *Server) GetSchemaPreparedStatement(ctx context.Context, cmd flightsql.PreparedStatementQuery,
	_ *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	p, err := s.lookup(cmd.GetPreparedStatementHandle())
	if err != nil {
		return nil, err
	}
	sc, err := s.eng.Schema(ctx, p.query, p.nparams)
	if err != nil {
		return nil, s.flightError(p.query, err)
	}
	return &flight.SchemaResult{Schema: flight.SerializeSchema(sc, s.Alloc)}, nil
}

// DoGetPreparedStatement runs the statement with its bound parameters.
func (s *Server) DoGetPreparedStatement(ctx context.Context,
	cmd flightsql.PreparedStatementQuery) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	p, err := s.lookup(cmd.GetPreparedStatementHandle())
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	params := p.params
	s.mu.Unlock()
	if len(params) != p.nparams {
		return nil, nil, status.Errorf(codes.InvalidArgument, "sqlserve: the statement takes %d parameters; bind them first",
			p.nparams)
	}
	return s.run(ctx, p.query, params)
}

// DoPutCommandStatementUpdate refuses: the endpoint is read-only.
func (s *Server) DoPutCommandStatementUpdate(context.Context, flightsql.StatementUpdate) (int64, error) {
	return 0, status.Error(codes.PermissionDenied, ErrNotReadOnly.Error())
}

// DoPutPreparedStatementUpdate refuses: the endpoint is read-only.
func (s *Server) DoPutPreparedStatementUpdate(context.Context, flightsql.PreparedStatementUpdate,
	flight.MessageReader) (int64, error) {
	return 0, status.Error(codes.PermissionDenied, ErrNotReadOnly.Error())
}
