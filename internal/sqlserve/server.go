//go:build duckdb_arrow

package sqlserve

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql/schema_ref"
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
			for _, rec := range splitBatch(rdr.RecordBatch(), maxBatchBytes) {
				select {
				case ch <- flight.StreamChunk{Data: rec}:
				case <-qctx.Done():
					rec.Release()
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
func (s *Server) GetFlightInfoStatement(ctx context.Context, cmd flightsql.StatementQuery, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
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
func (s *Server) DoGetStatement(ctx context.Context, tkt flightsql.StatementQueryTicket) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return s.run(ctx, string(tkt.GetStatementHandle()), nil)
}

// GetSchemaStatement returns the query's result schema without running it.
func (s *Server) GetSchemaStatement(ctx context.Context, cmd flightsql.StatementQuery, _ *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	sc, err := s.eng.Schema(ctx, cmd.GetQuery(), 0)
	if err != nil {
		return nil, s.flightError(cmd.GetQuery(), err)
	}
	return &flight.SchemaResult{Schema: flight.SerializeSchema(sc, s.Alloc)}, nil
}

// CreatePreparedStatement checks the query and keeps it under a new
// handle, with its result schema (JDBC clients show it before running).
func (s *Server) CreatePreparedStatement(ctx context.Context, req flightsql.ActionCreatePreparedStatementRequest) (flightsql.ActionCreatePreparedStatementResult, error) {
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
		return res, status.Errorf(codes.ResourceExhausted, "sqlserve: %d prepared statements are open; close some", maxPrepared)
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
func (s *Server) DoPutPreparedStatementQuery(_ context.Context, cmd flightsql.PreparedStatementQuery, rdr flight.MessageReader, _ flight.MetadataWriter) ([]byte, error) {
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
		return nil, status.Errorf(codes.InvalidArgument, "sqlserve: the statement takes %d parameters, got %d", p.nparams, len(params))
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
func (s *Server) GetFlightInfoPreparedStatement(_ context.Context, cmd flightsql.PreparedStatementQuery, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if _, err := s.lookup(cmd.GetPreparedStatementHandle()); err != nil {
		return nil, err
	}
	return &flight.FlightInfo{
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: desc.Cmd}}},
		FlightDescriptor: desc, TotalRecords: -1, TotalBytes: -1,
	}, nil
}

// GetSchemaPreparedStatement returns the result schema.
func (s *Server) GetSchemaPreparedStatement(ctx context.Context, cmd flightsql.PreparedStatementQuery, _ *flight.FlightDescriptor) (*flight.SchemaResult, error) {
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
func (s *Server) DoGetPreparedStatement(ctx context.Context, cmd flightsql.PreparedStatementQuery) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	p, err := s.lookup(cmd.GetPreparedStatementHandle())
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	params := p.params
	s.mu.Unlock()
	if len(params) != p.nparams {
		return nil, nil, status.Errorf(codes.InvalidArgument, "sqlserve: the statement takes %d parameters; bind them first", p.nparams)
	}
	return s.run(ctx, p.query, params)
}

// DoPutCommandStatementUpdate refuses: the endpoint is read-only.
func (s *Server) DoPutCommandStatementUpdate(context.Context, flightsql.StatementUpdate) (int64, error) {
	return 0, status.Error(codes.PermissionDenied, ErrNotReadOnly.Error())
}

// DoPutPreparedStatementUpdate refuses: the endpoint is read-only.
func (s *Server) DoPutPreparedStatementUpdate(context.Context, flightsql.PreparedStatementUpdate, flight.MessageReader) (int64, error) {
	return 0, status.Error(codes.PermissionDenied, ErrNotReadOnly.Error())
}

// --- metadata --------------------------------------------------------------

func (s *Server) info(desc *flight.FlightDescriptor, sc *arrow.Schema) *flight.FlightInfo {
	return &flight.FlightInfo{
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: desc.Cmd}}},
		FlightDescriptor: desc, Schema: flight.SerializeSchema(sc, s.Alloc), TotalRecords: -1, TotalBytes: -1,
	}
}

// oneBatch sends rec as the whole answer.
func oneBatch(rec arrow.RecordBatch) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	ch := make(chan flight.StreamChunk, 1)
	ch <- flight.StreamChunk{Data: rec}
	close(ch)
	return rec.Schema(), ch, nil
}

