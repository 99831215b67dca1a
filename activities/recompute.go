package activities

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
	"reckon/lake"
)

// WindowRef names one window of a stream by key and start.
type WindowRef struct {
	Key   string    `json:"key"`
	Start time.Time `json:"start"`
}

// Triggers of a recompute, recorded on correction records and reports.
const (
	TriggerReconcile  = "reconcile"
	TriggerReplay     = "replay"
	TriggerCorrection = "correction"
	TriggerManual     = "manual"
	// TriggerFinalize: the finalizer, which recomputes each stream's
	// windows as soon as their horizon passes (workflows.Finalize).
	TriggerFinalize = "finalize"
)

// HeaderTrigger names, on a correction record, what triggered it.
const HeaderTrigger = "reckon.trigger"

// RecomputeInput is one recompute: windows of Stream starting in [From,
// To), window-aligned, within one UTC day.
type RecomputeInput struct {
	Stream   string
	From, To time.Time
	// Windows, when set, restricts the recompute to exactly these windows
	// (targeted corrections): other keys' windows in the range may still be
	// held by the stream.
	Windows []WindowRef
	// DryRun computes and reports but publishes and writes nothing.
	DryRun  bool
	Trigger string
	// HorizonPassedAt, when set, is when the stream's progress passed the
	// range (HorizonResult.PassedAt of a wait that saw it pass): the start
	// of the time to final (metric reckon_batch_time_to_final_seconds).
	HorizonPassedAt time.Time `json:",omitzero"`
	// TruthFile, when set, names the truth file the rows go to, merged
	// with the rows it already holds (lake.Lake.MergeTruthRows): the
	// finalizer's steps of one hour share a file.
	TruthFile string `json:",omitempty"`
}

// WindowChange is one correction (published, or that a dry run would publish).
type WindowChange struct {
	Key         string    `json:"key"`
	WindowStart time.Time `json:"window_start"`
	// Published is the latest version before (0: none) and its figures.
	PublishedVersion int64   `json:"published_version"`
	PublishedCount   int64   `json:"published_count"`
	PublishedSum     float64 `json:"published_sum"`
	TruthCount       int64   `json:"truth_count"`
	TruthSum         float64 `json:"truth_sum"`
	Version          int64   `json:"version"`
	Reason           string  `json:"reason"`
}

// MaxChanges bounds RecomputeResult.Changes (results stay small).
const MaxChanges = 25

// RecomputeResult is small: counts, paths and a sample of the changes.
type RecomputeResult struct {
	Report TruthReport `json:"report"`
	// Files of the truth table written (relative to the lake root).
	Files []string `json:"files,omitempty"`
	// Changes: the first MaxChanges corrections, by key and window.
	Changes []WindowChange `json:"changes,omitempty"`
	// TransactionalID published the corrections (one transaction).
	TransactionalID string `json:"transactional_id,omitempty"`
}

// TransactionalID is the Kafka transactional id of corrections of stream
// for the UTC date of day. Every recompute of the same stream and date
// uses it, so they exclude each other: initializing the producer fences
// any other recompute of that date still running, whose commit then fails
// and whose retry sees the fencer's corrections.
func TransactionalID(clientID, stream string, day time.Time) string {
	return clientID + "-truth-" + stream + "-" + day.UTC().Format("20060102")
}

// TruthFileName names the truth files of a recompute: its range and, for a
// targeted one, a hash of its windows; the same recompute writes the same
// name. A TruthFile names itself.
func TruthFileName(in RecomputeInput) string {
	if in.TruthFile != "" {
		return in.TruthFile
	}
	name := "truth-" + in.From.UTC().Format("20060102T150405Z") + "-" + in.To.UTC().Format("20060102T150405Z")
	if len(in.Windows) > 0 {
		h := fnv.New64a()
		ws := slices.Clone(in.Windows)
		slices.SortFunc(ws, func(a, b WindowRef) int {
			if c := strings.Compare(a.Key, b.Key); c != 0 {
				return c
			}
			return a.Start.Compare(b.Start)
		})
		for _, w := range ws {
			fmt.Fprintf(h, "%s|%d\n", w.Key, w.Start.UnixNano())
		}
		name += fmt.Sprintf("-w%016x", h.Sum64())
	}
	return name
}

