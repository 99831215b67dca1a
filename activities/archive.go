package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
	"reckon/lake"
)

// Archive archives raw topics into the lake. Its methods are safe for
// concurrent use by many activity executions.
type Archive struct {
	Cfg  *config.Config
	Lake *lake.Lake
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Kafka is the process's shared Kafka read side (NewKafka), which the
	// wiring builds and closes. Nil builds one from Cfg.Kafka on first use,
	// kept as long as the struct (tests).
	Kafka *Kafka
	// AfterWrite, when set, is called after a step has written its lake
	// files and progress and before its result goes back to Temporal. It
	// is a test-only barrier (the SIGKILL test blocks in it, so the kill
	// lands exactly between the write and the report); no config key sets
	// it, and it is nil in every production wiring.
	AfterWrite func(ctx context.Context, in ArchiveRangeInput, res ArchiveRangeResult)
	lazy       lazyKafka
}

// ArchiveRangeInput bounds one archive step. Zero limits mean defaults.
type ArchiveRangeInput struct {
	Topic     string
	Partition int32
	// From is the first offset to read (the workflow's cursor).
	From int64
	// MaxRecords per step. Default 200,000.
	MaxRecords int
	// MaxBytes of record values per step. Default 64 MiB.
	MaxBytes int64
	// MaxWait is how long to wait for records when the partition is behind.
	// Default 2s.
	MaxWait time.Duration
}

// ArchiveRangeResult is what one step archived. It is small: paths and
// counts, never the data.
type ArchiveRangeResult struct {
	// Next is the cursor after this step: past the last record archived
	// and past the transaction markers and aborted records read after it
	// (From when nothing was read).
	Next int64
	// Records read; Rows archived to raw/; Rejected to rejected/.
	Records  int64
	Rows     int64
	Rejected int64
	Files    []string
	Hours    []lake.HourCount
	// End is the partition's last stable offset observed before reading.
	End int64
	// CaughtUp is true when Next reached End: everything ingested before
	// ObservedAt is archived.
	CaughtUp   bool
	ObservedAt time.Time
	// ArchivedThrough is the ingest time up to which everything of the
	// partition is archived (see lake.Progress).
	ArchivedThrough time.Time
}

func (a *Archive) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// LoadCursor returns where archiving of topic/partition resumes: the
// progress file's next offset, or 0. A fresh archive workflow (after a
// termination, or on a new cluster with an old lake) never re-archives what
// the lake already holds.
func (a *Archive) LoadCursor(ctx context.Context, topic string, partition int32) (int64, error) {
	p, err := a.Lake.ReadProgress(ctx, topic, partition)
	if err != nil {
		if errors.Is(err, lake.ErrNoProgress) {
			return 0, nil
		}
		return 0, err
	}
	return p.NextOffset, nil
}

