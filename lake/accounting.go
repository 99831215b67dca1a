package lake

import (
	"context"
	"fmt"
	"strings"

	"reckon/lake/storage"
)

// offsetRow is the lineage every raw, rejected and raw_dropped row has.
type offsetRow struct {
	KafkaPartition int32 `parquet:"kafka_partition"`
	KafkaOffset    int64 `parquet:"kafka_offset"`
}

// Offsets calls fn with the partition and offset of every row of topic's
// raw, rejected and raw_dropped tables, with the table's directory name
// (RawDir, RejectedDir, DroppedDir), file by file in no particular order.
// It reads two columns of every file: a check for tests and `reckon
// verify`, not for hot paths.
//
// Once every hour is compacted each archived offset appears exactly once
// (docs/adr/0018-continuous-compaction.md). Until then an offset may appear
// twice: in overlapping archive batches, or in a compaction's inputs beside
// its outputs after a crash; the next compaction of the hour repairs both.
func (l *Lake) Offsets(ctx context.Context, topic string, fn func(table string, partition int32, offset int64) error) error {
	if err := ValidateTopic(topic); err != nil {
		return err
	}
	for _, table := range []string{RawDir, RejectedDir, DroppedDir} {
		dir := table + "/topic=" + topic
		err := l.store.Walk(ctx, dir, func(key string, e storage.Entry) error {
			for _, part := range strings.Split(strings.TrimPrefix(key, dir+"/"), "/") {
				if hidden(part) {
					return nil
				}
			}
			if !strings.HasSuffix(e.Name, ".parquet") {
				return nil
			}
			rows, err := readRows[offsetRow](ctx, l, key, e.Size)
			if err != nil {
				return err
			}
			for _, r := range rows {
				if err := fn(table, r.KafkaPartition, r.KafkaOffset); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("lake: offsets of %s: %w", topic, err)
		}
	}
	return nil
}