// RecomputeWindows recomputes the truth of a stream's windows from the
// lake (and, for a stream with rolling set, of its events' rolling
// features: recomputeFeatures, docs/adr/0038-feature-truth.md) and
// publishes version latest+1, timing correction, where the latest
// published pane differs (or none exists). It reads what is published,
// folds the lake's rows (dedup by event_id) into their windows as the
// stream operator's own window code does (operator.Truth; foldLake) and
// diffs; then, in a short critical
// section (publishFenced), it fences every other publisher of this stream
// and date (transactional id), reads the latest versions again, leaves
// windows someone published to meanwhile alone, writes the truth table and
// publishes the corrections in one Kafka transaction. A retry or a repeat
// finds its own corrections published and publishes nothing new. The
// caller must have checked the horizon (CheckHorizon).
func (a *BatchTruth) RecomputeWindows(ctx context.Context, in RecomputeInput) (RecomputeResult, error) {
	var res RecomputeResult
	st, ok := a.Cfg.StreamByName(in.Stream)
	if !ok {
		return res, badInput("unknown stream %q", in.Stream)
	}
	if err := a.checkRange(st, in.From, in.To); err != nil {
		return res, err
	}
	if err := a.checkLakeColumns(st); err != nil {
		return res, err
	}
	from, to := in.From.UTC(), in.To.UTC()
	res.Report = TruthReport{Stream: st.Name, From: from, To: to, DryRun: in.DryRun}

	t := newWindowTable(from, to, st.Step())
	var keys []string // of a targeted recompute: the only keys scanned
	if len(in.Windows) > 0 {
		t.restrict(in.Windows)
		for _, w := range in.Windows {
			if !slices.Contains(keys, w.Key) {
				keys = append(keys, w.Key)
			}
		}
	}
	if err := a.loadPublished(ctx, t, st.Name, from, to); err != nil {
		return res, err
	}
	if err := a.foldLake(ctx, st, from, to, keys, t); err != nil {
		return res, err
	}

	d := diffWindows(diffSettings{Stream: st.Name, Window: st.Window, Now: a.now().UTC()}, t)
	rep := &res.Report
	*rep = d.Report
	rep.Stream, rep.From, rep.To, rep.DryRun = st.Name, from, to, in.DryRun
	corrections, truthRows := d.Corrections, d.TruthRows
	if in.DryRun {
		res.Changes = changes(corrections)
		return res, a.featureTruth(ctx, st, in, &res)
	}
	if len(corrections) == 0 {
		if err := a.writeTruthTable(ctx, &res, in, truthRows); err != nil {
			return res, err
		}
		return res, a.featureTruth(ctx, st, in, &res)
	}
	res.TransactionalID = TransactionalID(a.Cfg.Kafka.ClientID, st.Name, from)
	// One attempt: a fenced or failed publish fails the activity, and the
	// workflow's retry policy (workflows.Recompute) is the only retry. A
	// retry keeps nothing from this attempt and needs nothing: it reads
	// the published versions again (seeing the fencer's corrections),
	// re-scans the lake, whose rows of a range past its horizon no longer
	// change, and decides anew — at the cost of the scan, paid only when
	// two recomputes of one stream and date collide.
	published, err := a.publishFenced(ctx, &res, in, corrections, truthRows)
	if err != nil {
		return res, err
	}
	rep.Superseded = int64(len(corrections) - len(published))
	rep.Corrected = int64(len(published))
	res.Changes = changes(published)
	return res, a.featureTruth(ctx, st, in, &res)
}

// featureTruth runs the feature half of a recompute (recomputeFeatures)
// for a stream with rolling set, after its windows: the window
// corrections do not wait on it, and a retry after a failure here finds
// them published and publishes nothing new.
func (a *BatchTruth) featureTruth(ctx context.Context, st config.Stream, in RecomputeInput,
	res *RecomputeResult) error {
	if st.Rolling <= 0 {
		return nil
	}
	return a.recomputeFeatures(ctx, st, in, res)
}

// candidate is a correction found by a recompute, before publishing.
type candidate struct {
	pane     event.Pane // its window is pane.Key, pane.WindowStart
	truthRow int        // index of its truth row
	was      event.Pane // the latest published pane it corrects (version 0: none)
}

