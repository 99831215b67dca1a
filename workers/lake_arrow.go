package workers

import (
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"reckon/lake"
)

// arrowBatchRows bounds the rows of one Arrow record batch of `lake query
// --format arrow`, so a reader can start before the last row.
const arrowBatchRows = 64 * 1024

// utcMicros is the timestamp type of every time column: microseconds, UTC,
// like the lake's Parquet files.
var utcMicros = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

// lakeAggSchema is the Arrow schema of `lake query --topic`: the columns
// of --format csv and json with their natural types.
var lakeAggSchema = arrow.NewSchema([]arrow.Field{
	{Name: "key", Type: arrow.BinaryTypes.String},
	{Name: "window_start", Type: utcMicros},
	{Name: "window_end", Type: utcMicros},
	{Name: "count", Type: arrow.PrimitiveTypes.Int64},
	{Name: "sum", Type: arrow.PrimitiveTypes.Float64},
	{Name: "avg", Type: arrow.PrimitiveTypes.Float64},
	{Name: "min", Type: arrow.PrimitiveTypes.Float64},
	{Name: "max", Type: arrow.PrimitiveTypes.Float64},
}, nil)

// lakeWindowSchema is the Arrow schema of `lake query --stream`: the
// aggregate columns, then the windows table's status columns.
var lakeWindowSchema = arrow.NewSchema(append(lakeAggSchema.Fields(),
	arrow.Field{Name: "status", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "version", Type: arrow.PrimitiveTypes.Int64},
	arrow.Field{Name: "computed_by", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "reason", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "updated_at", Type: utcMicros},
), nil)

// writeArrowAggs writes aggs as an Arrow IPC stream (schema lakeAggSchema)
// to out.
func writeArrowAggs(out io.Writer, aggs []lake.WindowAgg) error {
	return writeArrow(out, lakeAggSchema, len(aggs), func(b *array.RecordBuilder, i int) {
		a := aggs[i]
		appendAgg(b, a.Key, a.WindowStart.UnixMicro(), a.WindowEnd.UnixMicro(), a.Count, a.Sum, a.Min, a.Max)
	})
}

// writeArrowWindows writes windows table rows as an Arrow IPC stream
// (schema lakeWindowSchema) to out.
func writeArrowWindows(out io.Writer, ws []lake.WindowRow) error {
	return writeArrow(out, lakeWindowSchema, len(ws), func(b *array.RecordBuilder, i int) {
		w := &ws[i]
		appendAgg(b, w.Key, w.WindowStart, w.WindowEnd, w.Count, w.Sum, w.Min, w.Max)
		b.Field(8).(*array.StringBuilder).Append(w.Status)
		b.Field(9).(*array.Int64Builder).Append(w.Version)
		b.Field(10).(*array.StringBuilder).Append(w.ComputedBy)
		b.Field(11).(*array.StringBuilder).Append(w.Reason)
		b.Field(12).(*array.TimestampBuilder).Append(arrow.Timestamp(w.UpdatedAt))
	})
}

// appendAgg appends the aggregate columns; avg is NULL for an empty window
// (a retraction).
func appendAgg(b *array.RecordBuilder, key string, start, end, count int64, sum, mn, mx float64) {
	b.Field(0).(*array.StringBuilder).Append(key)
	b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(start))
	b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(end))
	b.Field(3).(*array.Int64Builder).Append(count)
	b.Field(4).(*array.Float64Builder).Append(sum)
	if count > 0 {
		b.Field(5).(*array.Float64Builder).Append(sum / float64(count))
	} else {
		b.Field(5).(*array.Float64Builder).AppendNull()
	}
	b.Field(6).(*array.Float64Builder).Append(mn)
	b.Field(7).(*array.Float64Builder).Append(mx)
}

// writeArrow writes n rows, appended by row, as an Arrow IPC stream of
// record batches of at most arrowBatchRows rows. An empty result is a
// stream with the schema and no batch.
func writeArrow(out io.Writer, schema *arrow.Schema, n int, row func(b *array.RecordBuilder, i int)) error {
	mem := memory.NewGoAllocator()
	w := ipc.NewWriter(out, ipc.WithSchema(schema), ipc.WithAllocator(mem))
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for lo := 0; lo < n; lo += arrowBatchRows {
		hi := min(n, lo+arrowBatchRows)
		b.Reserve(hi - lo)
		for i := lo; i < hi; i++ {
			row(b, i)
		}
		rec := b.NewRecordBatch()
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			w.Close()
			return fmt.Errorf("lake query: arrow: %w", err)
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("lake query: arrow: %w", err)
	}
	return nil
}