// ArchiveRange reads a bounded offset range of one partition, runs every
// record through the quality gate, writes accepted rows to raw/ and refused
// records to rejected/, and advances the progress file. Retrying it is safe:
// file names derive from the offset range, and a retry that reads a wider
// range supersedes the narrower files (lake.WriteBatch).
func (a *Archive) ArchiveRange(ctx context.Context, in ArchiveRangeInput) (ArchiveRangeResult, error) {
	if in.MaxRecords <= 0 {
		in.MaxRecords = 200_000
	}
	if in.MaxBytes <= 0 {
		in.MaxBytes = 64 << 20
	}
	if in.MaxWait <= 0 {
		in.MaxWait = 2 * time.Second
	}
	res := ArchiveRangeResult{Next: in.From}
	gate, err := event.NewGate(a.Cfg.Gate)
	if err != nil {
		return res, temporal.NewNonRetryableApplicationError("archive: gate rules", ErrTypeConfig, err)
	}

	k, err := a.lazy.get(a.Kafka, a.Cfg.Kafka, "archive")
	if err != nil {
		return res, err
	}
	res.ObservedAt = a.now()
	end, err := lastStable(ctx, k.Admin, in.Topic, in.Partition)
	if err != nil {
		return res, err
	}
	res.End = end
	if in.From > end {
		// The topic was recreated or truncated below our cursor: that is an
		// operator decision, not something to paper over.
		return res, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("archive: cursor %d is beyond the end %d of %s/%d (topic recreated?)", in.From, end, in.Topic,
				in.Partition), ErrTypeCursor, nil)
	}
	if in.From == end {
		res.CaughtUp = true
		return a.finish(ctx, res, in)
	}

	w, err := a.Lake.NewRawWriter(a.table(in.Topic), gate)
	if err != nil {
		return res, temporal.NewNonRetryableApplicationError("archive: raw table", ErrTypeConfig, err)
	}
	var (
		recs  []lake.RawRecord
		bytes int64
		first = in.From
		last  = in.From - 1
	)
	// pos is the next offset to read: past the last record taken, and past
	// aborted batches and transaction markers, which hold no record. Every
	// offset below it is in recs or holds no committed record, so the
	// step's cursor moves to pos: a partition whose last offsets are
	// markers (a transactional producer's) is caught up at its end.
	pos := in.From
	deadline := time.Now().Add(in.MaxWait)
	for pos < end && len(recs) < in.MaxRecords && bytes < in.MaxBytes {
		fetched, next, err := k.fetch(ctx, in.Topic, in.Partition, pos,
			fetchOpts{maxBytes: int32(min(in.MaxBytes, kafkaconn.MaxRecordBytes)), wait: time.Until(deadline)})
		if err != nil {
			return res, fmt.Errorf("archive: fetch %s/%d: %w", in.Topic, in.Partition, err)
		}
		for _, r := range fetched {
			if r.Offset >= end || len(recs) >= in.MaxRecords {
				next = r.Offset // the first record not taken: the next step's
				break
			}
			last = r.Offset
			bytes += int64(len(r.Value))
			recs = append(recs, lake.RawRecord{Offset: r.Offset, Timestamp: r.Timestamp, Key: r.Key, Value: r.Value})
		}
		pos = max(pos, next)
		activity.RecordHeartbeat(ctx, last)
		if time.Now().After(deadline) {
			break
		}
	}
	res.Records = int64(len(recs))
	if last >= first {
		wr, err := w.WriteRange(ctx, in.Partition, first, last, recs)
		if err != nil {
			return res, err
		}
		res.Rows, res.Rejected, res.Hours = wr.Rows, wr.Rejected, wr.Hours
		for _, f := range wr.Files {
			res.Files = append(res.Files, f.Path)
		}
	}
	res.Next = pos
	res.CaughtUp = res.Next >= end
	return a.finish(ctx, res, in)
}

// finish records progress: when caught up, everything ingested before the
// observation time is archived; otherwise the progress stays at what the
// previous caught-up observation proved.
func (a *Archive) finish(ctx context.Context, res ArchiveRangeResult,
	in ArchiveRangeInput) (ArchiveRangeResult, error) {
	prev, err := a.Lake.ReadProgress(ctx, in.Topic, in.Partition)
	if err != nil && !errors.Is(err, lake.ErrNoProgress) {
		return res, err
	}
	through := prev.ArchivedThrough
	if res.CaughtUp {
		through = res.ObservedAt
	}
	res.ArchivedThrough = through
	if res.Next == prev.NextOffset && through.Equal(prev.ArchivedThrough) {
		return res, nil
	}
	_, err = a.Lake.WriteProgress(ctx, lake.Progress{
		Topic: in.Topic, Partition: in.Partition, NextOffset: res.Next,
		ArchivedThrough: through, UpdatedAt: a.now(),
	})
	if err == nil && a.AfterWrite != nil {
		a.AfterWrite(ctx, in, res)
	}
	return res, err
}

// table says how topic's raw rows get their key and value: from the first
// stream reading it; other raw topics (Z-report parts) key by record key.
func (a *Archive) table(topic string) lake.RawTable {
	t := lake.RawTable{Topic: topic}
	for _, s := range a.Cfg.Streams {
		if s.Topic == topic {
			t.KeyPath = "data." + s.KeyField
			if s.ValueField != "" {
				t.ValuePath = "data." + s.ValueField
			}
			break
		}
	}
	return t
}

func lastStable(ctx context.Context, adm *kadm.Client, topic string, partition int32) (int64, error) {
	offs, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("archive: list offsets %s: %w", topic, err)
	}
	o, ok := offs.Lookup(topic, partition)
	if !ok {
		return 0, temporal.NewNonRetryableApplicationError(fmt.Sprintf("archive: %s/%d does not exist", topic, partition),
			ErrTypePartition, nil)
	}
	if o.Err != nil {
		return 0, fmt.Errorf("archive: list offsets %s/%d: %w", topic, partition, o.Err)
	}
	return o.Offset, nil
}