func changes(cs []candidate) []WindowChange {
	var out []WindowChange
	for _, c := range cs[:min(len(cs), MaxChanges)] {
		out = append(out, WindowChange{
			Key: c.pane.Key, WindowStart: c.pane.WindowStart,
			PublishedVersion: c.was.Version, PublishedCount: c.was.Count, PublishedSum: c.was.Sum,
			TruthCount: c.pane.Count, TruthSum: c.pane.Sum, Version: c.pane.Version, Reason: c.pane.Reason,
		})
	}
	return out
}

// publishFenced is the critical section, kept short: initialize the
// stream/date's transactional producer (fencing every other publisher of
// that stream and date), read the latest versions again, drop corrections
// of windows someone else published to since this recompute read them (its
// truth may be older than theirs: never publish over a fresher one), write
// the truth rows, and publish the rest in one transaction. A fenced commit
// fails, and so does the activity: its retry starts over.
func (a *BatchTruth) publishFenced(ctx context.Context, res *RecomputeResult, in RecomputeInput, cands []candidate, truthRows []lake.SummaryRow) ([]candidate, error) {
	// A producer per publish, not the shared Kafka: its transactional id
	// is this stream and date's, and initializing it is the fence.
	cl, err := kgo.NewClient(append(kafkaconn.Opts(a.Cfg.Kafka, "truth"),
		kgo.TransactionalID(res.TransactionalID),
		kgo.TransactionTimeout(time.Minute),
		kgo.ProducerLinger(0),
	)...)
	if err != nil {
		// kgo.NewClient fails only on options it refuses: configuration.
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("truth: kafka producer: %v", err), ErrTypeConfig, err)
	}
	defer cl.Close()
	if _, _, err := cl.ProducerID(ctx); err != nil {
		return nil, fmt.Errorf("truth: init producer %s: %w", res.TransactionalID, err)
	}
	// The latest versions again, of the corrected windows only.
	now := newWindowTable(in.From, in.To, 0) // few windows: the map serves
	refs := make([]WindowRef, len(cands))
	for i, c := range cands {
		refs[i] = WindowRef{Key: c.pane.Key, Start: c.pane.WindowStart}
	}
	now.restrict(refs)
	if err := a.loadPublished(ctx, now, in.Stream, in.From.UTC(), in.To.UTC()); err != nil {
		return nil, err
	}
	rows := slices.Clone(truthRows)
	var keep []candidate
	var panes []event.Pane
	for _, c := range cands {
		var v int64
		if i := now.find(c.pane.Key, c.pane.WindowStart.UnixNano()); i >= 0 && now.cells[i].flags&hasPane != 0 {
			v = now.cells[i].latest.version
		}
		if v != c.was.Version {
			rows[c.truthRow].Version, rows[c.truthRow].Reason = v, fmt.Sprintf("superseded: v%d was published concurrently", v)
			continue
		}
		keep = append(keep, c)
		panes = append(panes, c.pane)
	}
	// The lake first: a correction on the topic always has its truth row.
	if err := a.writeTruthTable(ctx, res, in, rows); err != nil {
		return nil, err
	}
	if len(panes) == 0 {
		return nil, nil
	}
	return keep, a.publish(ctx, cl, panes, in.Trigger)
}

// writeTruthTable writes rows to the lake's truth table (the recomputed
// windows, lake.WriteTruthRows) under the recompute's file name and
// records the files in res.
func (a *BatchTruth) writeTruthTable(ctx context.Context, res *RecomputeResult, in RecomputeInput, rows []lake.SummaryRow) error {
	if len(rows) == 0 {
		return nil
	}
	write := a.Lake.WriteTruthRows
	if in.TruthFile != "" {
		write = a.Lake.MergeTruthRows
	}
	files, err := write(ctx, in.Stream, TruthFileName(in), rows)
	if err != nil {
		return err
	}
	res.Files = res.Files[:0]
	for _, f := range files {
		res.Files = append(res.Files, f.Path)
	}
	return nil
}

