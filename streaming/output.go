package streaming

import (
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/event"
	"reckon/internal/kafkaconn"
)

// flushLate publishes the late panes the partition's operators held during
// the transaction (operator.Options.CoalesceLatePanes). Every transaction
// that touched the partition ends with it, before its state records, and a
// replay repeats it at each log entry, so versions come out the same.
func (w *Worker) flushLate(part *partition) []*kgo.Record {
	for _, so := range part.ops {
		so.op.FlushLate(&so.out)
	}
	return w.drainOutputs(part, nil)
}

// drainOutputs turns the operators' pending outputs into records. src is
// the raw record being processed (for the late side output), nil on ticks.
func (w *Worker) drainOutputs(part *partition, src *kgo.Record) []*kgo.Record {
	if w.replaying {
		for _, so := range part.ops {
			so.out.Reset()
		}
		return nil
	}
	// The records and their bytes come from the partition's arena, and
	// the slice is the partition's: emit hands the records to the
	// producer before the next drain.
	out := part.out[:0]
	a := &part.arena
	// emitted is when the features and panes are produced, in this
	// transaction: their emitted_at and Kafka timestamp (the operator
	// stamped the record's arrival, which a restart's re-processing leaves
	// behind). A pane keeps the operator's processing clock in
	// processed_at (event.Pane.ProcessedAt).
	var emitted time.Time
	for _, so := range part.ops {
		if emitted.IsZero() && (len(so.out.Features) > 0 || len(so.out.Panes) > 0) {
			emitted = w.now().UTC()
		}
		for i := range so.out.Panes {
			p := &so.out.Panes[i]
			p.EmittedAt = emitted
			r := a.record(w.cfg.Topics.Summaries)
			r.Timestamp = emitted
			r.Key = a.appendString(p.RecordKey())
			a.reserve(maxOutputJSON)
			start := len(a.b)
			a.b = p.AppendJSON(a.b)
			r.Value = a.since(start)
			out = append(out, r)
			w.m.pane(so.cfg.Name, p.Timing)
		}
		for i := range so.out.Features {
			f := so.out.Features[i].Event(so.cfg.Name, so.cfg.Rolling, emitted)
			f.SourceTopic, f.SourcePartition, f.SourceOffset = part.topic, part.partition, so.out.Features[i].Ref
			r := a.record(w.cfg.Topics.Features)
			r.Timestamp = emitted
			r.Key = a.appendString(f.Key)
			a.reserve(maxOutputJSON)
			start := len(a.b)
			a.b = f.AppendJSON(a.b)
			r.Value = a.since(start)
			out = append(out, r)
		}
		for _, l := range so.out.Late {
			if src == nil || l.Ref != src.Offset {
				continue
			}
			out = append(out, &kgo.Record{
				Topic: w.cfg.Topics.Late, Key: src.Key, Value: src.Value,
				Headers: []kgo.RecordHeader{
					{Key: event.HeaderReason, Value: []byte("late: window purged (event time before watermark - allowed lateness)")},
					{Key: "reckon.stream", Value: []byte(so.cfg.Name)},
					{Key: "reckon.watermark", Value: []byte(l.Watermark.UTC().Format(time.RFC3339Nano))},
					{Key: "reckon.event_time", Value: []byte(l.EventTime.UTC().Format(time.RFC3339Nano))},
					{Key: event.HeaderSourceTopic, Value: []byte(src.Topic)},
					{Key: event.HeaderSourcePartition, Value: []byte(strconv.Itoa(int(src.Partition)))},
					{Key: event.HeaderSourceOffset, Value: []byte(strconv.FormatInt(src.Offset, 10))},
				},
			})
		}
		so.out.Reset()
	}
	part.out = out
	return out
}

// deadLetter builds the DLQ record of r (event.DeadLetter.Record): cut to
// the DLQ topic's record limit, kafkaconn.MaxRecordBytes (deploy/topics.yaml).
// The source's own headers are not carried.
func (w *Worker) deadLetter(r *kgo.Record, dl event.DeadLetter) *kgo.Record {
	if dl.DeadAt.IsZero() {
		dl.DeadAt = w.now()
	}
	d := dl.Record(event.SourceRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
		Key: r.Key, Value: r.Value}, kafkaconn.MaxRecordBytes)
	rh := make([]kgo.RecordHeader, len(d.Headers))
	for i, h := range d.Headers {
		rh[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
	}
	return &kgo.Record{Topic: w.cfg.Topics.DLQ, Key: d.Key, Value: d.Value, Headers: rh}
}
