package lake

import (
	"cmp"
	"context"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"reckon/lake/storage"
)

// compactClosed merges every file of a closed hour into compacted files
// without duplicates, records the dropped redeliveries, then deletes the
// inputs (write, record, delete: no crash point loses an offset).
func (l *Lake) compactClosed(ctx context.Context, topic string, hour time.Time, dir string, hf hourFiles,
	o CompactOptions,
	takeover bool, res *CompactResult) error {
	ddir := droppedHourKey(topic, hour)
	des, err := l.store.List(ctx, ddir)
	if err != nil {
		return err
	}
	var oldDropped []string
	gen := hf.maxGen
	for _, e := range des {
		if g, ok := parseDroppedName(topic, e.Name); ok && !e.Dir {
			oldDropped = append(oldDropped, e.Name)
			gen = max(gen, g)
		}
	}
	gen++
	if takeover {
		// The killed holder may have listed gen-1 as its highest and be
		// writing gen: skip it.
		gen++
	}
	inputs := slices.Clone(hf.compacted)
	for _, in := range hf.archive {
		inputs = append(inputs, in...)
	}
	slices.SortFunc(inputs, func(a, b compactInput) int { return strings.Compare(a.name, b.name) })

	m, err := l.newMerger(ctx, dir, inputs)
	if err != nil {
		return err
	}
	defer m.close()
	buf := make([]RawRow, 0, 1024)
	for n := 0; ; n++ {
		if !m.more() {
			break
		}
		name := CompactedName(topic, gen, n)
		var rows int64
		// putOnce: the rows come from one merge that a retry cannot rewind.
		size, err := l.putOnce(ctx, storage.JoinKey(dir, name), func(w io.Writer) error {
			pw := parquet.NewGenericWriter[RawRow](w, l.writerOptions(rawSorting...)...)
			for rows < o.MaxRows {
				r, ok, err := m.nextEvent()
				if err != nil {
					return err
				}
				if ok {
					buf = append(buf, *r)
				}
				if len(buf) == cap(buf) || !ok || rows+int64(len(buf)) == o.MaxRows {
					if _, err := pw.Write(buf); err != nil {
						return err
					}
					rows += int64(len(buf))
					clear(buf)
					buf = buf[:0]
				}
				if !ok {
					break
				}
			}
			return pw.Close()
		})
		if err != nil {
			return err
		}
		res.Written = append(res.Written, FileInfo{Path: storage.JoinKey(dir, name), Rows: rows, Bytes: size})
		res.Rows += rows
	}
	res.DuplicateOffsets, res.Dropped = m.dupOffsets, int64(len(m.dropped))
	m.close()

	if len(m.dropped) > 0 {
		// The table is cumulative per hour: the new file holds every
		// redelivery ever dropped from the hour, so older generations can
		// go once the inputs are deleted.
		all := m.dropped
		for _, n := range oldDropped {
			rows, err := readRows[DroppedRow](ctx, l, storage.JoinKey(ddir, n), -1)
			if err != nil {
				return err
			}
			all = append(all, rows...)
		}
		slices.SortStableFunc(all, func(a, b DroppedRow) int {
			return cmp.Or(cmp.Compare(a.KafkaPartition, b.KafkaPartition), cmp.Compare(a.KafkaOffset, b.KafkaOffset))
		})
		all = slices.CompactFunc(all, func(a, b DroppedRow) bool {
			return a.KafkaPartition == b.KafkaPartition && a.KafkaOffset == b.KafkaOffset
		})
		name := droppedName(topic, gen)
		if _, err := l.store.Put(ctx, storage.JoinKey(ddir, name), func(w io.Writer) error {
			pw := parquet.NewGenericWriter[DroppedRow](w, l.writerOptions()...)
			if _, err := pw.Write(all); err != nil {
				return err
			}
			return pw.Close()
		}); err != nil {
			return err
		}
		res.DroppedFile = storage.JoinKey(ddir, name)
	}
	gone := make([]string, 0, len(inputs))
	for _, in := range inputs {
		gone = append(gone, in.name)
		res.Removed = append(res.Removed, storage.JoinKey(dir, in.name))
	}
	if err := l.store.Remove(ctx, dir, gone); err != nil {
		return err
	}
	if res.DroppedFile != "" {
		if err := l.store.Remove(ctx, ddir, oldDropped); err != nil {
			return err
		}
	}
	res.Files, res.MaxPartitionFiles = len(res.Written), 0
	return nil
}
