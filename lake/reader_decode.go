package lake

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/parquet-go/parquet-go"
)

// This file holds page decoding: a row group's columns read into reusable
// column buffers, dictionary pages mapped once.

// rgData is one row group's projected columns, decoded. String columns are
// kept as one byte buffer with offsets; key and event_type as interned ids.
type rgData struct {
	n    int
	id   byteColumn
	typ  []int32
	occ  []int64
	ing  []int64
	key  []int32
	val  []float64
	data byteColumn
	part []int32
	off  []int64

	dictMap map[parquet.Dictionary][]int32 // dictionary index -> interned id
}

type byteColumn struct {
	buf  []byte
	offs []uint32 // n+1 offsets into buf
}

func (c *byteColumn) reset() { c.buf, c.offs = c.buf[:0], append(c.offs[:0], 0) }

func (c *byteColumn) at(i int) []byte { return c.buf[c.offs[i]:c.offs[i+1]] }

func (c *byteColumn) appendValue(v []byte) {
	c.buf = append(c.buf, v...)
	c.offs = append(c.offs, uint32(len(c.buf)))
}

// fill copies row i's projected columns into r.
func (b *rgData) fill(r *RawRow, i int, s *scanner) {
	*r = RawRow{}
	c := s.cols
	if c&ColEventID != 0 {
		r.EventID = string(b.id.at(i))
	}
	if c&ColEventType != 0 {
		r.EventType = s.types[b.typ[i]]
	}
	if c&ColOccurredAt != 0 {
		r.OccurredAt = b.occ[i]
	}
	if c&ColIngestedAt != 0 {
		r.IngestedAt = b.ing[i]
	}
	if c&ColKey != 0 {
		r.Key = s.keys[b.key[i]]
	}
	if c&ColValue != 0 {
		r.Value = b.val[i]
	}
	if c&ColData != 0 {
		r.Data = string(b.data.at(i))
	}
	if c&ColKafkaPartition != 0 {
		r.KafkaPartition = b.part[i]
	}
	if c&ColKafkaOffset != 0 {
		r.KafkaOffset = b.off[i]
	}
}

