package lake

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"

	"reckon/lake/storage"
)

// merger is a k-way merge of sorted raw files in compareRaw order.
type merger struct {
	h          mergeHeap
	dupOffsets int64
	last       RawRow // the last row returned
	haveLast   bool
	group      []RawRow // copies of the current event at distinct offsets
	dropped    []DroppedRow
}

func (l *Lake) newMerger(ctx context.Context, dir string, inputs []compactInput) (*merger, error) {
	m := &merger{}
	for _, in := range inputs {
		c, err := l.openCursor(ctx, storage.JoinKey(dir, in.name), in.size)
		if err != nil {
			m.close()
			return nil, err
		}
		if ok, err := c.next(); err != nil {
			c.close()
			m.close()
			return nil, err
		} else if !ok {
			c.close()
			continue
		}
		m.h.cursors = append(m.h.cursors, c)
	}
	heap.Init(&m.h)
	return m, nil
}

func (m *merger) close() {
	for _, c := range m.h.cursors {
		c.close()
	}
	m.h.cursors = nil
}

func (m *merger) more() bool { return m.h.Len() > 0 }

// advance moves the head cursor past its row.
func (m *merger) advance() error {
	c := m.h.cursors[0]
	ok, err := c.next()
	if err != nil {
		return err
	}
	if ok {
		heap.Fix(&m.h, 0)
	} else {
		c.close()
		heap.Pop(&m.h)
	}
	return nil
}

// nextOffset returns the next row whose (partition, offset) was not
// returned yet: compareRaw ends with partition and offset, and one offset
// is always the same record, so repeats are adjacent.
func (m *merger) nextOffset() (*RawRow, bool, error) {
	for m.h.Len() > 0 {
		r := m.h.cursors[0].row()
		dup := m.haveLast && r.KafkaPartition == m.last.KafkaPartition && r.KafkaOffset == m.last.KafkaOffset
		if !dup {
			m.last, m.haveLast = *r, true
		} else {
			m.dupOffsets++
		}
		if err := m.advance(); err != nil {
			return nil, false, err
		}
		if !dup {
			return &m.last, true, nil
		}
	}
	return nil, false, nil
}

// nextEvent returns the kept copy of the next event: of the rows with one
// (key, occurred_at, event_id) — adjacent in compareRaw order — the one
// ingested first (then the lowest partition and offset). The others are
// appended to m.dropped.
func (m *merger) nextEvent() (*RawRow, bool, error) {
	m.group = m.group[:0]
	for m.h.Len() > 0 {
		r := m.h.cursors[0].row()
		if len(m.group) > 0 {
			g := &m.group[0]
			if r.Key != g.Key || r.OccurredAt != g.OccurredAt || r.EventID != g.EventID {
				break
			}
			if l := &m.group[len(m.group)-1]; r.KafkaPartition == l.KafkaPartition && r.KafkaOffset == l.KafkaOffset {
				m.dupOffsets++
				if err := m.advance(); err != nil {
					return nil, false, err
				}
				continue
			}
		}
		m.group = append(m.group, *r)
		if err := m.advance(); err != nil {
			return nil, false, err
		}
	}
	if len(m.group) == 0 {
		return nil, false, nil
	}
	k := 0
	for i := 1; i < len(m.group); i++ {
		a, b := &m.group[i], &m.group[k]
		if c := cmp.Or(cmp.Compare(a.IngestedAt, b.IngestedAt), cmp.Compare(a.KafkaPartition, b.KafkaPartition),
			cmp.Compare(a.KafkaOffset, b.KafkaOffset)); c < 0 {
			k = i
		}
	}
	kept := &m.group[k]
	for i := range m.group {
		if i == k {
			continue
		}
		d := &m.group[i]
		m.dropped = append(m.dropped, DroppedRow{
			EventID: d.EventID, Key: d.Key, OccurredAt: d.OccurredAt, IngestedAt: d.IngestedAt,
			KafkaPartition: d.KafkaPartition, KafkaOffset: d.KafkaOffset,
			KeptPartition: kept.KafkaPartition, KeptOffset: kept.KafkaOffset,
		})
	}
	m.last = *kept
	return &m.last, true, nil
}

// cursor reads one sorted raw file in chunks.
type cursor struct {
	key string
	f   storage.ObjectReader
	r   *parquet.GenericReader[RawRow]
	buf []RawRow
	i   int
}

func (l *Lake) openCursor(ctx context.Context, key string, size int64) (*cursor, error) {
	f, pf, err := l.openParquet(ctx, key, size)
	if err != nil {
		return nil, fmt.Errorf("lake: compact: %w", err)
	}
	// A chunk of at most 1,024 rows, no larger than the file: a merge
	// holds a cursor per input file, and an hour of small archive files
	// would otherwise allocate (and clear) a full chunk for each.
	n := min(max(pf.NumRows(), 1), 1024)
	return &cursor{key: key, f: f, r: parquet.NewGenericReader[RawRow](pf), buf: make([]RawRow, 0, n)}, nil
}

func (c *cursor) row() *RawRow { return &c.buf[c.i] }

// next advances to the next row; false at the end of the file.
func (c *cursor) next() (bool, error) {
	c.i++
	if c.i < len(c.buf) {
		return true, nil
	}
	c.buf = c.buf[:cap(c.buf)]
	n, err := c.r.Read(c.buf)
	c.buf, c.i = c.buf[:n], 0
	if n > 0 {
		return true, nil
	}
	if err == nil || err == io.EOF {
		return false, nil
	}
	return false, badFile(c.key, err)
}

func (c *cursor) close() {
	if c.r != nil {
		c.r.Close()
		c.f.Close()
		c.r = nil
	}
}

type mergeHeap struct{ cursors []*cursor }

func (h *mergeHeap) Len() int { return len(h.cursors) }

func (h *mergeHeap) Less(i, j int) bool {
	return compareRaw(h.cursors[i].row(), h.cursors[j].row()) < 0
}

func (h *mergeHeap) Swap(i, j int) { h.cursors[i], h.cursors[j] = h.cursors[j], h.cursors[i] }

func (h *mergeHeap) Push(x any) { h.cursors = append(h.cursors, x.(*cursor)) }

func (h *mergeHeap) Pop() any {
	c := h.cursors[len(h.cursors)-1]
	h.cursors = h.cursors[:len(h.cursors)-1]
	return c
}
