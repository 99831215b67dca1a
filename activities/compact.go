package activities

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/lake"
)

// Compaction compacts the lake's raw table continuously
// (docs/adr/0018-continuous-compaction.md). Its methods are safe for
// concurrent use.
type Compaction struct {
	Cfg  *config.Config
	Lake *lake.Lake
	// Progress is the stream's published progress
	// (docs/adr/0015-stream-progress.md): what says an hour is closed. Nil,
	// or a topic no stream reads, falls back to the archive's progress.
	Progress ProgressReader
	// Now is the clock (which hours are looked at); default time.Now.
	Now func() time.Time
}

// ProgressReader is what Compaction reads of the stream's progress
// (progress.View).
type ProgressReader interface {
	Sync(ctx context.Context) error
	Get(stream, topic string, partition int32) (event.StreamProgress, bool)
}

func (a *Compaction) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// CompactRawInput is one pass of a topic's compaction.
type CompactRawInput struct {
	Topic string
	// ClosedThrough is the closed-through point of the previous pass: the
	// point never goes back, even when the progress it came from is
	// briefly unavailable.
	ClosedThrough time.Time
}

// CompactRawResult says what one pass did and what it waits for.
type CompactRawResult struct {
	// ClosedThrough: every hour ending at or before it is closed. Basis
	// says where it comes from ("stream progress", "archive progress"),
	// Waiting what holds it back (the slowest partition).
	ClosedThrough time.Time
	Basis         string
	Waiting       string
	// Hours is how many hour directories the pass looked at;
	// ClosedHours and OpenMerges how many closed hours it compacted and
	// open (partition, hour)s it merged.
	Hours       int
	ClosedHours int
	OpenMerges  int
	// Rows written, redeliveries Dropped (recorded in raw_dropped),
	// DuplicateOffsets (the same record archived twice), files Written and
	// Removed.
	Rows, Dropped, DuplicateOffsets int64
	Written, Removed                int
	// MaxOpenFiles is the most raw files one (partition, open hour) holds
	// after the pass; MaxClosedFiles the most files of a closed hour.
	MaxOpenFiles   int
	MaxClosedFiles int
	// RejectedExpired is how many files of the topic's rejected table
	// the pass deleted past lake.rejected_retention.
	RejectedExpired int
	// Failed lists hours whose compaction failed this pass (retried next
	// pass), with the error; a failed rejected retention is listed too.
	Failed []string
}

// CompactRaw is one pass over topic's recent hours (Lake.Compaction.Lookback):
// closed hours with archive files are compacted (merged across partitions
// into files of up to MaxRows, redeliveries dropped and recorded in
// raw_dropped), open hours have every partition holding half of
// MaxOpenFiles archive files merged. An hour that fails is reported in
// Failed and tried again next pass; the others go on. The pass also
// deletes the topic's rejected partitions past lake.rejected_retention
// (Lake.ExpireRejected): the compaction workflow is the lake's housekeeping
// loop, running per archived topic whether or not records arrive.
func (a *Compaction) CompactRaw(ctx context.Context, in CompactRawInput) (CompactRawResult, error) {
	if err := lake.ValidateTopic(in.Topic); err != nil {
		return CompactRawResult{}, temporal.NewNonRetryableApplicationError("compact: "+err.Error(), ErrTypeConfig, err)
	}
	cc := a.Cfg.Lake.Compaction
	closed, basis, waiting, err := a.closedThrough(ctx, in.Topic)
	if err != nil {
		return CompactRawResult{}, err
	}
	if closed.Before(in.ClosedThrough) {
		closed = in.ClosedThrough
	}
	res := CompactRawResult{ClosedThrough: closed, Basis: basis, Waiting: waiting}
	now := a.now()
	hours, err := a.Lake.RawHours(ctx, in.Topic, now.Add(-cc.Lookback), now.Add(24*time.Hour))
	if err != nil {
		return res, err
	}
	res.Hours = len(hours)
	for _, h := range hours {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		isClosed := !h.Add(time.Hour).After(closed)
		r, err := a.Lake.CompactHour(ctx, in.Topic, h,
			lake.CompactOptions{Open: !isClosed, MaxRows: cc.MaxRows, MaxOpenFiles: cc.MaxOpenFiles, LateDelay: cc.LateDelay})
		if err != nil {
			if ctx.Err() != nil {
				return res, err
			}
			res.Failed = append(res.Failed, fmt.Sprintf("%s: %v", h.UTC().Format("2006-01-02T15"), err))
			continue
		}
		switch {
		case isClosed:
			if len(r.Removed) > 0 {
				res.ClosedHours++
			}
			res.MaxClosedFiles = max(res.MaxClosedFiles, r.Files)
		default:
			res.OpenMerges += len(r.Written)
			res.MaxOpenFiles = max(res.MaxOpenFiles, r.MaxPartitionFiles)
		}
		res.Rows += r.Rows
		res.Dropped += r.Dropped
		res.DuplicateOffsets += r.DuplicateOffsets
		res.Written += len(r.Written)
		res.Removed += len(r.Removed)
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, h)
		}
	}
	gone, err := a.Lake.ExpireRejected(ctx, in.Topic, now, a.Cfg.Lake.RejectedRetention)
	res.RejectedExpired = len(gone)
	if err != nil {
		if ctx.Err() != nil {
			return res, err
		}
		res.Failed = append(res.Failed, fmt.Sprintf("rejected retention: %v", err))
	}
	return res, nil
}

