package lake

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
)

// TableInfo summarizes one table of the lake (one topic of raw or
// rejected, one stream of summaries), from file footers only.
type TableInfo struct {
	// Table is "raw", "rejected" or "summaries"; Name the topic or stream.
	Table string `json:"table"`
	Name  string `json:"name"`
	// Partitions counts the leaf hive directories (hours or dates).
	Partitions int   `json:"partitions"`
	Files      int   `json:"files"`
	Rows       int64 `json:"rows"`
	Bytes      int64 `json:"bytes"`
	// From and To are the earliest and latest timestamp of the table's
	// time column (occurred_at, ingested_at, window_start) by the files'
	// statistics; zero when unknown.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// Inventory is what `reckon lake ls` shows.
type Inventory struct {
	Tables   []TableInfo `json:"tables"`
	Progress []Progress  `json:"progress"`
}

// tableTimeColumn is the time column summarized per table.
var tableTimeColumn = map[string]string{RawDir: "occurred_at", RejectedDir: "ingested_at", SummariesDir: "window_start"}

// List summarizes every table and the archive progress of every topic.
// It reads file footers, not data.
func (l *Lake) List() (Inventory, error) {
	var inv Inventory
	for _, table := range []string{RawDir, RejectedDir, SummariesDir} {
		prefix := "topic="
		if table == SummariesDir {
			prefix = "stream="
		}
		entries, err := os.ReadDir(filepath.Join(l.opts.Root, table))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return inv, fmt.Errorf("lake: ls: %w", err)
		}
		for _, e := range entries {
			name, ok := strings.CutPrefix(e.Name(), prefix)
			if !ok || !e.IsDir() {
				continue
			}
			ti, err := l.tableInfo(table, name, filepath.Join(l.opts.Root, table, e.Name()))
			if err != nil {
				return inv, err
			}
			inv.Tables = append(inv.Tables, ti)
		}
	}
	entries, err := os.ReadDir(filepath.Join(l.opts.Root, ProgressDir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return inv, fmt.Errorf("lake: ls: %w", err)
	}
	for _, e := range entries {
		if t, ok := strings.CutPrefix(e.Name(), "topic="); ok && ValidateTopic(t) == nil {
			ps, err := l.TopicProgress(t)
			if err != nil {
				return inv, err
			}
			inv.Progress = append(inv.Progress, ps...)
		}
	}
	return inv, nil
}

func (l *Lake) tableInfo(table, name, dir string) (TableInfo, error) {
	ti := TableInfo{Table: table, Name: name}
	leaves := map[string]bool{}
	col := tableTimeColumn[table]
	var lo, hi int64
	have := false
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != dir && hidden(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if hidden(d.Name()) || !strings.HasSuffix(d.Name(), ".parquet") {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		pf, err := parquet.OpenFile(f, st.Size(), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrBadFile, path, err)
		}
		leaves[filepath.Dir(path)] = true
		ti.Files++
		ti.Rows += pf.NumRows()
		ti.Bytes += st.Size()
		leaf, ok := pf.Schema().Lookup(col)
		if !ok {
			return nil
		}
		for _, rg := range pf.Metadata().RowGroups {
			s := rg.Columns[leaf.ColumnIndex].MetaData.Statistics
			if len(s.MinValue) != 8 || len(s.MaxValue) != 8 {
				continue
			}
			mn, mx := int64(binary.LittleEndian.Uint64(s.MinValue)), int64(binary.LittleEndian.Uint64(s.MaxValue))
			if !have || mn < lo {
				lo = mn
			}
			if !have || mx > hi {
				hi = mx
			}
			have = true
		}
		return nil
	})
	if err != nil {
		return ti, fmt.Errorf("lake: ls %s: %w", dir, err)
	}
	ti.Partitions = len(leaves)
	if have {
		ti.From, ti.To = time.UnixMicro(lo).UTC(), time.UnixMicro(hi).UTC()
	}
	return ti, nil
}