// foldLake scans [from, to) of st's topic chunk by chunk and folds each
// row into its window's cell of t: the truth, and the count of events
// that arrived after the stream's latest pane (beyond). Rows of windows t
// does not hold (a targeted recompute's other windows) are skipped.
//
// The fold is operator.Truth's, run once per chunk of max(window, 1h)
// (docs/adr/0008-batch-truth.md, step 5), without an Operator: with
// unbounded lateness and dedup, every record the operator can represent
// (times within int64 nanoseconds, a finite value) whose event_id is new
// in the chunk is added to its window with event.Agg.Add, in scan order,
// and nothing else happens. Doing that directly on the scan's columns
// saves the operator's per-record work (watermark, panes fired into an
// output nobody reads, its dedup's TTL ring) and a map of windows to
// merge afterwards; TestFoldMatchesOperatorTruth holds the two to the
// same answer.
func (a *BatchTruth) foldLake(ctx context.Context, st config.Stream, from, to time.Time, keys []string, t *windowTable) error {
	step := st.Window * time.Duration(max(1, int64((time.Hour+st.Window-1)/st.Window)))
	win := int64(st.Window)
	// Without a value field every event's value is 0: the value column is
	// neither read nor decoded.
	hasValue := st.ValueField != ""
	cols := lake.ColIngestedAt
	if hasValue {
		cols |= lake.ColValue
	}
	scan := a.Lake.NewRowScanner() // its buffers serve every chunk
	// Hopping windows (docs/adr/0041): a chunk holds the windows starting
	// in [cf, ct) and scans the events they cover, [cf, ct + span).
	hop := int64(st.Step())
	span := win - hop
	var (
		seen chunkDedup
		// The chunk's rows to count, in scan order: cell and value.
		rowCell []int32
		rowVal  []float64
		// Hopping: row i's cells are rowCells[rowEnd[i-1]:rowEnd[i]].
		rowCells []int32
		rowEnd   []int32
		remap    []int32 // the scan's key id -> t's key id + 1 (0: not yet seen)
	)
	for cf := from; cf.Before(to); cf = cf.Add(step) {
		ct := cf.Add(step)
		if ct.After(to) {
			ct = to
		}
		seen.reset()
		rowCell, rowVal, remap = rowCell[:0], rowVal[:0], remap[:0]
		rowCells, rowEnd = rowCells[:0], rowEnd[:0]
		cur, ci := cellID{key: -1}, int32(-1)
		cfN, ctN := cf.UnixNano(), ct.UnixNano()
		hopping := func(r *lake.RowView) error {
			sk := r.KeyID()
			for int(sk) >= len(remap) {
				remap = append(remap, 0)
			}
			if remap[sk] == 0 {
				remap[sk] = t.intern(r.Key()) + 1
			}
			eid, ok := r.EventUUID()
			if !ok {
				return nil
			}
			occ, ing := r.OccurredAt(), r.IngestedAt()
			last := floorNanos(occ*1000, hop)
			first := len(rowCells)
			// The windows covering occ that start in [cf, ct), in start
			// order, as the operator updates them.
			for s := max(last-span, cfN); s <= last && s < ctN; s += hop {
				ci := t.cell(cellID{remap[sk] - 1, s})
				if ci < 0 {
					continue
				}
				c := &t.cells[ci]
				if c.flags&hasStreamPane == 0 || ing > c.streamProcessedUS {
					c.beyond++
				}
				rowCells = append(rowCells, ci)
			}
			if len(rowCells) == first {
				return nil
			}
			v := 0.0
			if hasValue {
				v = r.Value()
			}
			if !nanoMicros(occ) || !nanoMicros(ing) || math.IsNaN(v) || math.IsInf(v, 0) {
				rowCells = rowCells[:first]
				return nil // operator.ErrRecord: not counted
			}
			seen.add(eid)
			rowEnd, rowVal = append(rowEnd, int32(len(rowCells))), append(rowVal, v)
			return nil
		}
		tumbling := func(r *lake.RowView) error {
			sk := r.KeyID()
			for int(sk) >= len(remap) {
				remap = append(remap, 0)
			}
			if remap[sk] == 0 {
				remap[sk] = t.intern(r.Key()) + 1
			}
			// occ*1000 wraps as time.UnixMicro(occ).UnixNano() does;
			// the operator refuses such a time below.
			occ := r.OccurredAt()
			id := cellID{remap[sk] - 1, floorNanos(occ*1000, win)}
			if id != cur {
				cur, ci = id, t.cell(id)
			}
			if ci < 0 {
				return nil
			}
			eid, ok := r.EventUUID()
			if !ok {
				return nil // the gate lets only canonical UUIDs into the lake
			}
			c := &t.cells[ci]
			ing := r.IngestedAt()
			if c.flags&hasStreamPane == 0 || ing > c.streamProcessedUS {
				c.beyond++
			}
			v := 0.0
			if hasValue {
				v = r.Value()
			}
			if !nanoMicros(occ) || !nanoMicros(ing) || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil // operator.ErrRecord: not counted
			}
			seen.add(eid)
			rowCell, rowVal = append(rowCell, ci), append(rowVal, v)
			return nil
		}
		fold := tumbling
		if span > 0 {
			fold = hopping
		}
		q := lake.Query{Topic: st.Topic, From: cf, To: ct.Add(time.Duration(span)), Keys: keys, EventTypes: st.EventTypes}
		stats, err := scan.Scan(ctx, q, cols, fold)
		if err != nil {
			return err
		}
		// In scan order, each event_id of the chunk once: the first.
		for i, dup := range seen.repeats() {
			switch {
			case dup:
			case span == 0:
				t.cells[rowCell[i]].truth.Add(rowVal[i])
			default:
				lo := int32(0)
				if i > 0 {
					lo = rowEnd[i-1]
				}
				for _, ci := range rowCells[lo:rowEnd[i]] {
					t.cells[ci].truth.Add(rowVal[i])
				}
			}
		}
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, fmt.Sprintf("scanned %s: %d rows", ct.Format(time.RFC3339), stats.Rows))
		}
	}
	return nil
}

