package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/sdk/temporal"

	"reckon/internal/event"
	"reckon/lake"
)

// winKey identifies a window of one stream.
type winKey struct {
	key   string
	start int64 // unix nanoseconds
}

// published is what consumers of the summaries topic hold for a window.
type published struct {
	latest event.Pane  // highest version, any producer
	stream *event.Pane // highest version computed by the stream, if any
}

func (p *published) add(pn event.Pane) {
	if pn.Version > p.latest.Version || p.latest.Version == 0 {
		p.latest = pn
	}
	if pn.ComputedBy == event.ComputedByStream && (p.stream == nil || pn.Version > p.stream.Version) {
		c := pn
		p.stream = &c
	}
}

// latestPanes returns what has been published for stream's windows starting
// in [from, to): the lake's pane history up to the pane archive's progress
// plus the rest of the summaries topic read directly, after waiting until
// every transaction open when it started has ended (so a correction this
// process or a concurrent one just committed is seen).
func (a *BatchTruth) latestPanes(ctx context.Context, stream string, from, to time.Time) (map[winKey]*published, error) {
	out := map[winKey]*published{}
	add := func(p event.Pane) {
		if p.Stream != stream || p.WindowStart.Before(from) || !p.WindowStart.Before(to) {
			return
		}
		k := winKey{p.Key, p.WindowStart.UnixNano()}
		pb := out[k]
		if pb == nil {
			pb = &published{}
			out[k] = pb
		}
		pb.add(p)
	}
	lakePanes, err := a.Lake.ReadPanes(ctx, stream, from, to)
	if err != nil {
		return nil, err
	}
	for _, p := range lakePanes {
		add(p)
	}
	topic := a.Cfg.Topics.Summaries
	k, err := a.kafka()
	if err != nil {
		return nil, err
	}
	ends, err := stableEnds(ctx, k.Admin, topic)
	if err != nil {
		return nil, err
	}
	for p, end := range ends {
		from := int64(0)
		if pr, err := a.Lake.ReadProgress(ctx, topic, p); err == nil {
			from = min(pr.NextOffset, end)
		} else if !errors.Is(err, lake.ErrNoProgress) {
			return nil, err
		}
		err := k.readCommitted(ctx, topic, p, from, end, func(r *kgo.Record) {
			var pn event.Pane
			if json.Unmarshal(r.Value, &pn) == nil {
				add(pn)
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// stableEnds returns, per partition of topic, a last stable offset at or
// beyond the high watermark observed first: every transaction that was
// open then has committed or aborted. It waits (bounded) for that.
func stableEnds(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	hw, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("truth: end offsets %s: %w", topic, err)
	}
	if err := hw.Error(); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("truth: topic %s: %v (run `reckon topics apply`)", topic, err), ErrTypeTruthTopic, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		lso, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("truth: stable offsets %s: %w", topic, err)
		}
		out := map[int32]int64{}
		ok := true
		hw.Each(func(o kadm.ListedOffset) {
			s, found := lso.Lookup(topic, o.Partition)
			if !found || s.Err != nil || s.Offset < o.Offset {
				ok = false
				return
			}
			out[o.Partition] = s.Offset
		})
		if ok {
			return out, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("truth: %s: a transaction stays open for more than 30s", topic)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