// strings builds a record of sc's string columns (binary for the last
// column when bin is not nil) from rows.
func (s *Server) stringRecord(sc *arrow.Schema, rows [][]*string, bin [][]byte) arrow.RecordBatch {
	b := array.NewRecordBuilder(s.Alloc, sc)
	defer b.Release()
	for r, row := range rows {
		for i, v := range row {
			sb := b.Field(i).(*array.StringBuilder)
			if v == nil {
				sb.AppendNull()
			} else {
				sb.Append(*v)
			}
		}
		if bin != nil {
			b.Field(len(row)).(*array.BinaryBuilder).Append(bin[r])
		}
	}
	return b.NewRecordBatch()
}

// queryStrings runs a metadata query of string columns on the engine's
// own connection pool (not a client query: no lock-down check needed).
func (s *Server) queryStrings(ctx context.Context, q string, args ...any) ([][]*string, error) {
	rows, err := s.eng.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "sqlserve: metadata: %v", err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]*string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, status.Errorf(codes.Internal, "sqlserve: metadata: %v", err)
		}
		row := make([]*string, len(cols))
		for i, v := range vals {
			if v.Valid {
				row[i] = &v.String
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, status.Errorf(codes.Internal, "sqlserve: metadata: %v", err)
	}
	return out, nil
}

// GetFlightInfoCatalogs implements flightsql.Server.
func (s *Server) GetFlightInfoCatalogs(_ context.Context, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.info(desc, schema_ref.Catalogs), nil
}

// DoGetCatalogs lists DuckDB's user databases (the in-memory "memory").
func (s *Server) DoGetCatalogs(ctx context.Context) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	if err := s.eng.refresh(ctx, false); err != nil {
		return nil, nil, s.flightError("GetCatalogs", err)
	}
	rows, err := s.queryStrings(ctx, "SELECT database_name FROM duckdb_databases() WHERE NOT internal ORDER BY 1")
	if err != nil {
		return nil, nil, err
	}
	return oneBatch(s.stringRecord(schema_ref.Catalogs, rows, nil))
}

// GetFlightInfoSchemas implements flightsql.Server.
func (s *Server) GetFlightInfoSchemas(_ context.Context, _ flightsql.GetDBSchemas, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.info(desc, schema_ref.DBSchemas), nil
}

// userSchemas is the schemas of the user databases, without DuckDB's
// information_schema and pg_catalog.
const userSchemas = `SELECT database_name, schema_name FROM duckdb_schemas()
	WHERE database_name IN (SELECT database_name FROM duckdb_databases() WHERE NOT internal)
	AND schema_name NOT IN ('information_schema', 'pg_catalog')`

// DoGetDBSchemas lists the schemas matching the catalog and the LIKE
// pattern.
func (s *Server) DoGetDBSchemas(ctx context.Context, cmd flightsql.GetDBSchemas) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	rows, err := s.queryStrings(ctx, `SELECT * FROM (`+userSchemas+`)
	WHERE (?::VARCHAR IS NULL OR database_name = ?) AND (?::VARCHAR IS NULL OR schema_name LIKE ?) ORDER BY 1, 2`,
		cmd.GetCatalog(), cmd.GetCatalog(), cmd.GetDBSchemaFilterPattern(), cmd.GetDBSchemaFilterPattern())
	if err != nil {
		return nil, nil, err
	}
	return oneBatch(s.stringRecord(schema_ref.DBSchemas, rows, nil))
}

// GetFlightInfoTables implements flightsql.Server.
func (s *Server) GetFlightInfoTables(_ context.Context, cmd flightsql.GetTables, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if cmd.GetIncludeSchema() {
		return s.info(desc, schema_ref.TablesWithIncludedSchema), nil
	}
	return s.info(desc, schema_ref.Tables), nil
}