// decode reads the projected columns of rg.
func (b *rgData) decode(s *scanner, rg parquet.RowGroup, fc fileColumns) error {
	b.n = int(rg.NumRows())
	chunks := rg.ColumnChunks()
	if b.dictMap == nil {
		b.dictMap = make(map[parquet.Dictionary][]int32)
	}
	clear(b.dictMap)
	var errs []error
	col := func(c Columns) parquet.ColumnChunk {
		if s.cols&c == 0 {
			return nil
		}
		return chunks[fc[bitPos(c)]]
	}
	if cc := col(ColEventID); cc != nil {
		b.id.reset()
		errs = append(errs, readBytes(cc, &b.id))
	}
	if cc := col(ColData); cc != nil {
		b.data.reset()
		errs = append(errs, readBytes(cc, &b.data))
	}
	if cc := col(ColKey); cc != nil {
		b.key = b.key[:0]
		errs = append(errs, b.readInterned(cc, &b.key, s.internKey))
	}
	if cc := col(ColEventType); cc != nil {
		b.typ = b.typ[:0]
		errs = append(errs, b.readInterned(cc, &b.typ, s.internType))
	}
	if cc := col(ColOccurredAt); cc != nil {
		b.occ = b.occ[:0]
		errs = append(errs, readFixed(cc, &b.occ, func(v []parquet.Value, i int) int64 { return v[i].Int64() }, int64Data))
	}
	if cc := col(ColIngestedAt); cc != nil {
		b.ing = b.ing[:0]
		errs = append(errs, readFixed(cc, &b.ing, func(v []parquet.Value, i int) int64 { return v[i].Int64() }, int64Data))
	}
	if cc := col(ColValue); cc != nil {
		b.val = b.val[:0]
		errs = append(errs,
			readFixed(cc, &b.val, func(v []parquet.Value, i int) float64 { return v[i].Double() }, doubleData))
	}
	if cc := col(ColKafkaPartition); cc != nil {
		b.part = b.part[:0]
		errs = append(errs, readFixed(cc, &b.part, func(v []parquet.Value, i int) int32 { return v[i].Int32() }, int32Data))
	}
	if cc := col(ColKafkaOffset); cc != nil {
		b.off = b.off[:0]
		errs = append(errs, readFixed(cc, &b.off, func(v []parquet.Value, i int) int64 { return v[i].Int64() }, int64Data))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, l := range []int{len(b.id.offs) - 1, len(b.key), len(b.occ)} {
		if l != b.n {
			return fmt.Errorf("column has %d values for %d rows", l, b.n)
		}
	}
	return nil
}

func int64Data(p parquet.Page) []int64    { d := p.Data(); return d.Int64() }
func int32Data(p parquet.Page) []int32    { d := p.Data(); return d.Int32() }
func doubleData(p parquet.Page) []float64 { d := p.Data(); return d.Double() }
func pageNulls(p parquet.Page) error {
	if p.NumNulls() > 0 {
		return errors.New("unexpected nulls")
	}
	return nil
}

// eachPage calls fn with every page of cc and releases it afterwards.
func eachPage(cc parquet.ColumnChunk, fn func(p parquet.Page) error) error {
	pages := cc.Pages()
	defer pages.Close()
	for {
		p, err := pages.ReadPage()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		err = pageNulls(p)
		if err == nil {
			err = fn(p)
		}
		parquet.Release(p)
		if err != nil {
			return err
		}
	}
}

// readFixed appends a fixed-width column's values to dst. Plain pages are
// copied in bulk; dictionary pages are looked up value by value.
func readFixed[T any](cc parquet.ColumnChunk, dst *[]T, conv func([]parquet.Value, int) T,
	plain func(parquet.Page) []T) error {
	var vals []parquet.Value
	return eachPage(cc, func(p parquet.Page) error {
		if dict := p.Dictionary(); dict != nil {
			d := p.Data()
			idx := d.Int32()
			vals = slices.Grow(vals[:0], len(idx))[:len(idx)]
			dict.Lookup(idx, vals)
			for i := range idx {
				*dst = append(*dst, conv(vals, i))
			}
			return nil
		}
		*dst = append(*dst, plain(p)...)
		return nil
	})
}

// readBytes appends a byte-array column's values to dst.
func readBytes(cc parquet.ColumnChunk, dst *byteColumn) error {
	return eachPage(cc, func(p parquet.Page) error {
		d := p.Data()
		if dict := p.Dictionary(); dict != nil {
			dd := dict.Page().Data()
			data, offs := dd.ByteArray()
			for _, j := range d.Int32() {
				dst.appendValue(data[offs[j]:offs[j+1]])
			}
			return nil
		}
		data, offs := d.ByteArray()
		if len(offs) == 0 {
			return nil
		}
		base := uint32(len(dst.buf)) - offs[0]
		dst.buf = append(dst.buf, data[offs[0]:offs[len(offs)-1]]...)
		for _, o := range offs[1:] {
			dst.offs = append(dst.offs, o+base)
		}
		return nil
	})
}

// readInterned appends a low-cardinality string column as interned ids.
// Dictionary pages map each dictionary entry once.
func (b *rgData) readInterned(cc parquet.ColumnChunk, dst *[]int32, intern func(string) int32) error {
	return readInterned(cc, dst, b.dictMap, intern)
}

// readInterned appends a low-cardinality string column as interned ids;
// dictMap caches each dictionary's ids.
func readInterned(cc parquet.ColumnChunk, dst *[]int32, dictMap map[parquet.Dictionary][]int32,
	intern func(string) int32) error {
	return eachPage(cc, func(p parquet.Page) error {
		d := p.Data()
		if dict := p.Dictionary(); dict != nil {
			m, ok := dictMap[dict]
			if !ok {
				dd := dict.Page().Data()
				data, offs := dd.ByteArray()
				m = make([]int32, len(offs)-1)
				for j := range m {
					m[j] = intern(string(data[offs[j]:offs[j+1]]))
				}
				dictMap[dict] = m
			}
			for _, j := range d.Int32() {
				*dst = append(*dst, m[j])
			}
			return nil
		}
		data, offs := d.ByteArray()
		var last []byte
		lastID := int32(-1)
		for j := 0; j+1 < len(offs); j++ {
			v := data[offs[j]:offs[j+1]]
			if lastID < 0 || !bytes.Equal(v, last) {
				lastID, last = intern(string(v)), v
			}
			*dst = append(*dst, lastID)
		}
		return nil
	})
}