// closedThrough is the point up to which topic's hours are closed: for
// every partition the archive has reached, and every stream reading the
// topic, the stream's purged-through point (watermark − allowed lateness,
// published with its committed offsets) minus the margin. A partition
// where a stream has no watermark (none of its event types there), a topic
// no stream reads, or a worker without the progress view uses the
// archive's archived-through time (ingest time) minus the margin instead.
func (a *Compaction) closedThrough(ctx context.Context, topic string) (time.Time, string, string, error) {
	margin := a.Cfg.Lake.Compaction.Margin
	parts, err := a.Lake.TopicProgress(ctx, topic)
	if err != nil {
		return time.Time{}, "", "", err
	}
	var streams []string
	for _, s := range a.Cfg.Streams {
		if s.Topic == topic {
			streams = append(streams, s.Name)
		}
	}
	basis := "archive progress"
	if len(streams) > 0 && a.Progress != nil {
		basis = "stream progress"
		if err := a.Progress.Sync(ctx); err != nil {
			return time.Time{}, basis, "", err
		}
	} else {
		streams = nil
	}
	var (
		closed  time.Time
		have    bool
		waiting string
	)
	take := func(t time.Time, why string) {
		if !have || t.Before(closed) {
			closed, have, waiting = t, true, why
		}
	}
	for _, lp := range parts {
		if lp.NextOffset == 0 {
			continue
		}
		at := fmt.Sprintf("%s/%d", topic, lp.Partition)
		archived := func(why string) {
			take(lp.ArchivedThrough.Add(-margin),
				fmt.Sprintf("%s: %sarchived through %s", at, why, lp.ArchivedThrough.UTC().Format(time.RFC3339)))
		}
		if len(streams) == 0 {
			archived("")
			continue
		}
		for _, s := range streams {
			sp, ok := a.Progress.Get(s, topic, lp.Partition)
			switch {
			case !ok:
				// Not started, or older than the progress topic: nothing
				// is closed until it says so.
				return time.Time{}, basis, fmt.Sprintf("%s: stream %s has published no progress", at, s), nil
			case sp.Watermark.IsZero():
				archived(fmt.Sprintf("stream %s has no watermark (none of its event types); ", s))
			case sp.PurgedThrough.IsZero():
				return time.Time{}, basis, fmt.Sprintf("%s: stream %s never purges (unbounded lateness)", at, s), nil
			default:
				take(sp.PurgedThrough.Add(-margin),
					fmt.Sprintf("%s: stream %s purged through %s", at, s, sp.PurgedThrough.UTC().Format(time.RFC3339)))
			}
		}
	}
	if !have {
		return time.Time{}, basis, topic + ": nothing archived yet", nil
	}
	return closed.UTC().Truncate(time.Hour), basis, waiting, nil
}