// DoGetTables lists the views (and any table) matching the filters, with
// each one's Arrow schema when asked.
func (s *Server) DoGetTables(ctx context.Context, cmd flightsql.GetTables) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	if err := s.eng.refresh(ctx, false); err != nil {
		return nil, nil, s.flightError("GetTables", err)
	}
	q := `SELECT database_name, schema_name, view_name, 'VIEW' FROM duckdb_views() WHERE NOT internal AND NOT temporary
	UNION ALL SELECT database_name, schema_name, table_name, 'BASE TABLE' FROM duckdb_tables() WHERE NOT internal AND NOT temporary`
	q = `SELECT * FROM (` + q + `) t(c, s, n, typ)
	WHERE (?::VARCHAR IS NULL OR c = ?) AND (?::VARCHAR IS NULL OR s LIKE ?) AND (?::VARCHAR IS NULL OR n LIKE ?)`
	args := []any{cmd.GetCatalog(), cmd.GetCatalog(), cmd.GetDBSchemaFilterPattern(), cmd.GetDBSchemaFilterPattern(),
		cmd.GetTableNameFilterPattern(), cmd.GetTableNameFilterPattern()}
	if types := cmd.GetTableTypes(); len(types) > 0 {
		q += " AND typ IN (" + strings.TrimSuffix(strings.Repeat("?, ", len(types)), ", ") + ")"
		for _, t := range types {
			args = append(args, t)
		}
	}
	rows, err := s.queryStrings(ctx, q+" ORDER BY 1, 2, 3", args...)
	if err != nil {
		return nil, nil, err
	}
	if !cmd.GetIncludeSchema() {
		return oneBatch(s.stringRecord(schema_ref.Tables, rows, nil))
	}
	bin := make([][]byte, len(rows))
	for i, r := range rows {
		name := quoteIdent(*r[0]) + "." + quoteIdent(*r[1]) + "." + quoteIdent(*r[2])
		sc, err := s.eng.Schema(ctx, "SELECT * FROM "+name, 0)
		if err != nil {
			return nil, nil, s.flightError("GetTables "+name, err)
		}
		bin[i] = flight.SerializeSchema(sc, s.Alloc)
	}
	return oneBatch(s.stringRecord(schema_ref.TablesWithIncludedSchema, rows, bin))
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// GetFlightInfoTableTypes implements flightsql.Server.
func (s *Server) GetFlightInfoTableTypes(_ context.Context, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.info(desc, schema_ref.TableTypes), nil
}

// DoGetTableTypes lists the table types GetTables reports.
func (s *Server) DoGetTableTypes(context.Context) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	bt, v := "BASE TABLE", "VIEW"
	return oneBatch(s.stringRecord(schema_ref.TableTypes, [][]*string{{&bt}, {&v}}, nil))
}

// emptyAnswer is a result of sc without rows: the views have no keys, and
// a table browser asking for them gets an empty list rather than an error.
func (s *Server) emptyAnswer(sc *arrow.Schema) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	b := array.NewRecordBuilder(s.Alloc, sc)
	defer b.Release()
	return oneBatch(b.NewRecordBatch())
}

// GetFlightInfoPrimaryKeys implements flightsql.Server.
func (s *Server) GetFlightInfoPrimaryKeys(_ context.Context, _ flightsql.TableRef, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.info(desc, schema_ref.PrimaryKeys), nil
}

// DoGetPrimaryKeys answers none: views have no primary keys.
func (s *Server) DoGetPrimaryKeys(context.Context, flightsql.TableRef) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return s.emptyAnswer(schema_ref.PrimaryKeys)
}

// GetFlightInfoImportedKeys implements flightsql.Server.
func (s *Server) GetFlightInfoImportedKeys(_ context.Context, _ flightsql.TableRef, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.info(desc, schema_ref.ImportedExportedKeysAndCrossReference), nil
}

// DoGetImportedKeys answers none: views have no foreign keys.
func (s *Server) DoGetImportedKeys(context.Context, flightsql.TableRef) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return s.emptyAnswer(schema_ref.ImportedExportedKeysAndCrossReference)
}

// GetFlightInfoExportedKeys implements flightsql.Server.
func (s *Server) GetFlightInfoExportedKeys(_ context.Context, _ flightsql.TableRef, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.info(desc, schema_ref.ImportedExportedKeysAndCrossReference), nil
}

// DoGetExportedKeys answers none: views have no foreign keys.
func (s *Server) DoGetExportedKeys(context.Context, flightsql.TableRef) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return s.emptyAnswer(schema_ref.ImportedExportedKeysAndCrossReference)
}

// CloseSession succeeds: the endpoint keeps no session state but prepared
// statements, which their clients close (recent JDBC drivers call this
// when a connection closes).
func (s *Server) CloseSession(context.Context, *flight.CloseSessionRequest) (*flight.CloseSessionResult, error) {
	return &flight.CloseSessionResult{Status: flight.CloseSessionResultClosed}, nil
}
