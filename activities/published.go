package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/sdk/temporal"

	"reckon/internal/event"
	"reckon/lake"
)

// cellID identifies a window of a windowTable: key id and start (unix
// nanoseconds).
type cellID struct {
	key   int32
	start int64
}

// windowTable holds every window a recompute checks, one cell each, with
// what is published for it and, after the scan, its truth. Keys are
// interned (small ids, one string each) and the cells are plain values in
// one slice: nothing is allocated per window, and a day of 300 K windows
// is looked up without hashing (the dense index).
type windowTable struct {
	keys  []string
	keyID map[string]int32
	// The index of cells by window: per key, a slice of cell index + 1 by
	// window number from base (0: none), for the keys that fit in
	// maxDenseCells; the map for the others, and for windows outside
	// [base, base + nWin·win).
	base, win int64 // unix nanoseconds
	nWin      int64
	dense     [][]int32 // by key id; nil: the key is in index
	denseLen  int64     // entries allocated in dense
	index     map[cellID]int32
	// only, when non-nil, restricts the table to these windows (a targeted
	// recompute): cells of any other window are never created.
	only  map[cellID]bool
	cells []cell
}

// maxDenseCells bounds the dense index (4 bytes an entry): a million
// keys with a few windows each must not allocate every key's day.
const maxDenseCells = 1 << 22

// cell is one window: what consumers of the summaries topic hold for it
// (the highest version by any producer, and the stream's own highest),
// and the truth recomputed from the lake.
type cell struct {
	cellID
	flags  cellFlags
	latest paneFig // valid with hasPane
	stream paneFig // valid with hasStreamPane
	// streamProcessedUS is the stream pane's processing clock
	// (processed_at, event.Pane.Processed) in microseconds, rounded down:
	// an event ingested (whole microseconds) after it came too late for
	// that pane. Not emitted_at: the pane was produced later than the
	// clock its content stands on.
	streamProcessedUS int64
	truth             event.Agg
	// beyond counts the window's events that arrived after the stream's
	// latest pane of it was emitted (all, when it has none).
	beyond int64
}

type cellFlags uint8

const (
	hasPane       cellFlags = 1 << iota // something is published
	hasStreamPane                       // the stream published a pane
	latestByBatch                       // the latest pane is a batch correction
)

// paneFig are the figures of one published pane that a diff compares.
type paneFig struct {
	version, count int64
	sum, min, max  float64
}

func (f paneFig) agg() event.Agg {
	return event.Agg{Count: f.count, Sum: f.sum, Min: f.min, Max: f.max}
}

// newWindowTable returns an empty table for the windows starting in
// [from, to), one every step (the window size, or the hop of hopping
// windows).
func newWindowTable(from, to time.Time, step time.Duration) *windowTable {
	t := &windowTable{keyID: map[string]int32{}, index: map[cellID]int32{}, base: from.UnixNano(), win: int64(step)}
	if t.win > 0 && to.After(from) {
		t.nWin = (to.UnixNano() - t.base + t.win - 1) / t.win
	}
	return t
}

// restrict limits t to the windows ws (before any is added).
func (t *windowTable) restrict(ws []WindowRef) {
	t.only = map[cellID]bool{}
	for _, w := range ws {
		t.only[cellID{t.intern(w.Key), w.Start.UTC().UnixNano()}] = true
	}
}

// intern returns key's id, adding it.
func (t *windowTable) intern(key string) int32 {
	id, ok := t.keyID[key]
	if !ok {
		id = int32(len(t.keys))
		t.keys = append(t.keys, key)
		t.keyID[key] = id
		var d []int32
		if t.nWin > 0 && t.denseLen+t.nWin <= maxDenseCells {
			d = make([]int32, t.nWin)
			t.denseLen += t.nWin
		}
		t.dense = append(t.dense, d)
	}
	return id
}

// slot returns where the index holds window id's cell (+1) when the dense
// index has it, else nil.
func (t *windowTable) slot(id cellID) *int32 {
	if d := t.dense[id.key]; len(d) > 0 && id.start >= t.base {
		off := uint64(id.start) - uint64(t.base) // exact: no int64 overflow
		if n := off / uint64(t.win); n < uint64(t.nWin) && off%uint64(t.win) == 0 {
			return &d[n]
		}
	}
	return nil
}

