package activities

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/event"
	"reckon/lake"
)

// PaneCursor returns where archiving the summaries partition resumes: the
// lake's progress for it, or 0.
func (a *BatchTruth) PaneCursor(ctx context.Context, topic string, partition int32) (int64, error) {
	p, err := a.Lake.ReadProgress(ctx, topic, partition)
	if errors.Is(err, lake.ErrNoProgress) {
		return 0, nil
	}
	return p.NextOffset, err
}

// PaneEnd is the end of the readable part of a summaries partition.
type PaneEnd struct {
	// End is the last stable offset: every offset below it is committed,
	// aborted or a control record, and stays so.
	End int64
	// ObservedAt is when End was read: everything published before it
	// lies below End.
	ObservedAt time.Time
}

// PaneArchiveEnd reads the last stable offset of topic/partition. The
// workflow fixes the step's range from it, so a retried step reads exactly
// the same records and writes the same files.
func (a *BatchTruth) PaneArchiveEnd(ctx context.Context, topic string, partition int32) (PaneEnd, error) {
	k, err := a.kafka()
	if err != nil {
		return PaneEnd{}, err
	}
	res := PaneEnd{ObservedAt: a.now()}
	res.End, err = lastStable(ctx, k.Admin, topic, partition)
	return res, err
}

// ArchivePanesInput is one pane archive step: the offsets [From, To).
type ArchivePanesInput struct {
	Topic     string
	Partition int32
	From, To  int64
	// End and ObservedAt are the PaneEnd the range was cut from: when To
	// reaches End, the partition is archived through ObservedAt.
	End        int64
	ObservedAt time.Time
}

// ArchivePanesResult says what one step archived.
type ArchivePanesResult struct {
	Next int64
	// Records read (committed data records); Panes archived; Skipped are
	// records that are not panes (reported, not archived).
	Records, Panes, Skipped int64
	Files                   []string
	ArchivedThrough         time.Time
}

// ArchivePanes reads the committed panes in [From, To) of a summaries
// partition and writes them to the lake's summaries table, one file per
// stream and window date named <topic>-<partition>-<From>-<To-1>, then
// records progress. A retry reads the same range and rewrites the same
// files.
func (a *BatchTruth) ArchivePanes(ctx context.Context, in ArchivePanesInput) (ArchivePanesResult, error) {
	res := ArchivePanesResult{Next: in.From}
	if in.To < in.From || in.From < 0 {
		return res, badInput("pane archive range [%d, %d)", in.From, in.To)
	}
	byStream := map[string][]event.Pane{}
	var order []string
	if in.To > in.From {
		k, err := a.kafka()
		if err != nil {
			return res, err
		}
		err = k.readCommitted(ctx, in.Topic, in.Partition, in.From, in.To, func(r *kgo.Record) {
			res.Records++
			var p event.Pane
			if err := json.Unmarshal(r.Value, &p); err != nil || p.Stream == "" || lake.ValidateName(p.Stream) != nil {
				res.Skipped++
				return
			}
			if _, ok := byStream[p.Stream]; !ok {
				order = append(order, p.Stream)
			}
			byStream[p.Stream] = append(byStream[p.Stream], p)
			res.Panes++
		})
		if err != nil {
			return res, err
		}
		name := lake.FileName(in.Topic, in.Partition, in.From, in.To-1)
		name = name[:len(name)-len(".parquet")]
		for _, s := range order {
			files, err := a.Lake.WritePanes(ctx, s, name, byStream[s])
			if err != nil {
				return res, err
			}
			for _, f := range files {
				res.Files = append(res.Files, f.Path)
			}
		}
	}
	res.Next = in.To
	prev, err := a.Lake.ReadProgress(ctx, in.Topic, in.Partition)
	if err != nil && !errors.Is(err, lake.ErrNoProgress) {
		return res, err
	}
	res.ArchivedThrough = prev.ArchivedThrough
	if in.To >= in.End {
		res.ArchivedThrough = in.ObservedAt
	}
	if in.To == prev.NextOffset && res.ArchivedThrough.Equal(prev.ArchivedThrough) {
		return res, nil
	}
	_, err = a.Lake.WriteProgress(ctx,
		lake.Progress{Topic: in.Topic, Partition: in.Partition, NextOffset: in.To, ArchivedThrough: res.ArchivedThrough,
			UpdatedAt: a.now()})
	return res, err
}
