package kafkaconn

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
)

// ReadTopic calls fn for every committed data record of topic, from the
// start of each partition up to its last stable offset as of the call, in
// offset order within a partition, as a read-committed consumer sees it;
// fn's error stops the read. It ends exactly there: transaction markers are
// fetched too (and not passed to fn), so the read reaches the last stable
// offset whatever record ends the log, without waiting for an idle poll.
func ReadTopic(ctx context.Context, cfg config.Kafka, role, topic string, fn func(*kgo.Record) error) error {
	adm, closeAdm, err := NewAdmin(cfg, role)
	if err != nil {
		return err
	}
	defer closeAdm()
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("kafkaconn: stable offsets of %s: %w", topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("kafkaconn: start offsets of %s: %w", topic, err)
	}
	from := map[int32]kgo.Offset{}
	end := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(topic, o.Partition)
		if o.Offset > s.Offset {
			from[o.Partition] = kgo.NewOffset().At(s.Offset)
			end[o.Partition] = o.Offset
		}
	})
	if len(from) == 0 {
		return nil
	}
	// Transaction markers are delivered too: every position up to the last
	// stable offset is then reached, whatever record ends the log.
	cl, err := NewClient(cfg, role,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		return err
	}
	defer cl.Close()
	for len(end) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("kafkaconn: read %s: %w", topic, ctx.Err())
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("kafkaconn: read %s/%d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			e, want := end[r.Partition]
			if ferr != nil || !want || r.Offset >= e {
				return
			}
			if r.Offset+1 >= e {
				delete(end, r.Partition)
			}
			if !r.Attrs.IsControl() {
				ferr = fn(r)
			}
		})
		if ferr != nil {
			return ferr
		}
	}
	return nil
}
