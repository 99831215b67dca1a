package lake

import (
	"context"
	"encoding/binary"
	"fmt"
	"path"
	"strings"
	"time"

	"reckon/lake/storage"
)

// TableInfo summarizes one table of the lake (one topic of raw or
// rejected, one stream of summaries), from file footers only.
type TableInfo struct {
	// Table is "raw", "rejected", "raw_dropped", "summaries", "truth",
	// "windows", "corrections" or "features"; Name the topic or stream.
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
	// Retention is how long the table keeps a partition ("" for ever):
	// set by the caller from its configuration (lake.rejected_retention
	// for rejected); List leaves it empty.
	Retention string `json:"retention,omitempty"`
}

// Inventory is what `reckon lake ls` shows.
type Inventory struct {
	Tables   []TableInfo `json:"tables"`
	Progress []Progress  `json:"progress"`
}

// tableTimeColumn is the time column summarized per table.
var tableTimeColumn = map[string]string{
	RawDir: "occurred_at", RejectedDir: "ingested_at", DroppedDir: "occurred_at", SummariesDir: "window_start",
	TruthDir: "window_start", WindowsDir: "window_start", CorrectionsDir: "window_start", FeaturesDir: "event_time",
}

// List summarizes every table and the archive progress of every topic.
// It reads file footers, not data.
func (l *Lake) List(ctx context.Context) (Inventory, error) {
	var inv Inventory
	tables := []string{RawDir, RejectedDir, DroppedDir, SummariesDir, TruthDir, WindowsDir, CorrectionsDir, FeaturesDir}
	for _, table := range tables {
		prefix := "topic="
		if table != RawDir && table != RejectedDir {
			prefix = "stream="
		}
		entries, err := l.store.List(ctx, table)
		if err != nil {
			return inv, fmt.Errorf("lake: ls: %w", err)
		}
		for _, e := range entries {
			name, ok := strings.CutPrefix(e.Name, prefix)
			if !ok || !e.Dir {
				continue
			}
			ti, err := l.tableInfo(ctx, table, name, storage.JoinKey(table, e.Name))
			if err != nil {
				return inv, err
			}
			inv.Tables = append(inv.Tables, ti)
		}
	}
	entries, err := l.store.List(ctx, ProgressDir)
	if err != nil {
		return inv, fmt.Errorf("lake: ls: %w", err)
	}
	for _, e := range entries {
		if t, ok := strings.CutPrefix(e.Name, "topic="); ok && e.Dir && ValidateTopic(t) == nil {
			ps, err := l.TopicProgress(ctx, t)
			if err != nil {
				return inv, err
			}
			inv.Progress = append(inv.Progress, ps...)
		}
	}
	return inv, nil
}

func (l *Lake) tableInfo(ctx context.Context, table, name, dir string) (TableInfo, error) {
	ti := TableInfo{Table: table, Name: name}
	leaves := map[string]bool{}
	col := tableTimeColumn[table]
	var lo, hi int64
	have := false
	err := l.store.Walk(ctx, dir, func(key string, e storage.Entry) error {
		for _, part := range strings.Split(strings.TrimPrefix(key, dir+"/"), "/") {
			if hidden(part) {
				return nil // a hidden file, or one under a hidden directory
			}
		}
		if !strings.HasSuffix(e.Name, ".parquet") {
			return nil
		}
		f, pf, err := l.openParquet(ctx, key, e.Size)
		if err != nil {
			return err
		}
		defer f.Close()
		leaves[path.Dir(key)] = true
		ti.Files++
		ti.Rows += pf.NumRows()
		ti.Bytes += f.Size()
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