// nanoMicros reports whether us microseconds since the epoch is an
// instant int64 nanoseconds can hold (the operator's range, 1678–2262).
func nanoMicros(us int64) bool {
	return us >= math.MinInt64/1000 && us <= math.MaxInt64/1000
}

// publish produces the corrections in one transaction: all or none.
func (a *BatchTruth) publish(ctx context.Context, cl *kgo.Client, panes []event.Pane, trigger string) error {
	if err := cl.BeginTransaction(); err != nil {
		return fmt.Errorf("truth: begin transaction: %w", err)
	}
	recs := make([]*kgo.Record, 0, len(panes))
	for i := range panes {
		p := &panes[i]
		recs = append(recs, &kgo.Record{
			Topic: a.Cfg.Topics.Summaries, Key: []byte(p.RecordKey()), Value: p.AppendJSON(nil),
			Headers: []kgo.RecordHeader{{Key: HeaderTrigger, Value: []byte(trigger)}},
		})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		_ = cl.AbortBufferedRecords(ctx)
		_ = cl.EndTransaction(ctx, kgo.TryAbort)
		return fmt.Errorf("truth: publish corrections: %w", err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("truth: commit corrections: %w", err)
	}
	return nil
}

func (a *BatchTruth) checkRange(st config.Stream, from, to time.Time) error {
	switch {
	case st.Window <= 0:
		return badInput("stream %s has no window", st.Name)
	case !from.Before(to):
		return badInput("range [%s, %s) is empty", fmtTime(from), fmtTime(to))
	case from.UnixNano()%int64(st.Window) != 0 || to.UnixNano()%int64(st.Window) != 0:
		return badInput("range [%s, %s) is not aligned to the %v windows of %s", fmtTime(from), fmtTime(to), st.Window, st.Name)
	case to.After(from.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)):
		return badInput("range [%s, %s) crosses a UTC midnight: recompute one day at a time", fmtTime(from), fmtTime(to))
	}
	return nil
}

// checkLakeColumns: the lake's key and value columns come from the first
// stream reading a topic (activities.Archive.table); a stream sharing the
// topic with other fields cannot be recomputed from them.
func (a *BatchTruth) checkLakeColumns(st config.Stream) error {
	for _, s := range a.Cfg.Streams {
		if s.Topic != st.Topic {
			continue
		}
		if s.KeyField != st.KeyField || (st.ValueField != "" && s.ValueField != st.ValueField) {
			return badInput("stream %s shares topic %s with stream %s, whose key/value fields the lake's columns hold", st.Name, st.Topic, s.Name)
		}
		return nil
	}
	return nil
}
