package lake

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"reckon/internal/event"
)

// RawTable says how the raw table of one topic gets its typed columns.
type RawTable struct {
	// Topic is the Kafka topic archived. Required; see ValidateTopic.
	Topic string
	// KeyPath is the dotted envelope path of the entity key, e.g.
	// "data.id_perangkat" (a string, or a number written as its shortest
	// decimal form). Empty: the Kafka record key.
	KeyPath string
	// ValuePath is the dotted envelope path of the number aggregated, e.g.
	// "data.suhu_c". Empty: every event has value 0 (count-only streams).
	ValuePath string
}

// RawRecord is one Kafka record handed to the archiver.
type RawRecord struct {
	Offset int64
	// Timestamp is the Kafka record timestamp: the ingest (arrival) time.
	Timestamp time.Time
	// Key and Value are the record's bytes; they are read, never kept
	// past WriteBatch.
	Key   []byte
	Value []byte
}

// RawWriter decodes records of one topic with the quality gate and writes
// the accepted ones to the raw table and the refused ones to the rejected
// table. It is not safe for concurrent use (the gate and its buffers are
// reused); use one per goroutine.
type RawWriter struct {
	lake  *Lake
	table RawTable
	gate  *event.Gate

	rows     []RawRow
	rejected []RejectedRow
	intern   map[string]string // keys and event types: few distinct values
}

// NewRawWriter returns a writer for t. gate decides what is accepted: the
// same gate (options) the stream worker uses, so the lake's truth and the
// stream agree on what counts.
func (l *Lake) NewRawWriter(t RawTable, gate *event.Gate) (*RawWriter, error) {
	if err := ValidateTopic(t.Topic); err != nil {
		return nil, err
	}
	if gate == nil {
		return nil, fmt.Errorf("%w: nil gate", ErrBadQuery)
	}
	return &RawWriter{lake: l, table: t, gate: gate, intern: make(map[string]string)}, nil
}

// WriteBatch archives records of one partition, read as the offset range
// from the first record's offset to the last one's. Records must be in
// offset order. See WriteRange.
func (w *RawWriter) WriteBatch(ctx context.Context, partition int32, records []RawRecord) (WriteResult, error) {
	if len(records) == 0 {
		return WriteResult{Topic: w.table.Topic, Partition: partition}, fmt.Errorf("%w: empty batch", ErrBadRange)
	}
	return w.WriteRange(ctx, partition, records[0].Offset, records[len(records)-1].Offset, records)
}

// WriteRange archives records of one partition read from the offset range
// [first, last]. records must be every record of the partition in that
// range (Kafka may skip offsets), in offset order. Each record is checked by
// the gate with its Kafka timestamp as arrival; valid ones become raw rows,
// the others rejected rows with the gate's reasons, or with "key:"/"value:"
// reasons when the table's key or value path does not resolve. Files and
// idempotency are as for Lake.WriteRaw.
func (w *RawWriter) WriteRange(ctx context.Context, partition int32, first, last int64,
	records []RawRecord) (WriteResult, error) {
	w.rows, w.rejected = slices.Grow(w.rows[:0], len(records)), w.rejected[:0]
	prev := int64(-1)
	for i := range records {
		rec := &records[i]
		if rec.Offset <= prev {
			return WriteResult{Topic: w.table.Topic, Partition: partition},
				fmt.Errorf("%w: offset %d after %d: records must be in offset order", ErrBadRange, rec.Offset, prev)
		}
		prev = rec.Offset
		w.decode(partition, rec)
	}
	res, err := w.lake.writeBatch(ctx, w.table.Topic, partition, first, last, w.rows, w.rejected)
	// Drop references to the batch's strings and bytes so they can be
	// collected while the writer waits for the next batch.
	clear(w.rows)
	clear(w.rejected)
	if len(w.intern) > 1<<16 {
		clear(w.intern)
	}
	return res, err
}

// decode turns one record into a raw or a rejected row.
func (w *RawWriter) decode(partition int32, rec *RawRecord) {
	env, res := w.gate.Check(rec.Value, rec.Timestamp)
	if res.Valid {
		key, kok := w.key(env, rec)
		val, vok := w.value(env)
		if kok && vok {
			w.rows = append(w.rows, RawRow{
				EventID:        env.EventID,
				EventType:      w.internString(env.EventType),
				OccurredAt:     env.OccurredAt.UnixMicro(),
				IngestedAt:     rec.Timestamp.UnixMicro(),
				Key:            key,
				Value:          val,
				Data:           string(env.DataJSON()),
				KafkaPartition: partition,
				KafkaOffset:    rec.Offset,
			})
			return
		}
		if !kok {
			res.Fields = append(res.Fields, w.table.KeyPath)
			res.Reasons = append(res.Reasons, w.table.KeyPath+": key required (a string or a number)")
		}
		if !vok {
			res.Fields = append(res.Fields, w.table.ValuePath)
			res.Reasons = append(res.Reasons, w.table.ValuePath+": value required (a number)")
		}
	}
	sum := sha256.Sum256(rec.Value)
	value, key, cuts := rec.Value, rec.Key, ""
	if len(value) > event.MaxKeptPrefix {
		value, cuts = value[:event.MaxKeptPrefix], event.Truncated("value", len(value), event.MaxKeptPrefix)
	}
	if len(key) > event.MaxKeptPrefix {
		key = key[:event.MaxKeptPrefix]
		cuts = strings.TrimPrefix(cuts+"; "+event.Truncated("key", len(rec.Key), event.MaxKeptPrefix), "; ")
	}
	w.rejected = append(w.rejected, RejectedRow{
		Raw:            append([]byte(nil), value...),
		RecordKey:      append([]byte(nil), key...),
		RawBytes:       int64(len(rec.Value)),
		RawSHA256:      sum[:],
		Truncated:      cuts,
		Reason:         res.Reason(),
		Reasons:        strings.Join(res.Reasons, "; "),
		Fields:         strings.Join(res.Fields, ","),
		KafkaPartition: partition,
		KafkaOffset:    rec.Offset,
		IngestedAt:     rec.Timestamp.UnixMicro(),
	})
}

func (w *RawWriter) key(env *event.Envelope, rec *RawRecord) (string, bool) {
	if w.table.KeyPath == "" {
		return w.internBytes(rec.Key), true
	}
	if s, ok := env.String(w.table.KeyPath); ok {
		return w.internString(s), true
	}
	if f, ok := env.Number(w.table.KeyPath); ok {
		return w.internString(strconv.FormatFloat(f, 'f', -1, 64)), true
	}
	return "", false
}

func (w *RawWriter) value(env *event.Envelope) (float64, bool) {
	if w.table.ValuePath == "" {
		return 0, true
	}
	return env.Number(w.table.ValuePath)
}

// internString returns one shared copy of s, so a batch holds each key and
// event type once.
func (w *RawWriter) internString(s string) string {
	if v, ok := w.intern[s]; ok {
		return v
	}
	w.intern[s] = s
	return s
}

func (w *RawWriter) internBytes(b []byte) string {
	if v, ok := w.intern[string(b)]; ok {
		return v
	}
	s := string(b)
	w.intern[s] = s
	return s
}
