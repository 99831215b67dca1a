//go:build duckdb_arrow

package sqlserve

import (
	"context"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql/schema_ref"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
)

// xdbcType is one row of GetXdbcTypeInfo: a DuckDB type a query can
// return, described as ODBC's SQLGetTypeInfo and JDBC's getTypeInfo do.
type xdbcType struct {
	name     string          // DuckDB's name, as typeof() and DESCRIBE print it
	dataType pb.XdbcDataType // the XDBC (ODBC/JDBC) type
	size     int32           // column_size: digits for numbers, characters for dates and times; 0: none or unbounded
	prefix   string          // literal prefix ("" none); the suffix is "'" when there is a prefix
	params   []string        // create_params
	numeric  bool            // has signedness and auto_increment attributes
	exact    bool            // an exact number: radix 10 (approximate ones: radix 2)
	scale    [2]int32        // minimum and maximum scale, for DECIMAL
	// sqlType and subcode: SQL_DATETIME (9) with the date/time subcode,
	// SQL_INTERVAL (10), or dataType again.
	sqlType pb.XdbcDataType
	subcode pb.XdbcDatetimeSubcode
}

// xdbcTypes are the types of the views' columns (VARCHAR, BIGINT,
// INTEGER, DOUBLE, DATE, TIMESTAMP WITH TIME ZONE) and the others a
// SELECT over them commonly yields (sum of BIGINT is HUGEINT, casts,
// literals), ordered by data_type as SQLGetTypeInfo orders them.
var xdbcTypes = func() []xdbcType {
	dt := func(name string, sub pb.XdbcDatetimeSubcode, dataType pb.XdbcDataType, size int32, prefix string) xdbcType {
		return xdbcType{name: name, dataType: dataType, size: size, prefix: prefix, sqlType: pb.XdbcDataType_XDBC_DATETIME,
			subcode: sub}
	}
	ts := []xdbcType{
		{name: "BOOLEAN", dataType: pb.XdbcDataType_XDBC_BIT, size: 1},
		{name: "TINYINT", dataType: pb.XdbcDataType_XDBC_TINYINT, size: 3, numeric: true, exact: true},
		{name: "SMALLINT", dataType: pb.XdbcDataType_XDBC_SMALLINT, size: 5, numeric: true, exact: true},
		{name: "INTEGER", dataType: pb.XdbcDataType_XDBC_INTEGER, size: 10, numeric: true, exact: true},
		{name: "BIGINT", dataType: pb.XdbcDataType_XDBC_BIGINT, size: 19, numeric: true, exact: true},
		{name: "HUGEINT", dataType: pb.XdbcDataType_XDBC_DECIMAL, size: 38, numeric: true, exact: true},
		{name: "DECIMAL", dataType: pb.XdbcDataType_XDBC_DECIMAL, size: 38, params: []string{"precision", "scale"},
			numeric: true, exact: true, scale: [2]int32{0, 38}},
		{name: "FLOAT", dataType: pb.XdbcDataType_XDBC_REAL, size: 24, numeric: true},
		{name: "DOUBLE", dataType: pb.XdbcDataType_XDBC_DOUBLE, size: 53, numeric: true},
		{name: "VARCHAR", dataType: pb.XdbcDataType_XDBC_VARCHAR, prefix: "'"},
		{name: "BLOB", dataType: pb.XdbcDataType_XDBC_LONGVARBINARY, prefix: "'"},
		dt("DATE", pb.XdbcDatetimeSubcode_XDBC_SUBCODE_DATE, pb.XdbcDataType_XDBC_DATE, 10, "DATE '"),
		dt("TIME", pb.XdbcDatetimeSubcode_XDBC_SUBCODE_TIME, pb.XdbcDataType_XDBC_TIME, 15, "TIME '"),
		dt("TIMESTAMP", pb.XdbcDatetimeSubcode_XDBC_SUBCODE_TIMESTAMP, pb.XdbcDataType_XDBC_TIMESTAMP, 26, "TIMESTAMP '"),
		dt("TIMESTAMP WITH TIME ZONE", pb.XdbcDatetimeSubcode_XDBC_SUBCODE_TIMESTAMP_WITH_TIMEZONE,
			pb.XdbcDataType_XDBC_TIMESTAMP, 32, "TIMESTAMPTZ '"),
		{name: "INTERVAL", dataType: pb.XdbcDataType_XDBC_INTERVAL, prefix: "INTERVAL '",
			sqlType: pb.XdbcDataType_XDBC_INTERVAL},
	}
	for i := range ts {
		if ts[i].sqlType == 0 {
			ts[i].sqlType = ts[i].dataType
		}
	}
	slices.SortStableFunc(ts, func(a, b xdbcType) int { return int(a.dataType) - int(b.dataType) })
	return ts
}()

