package streaming

import (
	"encoding/json"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/event"
)

// progressRecords are the partition's progress records, one per stream
// reading the topic, for the progress topic: produced in the same
// transaction as the outputs, state and offsets they describe, so a
// committed record states where the stream stood at the committed offset
// (docs/adr/0015-stream-progress.md). The operators' watermarks never go
// back and a restore resumes the committed ones, so the records for a key
// never go backwards either.
func (w *Worker) progressRecords(part *partition, now time.Time) []*kgo.Record {
	out := make([]*kgo.Record, 0, len(part.ops))
	for _, so := range part.ops {
		op := so.op.Progress()
		p := event.StreamProgress{
			Format: event.ProgressFormat, Stream: so.cfg.Name, Topic: part.topic, Partition: part.partition,
			NextOffset: part.next, Watermark: op.Watermark, MaxEventTime: op.MaxEventTime,
			ProcessingTime: op.ProcessingTime, PurgedThrough: op.PurgedThrough,
			Settings: so.settings, PublishedAt: now.UTC(), Serve: w.look.advertised(),
		}
		v, err := json.Marshal(p)
		if err != nil { // cannot happen: plain strings, numbers and in-range times
			panic(err)
		}
		out = append(out, &kgo.Record{Topic: w.cfg.Topics.StreamProgress, Key: []byte(p.Key()), Value: v})
	}
	return out
}