// cell returns the index of the cell of window id, creating it; -1 when
// the table is restricted to other windows.
func (t *windowTable) cell(id cellID) int32 {
	sl := t.slot(id)
	if sl != nil {
		if *sl > 0 {
			return *sl - 1
		}
	} else if i, ok := t.index[id]; ok {
		return i
	}
	if t.only != nil && !t.only[id] {
		return -1
	}
	i := int32(len(t.cells))
	t.cells = append(t.cells, cell{cellID: id})
	if sl != nil {
		*sl = i + 1
	} else {
		t.index[id] = i
	}
	return i
}

// find returns the index of the cell of key's window at start, or -1.
func (t *windowTable) find(key string, start int64) int32 {
	k, ok := t.keyID[key]
	if !ok {
		return -1
	}
	id := cellID{k, start}
	if sl := t.slot(id); sl != nil {
		return *sl - 1
	}
	if i, ok := t.index[id]; ok {
		return i
	}
	return -1
}

// addPane records a published pane of window id as consumers of the
// summaries topic would read it, in order: the latest is the highest
// version by any producer (the first of equal ones), the stream's the
// highest version it computed.
func (t *windowTable) addPane(id cellID, f paneFig, computedBy string, processedUS int64) {
	i := t.cell(id)
	if i < 0 {
		return
	}
	c := &t.cells[i]
	if c.flags&hasPane == 0 || f.version > c.latest.version || c.latest.version == 0 {
		c.latest = f
		c.flags |= hasPane
		c.flags &^= latestByBatch
		if computedBy == event.ComputedByBatch {
			c.flags |= latestByBatch
		}
	}
	if computedBy == event.ComputedByStream && (c.flags&hasStreamPane == 0 || f.version > c.stream.version) {
		c.stream, c.streamProcessedUS = f, processedUS
		c.flags |= hasStreamPane
	}
}

// loadPublished adds to t what has been published for stream's windows
// starting in [from, to): the lake's pane history up to the pane archive's
// progress plus the rest of the summaries topic read directly, after
// waiting until every transaction open when it started has ended (so a
// correction this process or a concurrent one just committed is seen).
func (a *BatchTruth) loadPublished(ctx context.Context, t *windowTable, stream string, from, to time.Time) error {
	figs, err := a.Lake.ReadPaneFigures(ctx, stream, from, to)
	if err != nil {
		return err
	}
	t.cells = slices.Grow(t.cells, figs.Len()) // one cell a window, often one pane
	keys := make([]int32, len(figs.Keys))
	for i, k := range figs.Keys {
		keys[i] = t.intern(k)
	}
	for i := range figs.Len() {
		f := paneFig{version: figs.Version[i], count: figs.Count[i], sum: figs.Sum[i], min: figs.Min[i], max: figs.Max[i]}
		t.addPane(cellID{keys[figs.Key[i]], figs.WindowStart[i] * 1000}, f, figs.ComputedBys[figs.ComputedBy[i]], figs.ProcessedAt[i])
	}
	add := func(p *event.Pane) {
		if p.Stream != stream || p.WindowStart.Before(from) || !p.WindowStart.Before(to) {
			return
		}
		f := paneFig{version: p.Version, count: p.Count, sum: p.Sum, min: p.Min, max: p.Max}
		t.addPane(cellID{t.intern(p.Key), p.WindowStart.UnixNano()}, f, p.ComputedBy, p.Processed().UnixMicro())
	}
	topic := a.Cfg.Topics.Summaries
	k, err := a.kafka()
	if err != nil {
		return err
	}
	ends, err := stableEnds(ctx, k.Admin, topic)
	if err != nil {
		return err
	}
	for p, end := range ends {
		from := int64(0)
		if pr, err := a.Lake.ReadProgress(ctx, topic, p); err == nil {
			from = min(pr.NextOffset, end)
		} else if !errors.Is(err, lake.ErrNoProgress) {
			return err
		}
		err := k.readCommitted(ctx, topic, p, from, end, func(r *kgo.Record) {
			var pn event.Pane
			if json.Unmarshal(r.Value, &pn) == nil {
				add(&pn)
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
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
