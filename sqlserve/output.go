package sqlserve

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/csv"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"reckon/internal/numfmt"
)

// Formats are the output formats of `reckon sql`.
var Formats = []string{"table", "csv", "json", "arrow"}

// WriteResult writes every batch of rdr to w as format: "table" (aligned
// text for a terminal), "csv" (with a header), "json" (one object per row,
// columns in order) or "arrow" (an Arrow IPC stream, e.g. for
// pyarrow.ipc.open_stream or apache-arrow's tableFromIPC). It returns the
// number of rows written.
func WriteResult(w io.Writer, format string, rdr array.RecordReader) (int64, error) {
	var n int64
	switch format {
	case "arrow":
		iw := ipc.NewWriter(w, ipc.WithSchema(rdr.Schema()))
		for rdr.Next() {
			rec := rdr.RecordBatch()
			n += rec.NumRows()
			if err := iw.Write(rec); err != nil {
				return n, err
			}
		}
		if err := rdr.Err(); err != nil {
			iw.Close()
			return n, err
		}
		return n, iw.Close()
	case "csv":
		cw := csv.NewWriter(w, rdr.Schema(), csv.WithHeader(true), csv.WithNullWriter(""))
		for rdr.Next() {
			rec := rdr.RecordBatch()
			n += rec.NumRows()
			if err := cw.Write(rec); err != nil {
				return n, err
			}
		}
		if err := rdr.Err(); err != nil {
			return n, err
		}
		if n == 0 { // the header, for an empty result too
			b := array.NewRecordBuilder(memory.DefaultAllocator, rdr.Schema())
			rec := b.NewRecordBatch()
			err := cw.Write(rec)
			rec.Release()
			b.Release()
			if err != nil {
				return 0, err
			}
		}
		cw.Flush()
		return n, cw.Error()
	case "json":
		bw := bufio.NewWriter(w)
		names := make([][]byte, len(rdr.Schema().Fields()))
		for i, f := range rdr.Schema().Fields() {
			names[i], _ = json.Marshal(f.Name)
		}
		for rdr.Next() {
			rec := rdr.RecordBatch()
			for r := 0; r < int(rec.NumRows()); r++ {
				bw.WriteByte('{')
				for c, col := range rec.Columns() {
					if c > 0 {
						bw.WriteByte(',')
					}
					bw.Write(names[c])
					bw.WriteByte(':')
					v, err := json.Marshal(col.GetOneForMarshal(r))
					if err != nil {
						return n, err
					}
					bw.Write(v)
				}
				bw.WriteString("}\n")
				n++
			}
		}
		if err := rdr.Err(); err != nil {
			return n, err
		}
		return n, bw.Flush()
	case "table":
		return writeTable(w, rdr)
	}
	return 0, fmt.Errorf("sqlserve: output format %q is not one of %s", format, strings.Join(Formats, ", "))
}

// writeTable prints the result as aligned columns; it holds the whole
// result in memory (a terminal's worth).
func writeTable(w io.Writer, rdr array.RecordReader) (int64, error) {
	fields := rdr.Schema().Fields()
	rows := [][]string{make([]string, len(fields))}
	for i, f := range fields {
		rows[0][i] = f.Name
	}
	for rdr.Next() {
		rows = append(rows, tableCells(rdr.RecordBatch())...)
	}
	if err := rdr.Err(); err != nil {
		return 0, err
	}
	width := make([]int, len(fields))
	for _, r := range rows {
		for i, v := range r {
			width[i] = max(width[i], utf8.RuneCountInString(v))
		}
	}
	bw := bufio.NewWriter(w)
	line := func(r []string) {
		for i, v := range r {
			if i > 0 {
				bw.WriteString("  ")
			}
			bw.WriteString(v)
			if i < len(r)-1 {
				bw.WriteString(strings.Repeat(" ", width[i]-utf8.RuneCountInString(v)))
			}
		}
		bw.WriteByte('\n')
	}
	line(rows[0])
	sep := make([]string, len(fields))
	for i := range sep {
		sep[i] = strings.Repeat("-", width[i])
	}
	line(sep)
	for _, r := range rows[1:] {
		line(r)
	}
	fmt.Fprintf(bw, "(%d rows)\n", len(rows)-1)
	return int64(len(rows) - 1), bw.Flush()
}

// tableCells renders rec's values for a person: as cellStrings, but
// numbers in plain notation with the thousands grouped (2,974,500, not
// 2.9745e+06; internal/numfmt).
func tableCells(rec arrow.RecordBatch) [][]string {
	rows := cellStrings(rec)
	for c, col := range rec.Columns() {
		var f func(r int) string
		switch a := col.(type) {
		case *array.Float64:
			f = func(r int) string { return numfmt.Float(a.Value(r)) }
		case *array.Float32:
			f = func(r int) string { return numfmt.Float(float64(a.Value(r))) }
		case *array.Int64:
			f = func(r int) string { return numfmt.Int(a.Value(r)) }
		case *array.Int32:
			f = func(r int) string { return numfmt.Int(int64(a.Value(r))) }
		case *array.Uint64:
			f = func(r int) string { return numfmt.Uint(a.Value(r)) }
		case *array.Uint32:
			f = func(r int) string { return numfmt.Uint(uint64(a.Value(r))) }
		default:
			continue
		}
		for r := range rows {
			if !col.IsNull(r) {
				rows[r][c] = f(r)
			}
		}
	}
	return rows
}

// cellStrings renders rec's values for display ("NULL" for nulls).
func cellStrings(rec arrow.RecordBatch) [][]string {
	rows := make([][]string, rec.NumRows())
	for r := range rows {
		rows[r] = make([]string, rec.NumCols())
		for c, col := range rec.Columns() {
			if col.IsNull(r) {
				rows[r][c] = "NULL"
			} else {
				rows[r][c] = strings.Clone(col.ValueStr(r)) // ValueStr may alias the batch's memory
			}
		}
	}
	return rows
}
