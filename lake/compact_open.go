package lake

import (
	"cmp"
	"context"
	"io"
	"slices"

	"github.com/parquet-go/parquet-go"

	"reckon/lake/storage"
)

// mergeOpen merges the archive files of each partition of an open hour
// that has at least o.openMergeAt() of them (docs/adr/0004-lake-compaction.md).
func (l *Lake) mergeOpen(ctx context.Context, topic, dir string, hf hourFiles, o CompactOptions,
	res *CompactResult) error {
	parts := make([]int32, 0, len(hf.archive))
	for p := range hf.archive {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	for _, p := range parts {
		inputs := openMergeRun(hf.archive[p], o)
		if len(inputs) == 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		out := inputs[0].FileRange
		for _, in := range inputs[1:] {
			out.FirstOffset = min(out.FirstOffset, in.FirstOffset)
			out.LastOffset = max(out.LastOffset, in.LastOffset)
		}
		outName := FileName(topic, p, out.FirstOffset, out.LastOffset)
		var rows, dups int64
		size, err := l.store.Put(ctx, storage.JoinKey(dir, outName), func(w io.Writer) error {
			rows = 0 // a retried put writes the file again from its inputs
			m, err := l.newMerger(ctx, dir, inputs)
			if err != nil {
				return err
			}
			defer m.close()
			pw := parquet.NewGenericWriter[RawRow](w, l.writerOptions(rawSorting...)...)
			buf := make([]RawRow, 0, 1024)
			for {
				r, ok, err := m.nextOffset()
				if err != nil {
					return err
				}
				if ok {
					buf = append(buf, *r)
				}
				if len(buf) == cap(buf) || !ok && len(buf) > 0 {
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
			dups = m.dupOffsets
			return pw.Close()
		})
		if err != nil {
			return err
		}
		res.Written = append(res.Written, FileInfo{Path: storage.JoinKey(dir, outName), Rows: rows, Bytes: size})
		res.Rows += rows
		res.DuplicateOffsets += dups
		var gone []string
		for _, in := range inputs {
			// An input named like the output was replaced by it.
			if in.name != outName {
				gone = append(gone, in.name)
				res.Removed = append(res.Removed, storage.JoinKey(dir, in.name))
			}
		}
		if err := l.store.Remove(ctx, dir, gone); err != nil {
			return err
		}
		res.Files -= len(inputs) - 1
	}
	res.MaxPartitionFiles = 0
	for _, in := range hf.archive {
		n := len(in)
		if run := len(openMergeRun(in, o)); run > 0 {
			n -= run - 1
		}
		res.MaxPartitionFiles = max(res.MaxPartitionFiles, n)
	}
	return nil
}

// openMergeRun returns the archive files of one partition of an open hour
// that mergeOpen merges, in offset order: none below o.openMergeAt()
// files; otherwise the newest ones, from the oldest file that is smaller
// than all the files after it together (a file at least that big stays),
// and every file whose offsets overlap theirs (a crashed merge's inputs
// beside its output). When that would leave o.openMergeAt() files or more,
// or merge fewer than two, it is every file.
//
// Each merge thus writes at most about twice the bytes archived since the
// partition's files last doubled: a row is rewritten once per doubling of
// the file that holds it, log2(hour's files / openMergeAt) times at most,
// where merging every file each time rewrote the whole hour so far.
func openMergeRun(files []compactInput, o CompactOptions) []compactInput {
	if len(files) < o.openMergeAt() {
		return nil
	}
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b compactInput) int {
		return cmp.Or(cmp.Compare(a.FirstOffset, b.FirstOffset), cmp.Compare(a.LastOffset, b.LastOffset))
	})
	newer := make([]int64, len(files)+1) // newer[i]: bytes of files[i:]
	for i := len(files) - 1; i >= 0; i-- {
		newer[i] = newer[i+1] + files[i].size
	}
	j := 0
	for j < len(files)-1 && files[j].size >= newer[j+1] {
		j++
	}
	// A kept file must end before the merged ones begin.
	for ; j > 0; j-- {
		last := int64(-1)
		for _, f := range files[:j] {
			last = max(last, f.LastOffset)
		}
		if last < files[j].FirstOffset {
			break
		}
	}
	if j+1 >= o.openMergeAt() || len(files)-j < 2 {
		j = 0
	}
	return files[j:]
}
