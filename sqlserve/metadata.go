//go:build duckdb_arrow

package sqlserve

// The Flight SQL metadata calls a client's table browser makes.

import (
	"context"
	"database/sql"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql/schema_ref"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

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

// stringRecord builds a record of sc's string columns (binary for the last
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
func (s *Server) GetFlightInfoSchemas(_ context.Context, _ flightsql.GetDBSchemas,
	desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.info(desc, schema_ref.DBSchemas), nil
}

// userSchemas is the schemas of the user databases, without DuckDB's
// information_schema and pg_catalog.
const userSchemas = `SELECT database_name, schema_name FROM duckdb_schemas()
	WHERE database_name IN (SELECT database_name FROM duckdb_databases() WHERE NOT internal)
	AND schema_name NOT IN ('information_schema', 'pg_catalog')`

// DoGetDBSchemas lists the schemas matching the catalog and the LIKE
// pattern.
func (s *Server) DoGetDBSchemas(ctx context.Context,
	cmd flightsql.GetDBSchemas) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	rows, err := s.queryStrings(ctx, `SELECT * FROM (`+userSchemas+`)
	WHERE (?::VARCHAR IS NULL OR database_name = ?) AND (?::VARCHAR IS NULL OR schema_name LIKE ?) ORDER BY 1, 2`,
		cmd.GetCatalog(), cmd.GetCatalog(), cmd.GetDBSchemaFilterPattern(), cmd.GetDBSchemaFilterPattern())
	if err != nil {
		return nil, nil, err
	}
	return oneBatch(s.stringRecord(schema_ref.DBSchemas, rows, nil))
}

// GetFlightInfoTables implements flightsql.Server.
func (s *Server) GetFlightInfoTables(_ context.Context, cmd flightsql.GetTables,
	desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if cmd.GetIncludeSchema() {
		return s.info(desc, schema_ref.TablesWithIncludedSchema), nil
	}
	return s.info(desc, schema_ref.Tables), nil
}

// DoGetTables lists the views (and any table) matching the filters, with
// each one's Arrow schema when asked.
func (s *Server) DoGetTables(ctx context.Context,
	cmd flightsql.GetTables) (*arrow.Schema, <-chan flight.StreamChunk, error) {
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
func (s *Server) GetFlightInfoPrimaryKeys(_ context.Context, _ flightsql.TableRef,
	desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.info(desc, schema_ref.PrimaryKeys), nil
}

// DoGetPrimaryKeys answers none: views have no primary keys.
func (s *Server) DoGetPrimaryKeys(context.Context,
	flightsql.TableRef) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return s.emptyAnswer(schema_ref.PrimaryKeys)
}

// GetFlightInfoImportedKeys implements flightsql.Server.
func (s *Server) GetFlightInfoImportedKeys(_ context.Context, _ flightsql.TableRef,
	desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.info(desc, schema_ref.ImportedExportedKeysAndCrossReference), nil
}

// DoGetImportedKeys answers none: views have no foreign keys.
func (s *Server) DoGetImportedKeys(context.Context,
	flightsql.TableRef) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return s.emptyAnswer(schema_ref.ImportedExportedKeysAndCrossReference)
}

// GetFlightInfoExportedKeys implements flightsql.Server.
func (s *Server) GetFlightInfoExportedKeys(_ context.Context, _ flightsql.TableRef,
	desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.info(desc, schema_ref.ImportedExportedKeysAndCrossReference), nil
}

// DoGetExportedKeys answers none: views have no foreign keys.
func (s *Server) DoGetExportedKeys(context.Context,
	flightsql.TableRef) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return s.emptyAnswer(schema_ref.ImportedExportedKeysAndCrossReference)
}

// CloseSession succeeds: the endpoint keeps no session state but prepared
// statements, which their clients close (recent JDBC drivers call this
// when a connection closes).
func (s *Server) CloseSession(context.Context, *flight.CloseSessionRequest) (*flight.CloseSessionResult, error) {
	return &flight.CloseSessionResult{Status: flight.CloseSessionResultClosed}, nil
}