// GetFlightInfoXdbcTypeInfo hands back a ticket for the type list.
func (s *Server) GetFlightInfoXdbcTypeInfo(_ context.Context, _ flightsql.GetXdbcTypeInfo,
	desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.info(desc, schema_ref.XdbcTypeInfo), nil
}

// DoGetXdbcTypeInfo lists the types queries return (xdbcTypes), or those
// of one XDBC data type when the request names it.
func (s *Server) DoGetXdbcTypeInfo(_ context.Context,
	cmd flightsql.GetXdbcTypeInfo) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	b := array.NewRecordBuilder(s.Alloc, schema_ref.XdbcTypeInfo)
	defer b.Release()
	str := func(i int, v string) {
		if v == "" {
			b.Field(i).AppendNull()
		} else {
			b.Field(i).(*array.StringBuilder).Append(v)
		}
	}
	i32 := func(i int, v int32, valid bool) {
		if valid {
			b.Field(i).(*array.Int32Builder).Append(v)
		} else {
			b.Field(i).AppendNull()
		}
	}
	boolean := func(i int, v, valid bool) {
		if valid {
			b.Field(i).(*array.BooleanBuilder).Append(v)
		} else {
			b.Field(i).AppendNull()
		}
	}
	filter := cmd.GetDataType()
	for _, t := range xdbcTypes {
		if filter != nil && *filter != int32(t.dataType) {
			continue
		}
		str(0, t.name)
		i32(1, int32(t.dataType), true)
		i32(2, t.size, t.size > 0)
		str(3, t.prefix)
		suffix := ""
		if t.prefix != "" {
			suffix = "'"
		}
		str(4, suffix)
		lb := b.Field(5).(*array.ListBuilder)
		if t.params == nil {
			lb.AppendNull()
		} else {
			lb.Append(true)
			for _, p := range t.params {
				lb.ValueBuilder().(*array.StringBuilder).Append(p)
			}
		}
		i32(6, int32(pb.Nullable_NULLABILITY_NULLABLE), true)
		b.Field(7).(*array.BooleanBuilder).Append(t.dataType == pb.XdbcDataType_XDBC_VARCHAR) // case_sensitive
		searchable := pb.Searchable_SEARCHABLE_BASIC                                          // everything but LIKE
		if t.dataType == pb.XdbcDataType_XDBC_VARCHAR {
			searchable = pb.Searchable_SEARCHABLE_FULL
		}
		i32(8, int32(searchable), true)
		boolean(9, false, t.numeric)                                    // unsigned_attribute
		b.Field(10).(*array.BooleanBuilder).Append(t.name == "DECIMAL") // fixed_prec_scale
		boolean(11, false, t.numeric)                                   // auto_increment
		str(12, t.name)                                                 // local_type_name
		i32(13, t.scale[0], t.params != nil)
		i32(14, t.scale[1], t.params != nil)
		i32(15, int32(t.sqlType), true)
		i32(16, int32(t.subcode), t.subcode != 0)
		radix := int32(2)
		if t.exact {
			radix = 10
		}
		i32(17, radix, t.numeric)
		i32(18, 0, false) // interval_precision
	}
	return oneBatch(b.NewRecordBatch())
}
