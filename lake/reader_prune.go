package lake

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// This file holds pruning: the columns a file has, and the row groups a
// query can skip from their statistics.

// fileColumns maps each raw column (by bit position) to its leaf index in
// one file, -1 when not read.
type fileColumns [len(columnNames)]int

func (s *scanner) resolveColumns(pf *parquet.File, path string) (fileColumns, error) {
	var fc fileColumns
	for i, name := range columnNames {
		fc[i] = -1
		if s.cols&(1<<i) == 0 && !s.prunesOn(i) {
			continue
		}
		leaf, ok := pf.Schema().Lookup(name)
		if !ok {
			return fc, fmt.Errorf("%w: %s has no column %q", ErrBadFile, path, name)
		}
		fc[i] = leaf.ColumnIndex
	}
	return fc, nil
}

// prunesOn reports whether row-group pruning looks at column bit i.
func (s *scanner) prunesOn(i int) bool {
	switch Columns(1 << i) {
	case ColOccurredAt:
		return true
	case ColKey:
		return len(s.q.Keys) > 0
	case ColEventType:
		return len(s.q.EventTypes) > 0
	}
	return false
}

// prune reports whether row group rgi cannot hold a selected row, judging by
// its column statistics. Missing statistics never prune.
func (s *scanner) prune(pf *parquet.File, rgi int, fc fileColumns) bool {
	cc := pf.Metadata().RowGroups[rgi].Columns
	if st := &cc[fc[bitPos(ColOccurredAt)]].MetaData.Statistics; len(st.MinValue) == 8 && len(st.MaxValue) == 8 {
		lo := int64(binary.LittleEndian.Uint64(st.MinValue))
		hi := int64(binary.LittleEndian.Uint64(st.MaxValue))
		if hi < s.fromUS || lo >= s.toUS {
			return true
		}
	}
	if len(s.q.Keys) > 0 && !anyInRange(cc[fc[bitPos(ColKey)]].MetaData.Statistics, s.q.Keys) {
		return true
	}
	if len(s.q.EventTypes) > 0 && !anyInRange(cc[fc[bitPos(ColEventType)]].MetaData.Statistics, s.q.EventTypes) {
		return true
	}
	return false
}

// anyInRange reports whether any of vals may lie within the byte-array
// statistics' [min, max]; true when there are no statistics.
func anyInRange(st format.Statistics, vals []string) bool {
	lo, hi := st.MinValue, st.MaxValue
	if lo == nil || hi == nil {
		return true
	}
	for _, v := range vals {
		if bytes.Compare([]byte(v), lo) >= 0 && bytes.Compare([]byte(v), hi) <= 0 {
			return true
		}
	}
	return false
}

func bitPos(c Columns) int {
	for i := 0; i < len(columnNames); i++ {
		if c == 1<<i {
			return i
		}
	}
	panic("lake: not a single column")
}
