package activities

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"reckon/internal/config"
	"reckon/lake"
)

// FeatureReport is the feature half of the price of speed (docs/requirements.md
// R-ROLL-4, docs/adr/0038-feature-truth.md): for the events a recompute
// checked, how the features the stream served compare with their truth.
// Errors are over the served features compared (Exact + Differs).
type FeatureReport struct {
	// Checked: events whose true feature this run computed (every valid
	// unique event of the range in the lake).
	Checked int64 `json:"checked"`
	// Exact: the served count and sum equal the truth, bit for bit.
	Exact int64 `json:"exact"`
	// Differs: served, but count or sum differs from the truth.
	Differs int64 `json:"differs"`
	// NotServed: the stream served no feature for the event (it came too
	// late, or before a restart the stream never replayed).
	NotServed int64 `json:"not_served"`
	// ServedWithoutTruth: features served for events of the range the
	// lake holds no valid event of (not yet archived, or refused).
	ServedWithoutTruth int64   `json:"served_without_truth,omitempty"`
	CountErrMax        float64 `json:"count_abs_err_max"`
	CountErrMean       float64 `json:"count_abs_err_mean"`
	SumErrMax          float64 `json:"sum_abs_err_max"`
	SumErrMean         float64 `json:"sum_abs_err_mean"`
	// Totals of absolute errors, so reports can be summed.
	CountErrTotal float64 `json:"count_abs_err_total"`
	SumErrTotal   float64 `json:"sum_abs_err_total"`
}

// Add sums o into r (means are recomputed).
func (r *FeatureReport) Add(o FeatureReport) {
	r.Checked += o.Checked
	r.Exact += o.Exact
	r.Differs += o.Differs
	r.NotServed += o.NotServed
	r.ServedWithoutTruth += o.ServedWithoutTruth
	r.CountErrMax = math.Max(r.CountErrMax, o.CountErrMax)
	r.SumErrMax = math.Max(r.SumErrMax, o.SumErrMax)
	r.CountErrTotal += o.CountErrTotal
	r.SumErrTotal += o.SumErrTotal
	r.means()
}

func (r *FeatureReport) means() {
	r.CountErrMean, r.SumErrMean = 0, 0
	if n := r.Exact + r.Differs; n > 0 {
		r.CountErrMean = r.CountErrTotal / float64(n)
		r.SumErrMean = r.SumErrTotal / float64(n)
	}
}

// featureScope is which events' features a recompute checks: every key's
// events in [from, to) (in UTC nanoseconds), or, for a targeted one, each
// listed key's events in its spans.
type featureScope struct {
	from, to int64
	spans    map[string][][2]int64 // nil: every key, [from, to)
}

// featureScopeOf is in's scope for a stream of rolling size roll: the
// range's events, or for targeted windows [ws, we + roll) of each (a
// too-late event changes the truth of every later feature of its key
// within the rolling size).
func featureScopeOf(in RecomputeInput, window, roll time.Duration) featureScope {
	if len(in.Windows) == 0 {
		return featureScope{from: in.From.UnixNano(), to: in.To.UnixNano()}
	}
	s := featureScope{from: math.MaxInt64, to: math.MinInt64, spans: map[string][][2]int64{}}
	for _, w := range in.Windows {
		a := w.Start.UnixNano()
		b := a + int64(window) + int64(roll)
		s.spans[w.Key] = append(s.spans[w.Key], [2]int64{a, b})
		s.from, s.to = min(s.from, a), max(s.to, b)
	}
	return s
}

func (s *featureScope) keys() []string {
	if s.spans == nil {
		return nil
	}
	ks := make([]string, 0, len(s.spans))
	for k := range s.spans {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// has reports whether the scope holds key's event at et (nanoseconds).
func (s *featureScope) has(key string, et int64) bool {
	if s.spans == nil {
		return et >= s.from && et < s.to
	}
	for _, sp := range s.spans[key] {
		if et >= sp[0] && et < sp[1] {
			return true
		}
	}
	return false
}

// featurePoint is one valid event of the scan: its key (the fold's id),
// event time (nanoseconds), value and position in scan order (its id is
// the dedup's at that position).
type featurePoint struct {
	key int32
	pos int32
	et  int64
	v   float64
}

// foldFeatures computes the true rolling feature of every event of st in
// scope: count and sum over (et − rolling, et] of the key's valid unique
// events in the lake (each event_id once, the first in scan order, as the
// window fold keeps it), summed in event-time order with ties in scan
// order. That is operator.RollingTruth over the scan's valid unique
// events (the operator's rollWindow: the stream's own definition),
// computed for all events of a key in one sorted pass;
// TestFeatureFoldMatchesOperatorTruth holds the two bit-identical.
func (a *BatchTruth) foldFeatures(ctx context.Context, st config.Stream, scope featureScope, computedAt time.Time,
	trigger string) ([]lake.FeatureTruthRow, error) {
	roll := int64(st.Rolling)
	if scope.from >= scope.to {
		return nil, nil
	}
	// Events in (from − rolling, to) count towards the scope's features.
	scanFrom := time.Unix(0, scope.from).Add(-st.Rolling).Add(time.Nanosecond)
	scanTo := time.Unix(0, scope.to)
	hasValue := st.ValueField != ""
	var cols lake.Columns
	if hasValue {
		cols |= lake.ColValue
	}
	var (
		pts   []featurePoint
		keys  []string
		remap []int32
		dedup chunkDedup
	)
	stats, err := a.Lake.NewRowScanner().Scan(ctx,
		lake.Query{Topic: st.Topic, From: scanFrom.Truncate(time.Microsecond), To: scanTo,
			Keys: scope.keys(), EventTypes: st.EventTypes},
		cols,
		func(r *lake.RowView) error {
			occ := r.OccurredAt()
			v := 0.0
			if hasValue {
				v = r.Value()
			}
			if !nanoMicros(occ) || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil // operator.ErrRecord: not counted
			}
			id, ok := r.EventUUID()
			if !ok {
				return nil
			}
			sk := r.KeyID()
			for int(sk) >= len(remap) {
				remap = append(remap, 0)
			}
			if remap[sk] == 0 {
				keys = append(keys, r.Key())
				remap[sk] = int32(len(keys))
			}
			dedup.add(id)
			pts = append(pts, featurePoint{key: remap[sk] - 1, et: occ * 1000, v: v, pos: int32(len(pts))})
			return nil
		})
	if err != nil {
		return nil, err
	}
	if activity.IsActivity(ctx) {
		activity.RecordHeartbeat(ctx, fmt.Sprintf("features: scanned %d rows", stats.Rows))
	}
	dup := dedup.repeats()
	uniq := pts[:0]
	inScope := 0
	for i := range pts {
		if !dup[i] {
			uniq = append(uniq, pts[i])
			if scope.has(keys[pts[i].key], pts[i].et) {
				inScope++
			}
		}
	}
	// By key (the order keys were first scanned in: the rows are sorted
	// when written), then event time, ties in scan order.
	slices.SortFunc(uniq, func(x, y featurePoint) int {
		if c := cmp.Compare(x.key, y.key); c != 0 {
			return c
		}
		if c := cmp.Compare(x.et, y.et); c != 0 {
			return c
		}
		return cmp.Compare(x.pos, y.pos)
	})
	// The rows, allocated once, their event ids one string.
	f := featureOut{rows: make([]lake.FeatureTruthRow, 0, inScope), ids: make([]byte, 0, 36*inScope),
		stream: st.Name, roll: roll, computedAt: computedAt.UnixMicro(), trigger: trigger, dedup: &dedup}
	for lo := 0; lo < len(uniq); {
		hi := lo + 1
		for hi < len(uniq) && uniq[hi].key == uniq[lo].key {
			hi++
		}
		f.appendKey(keys[uniq[lo].key], uniq[lo:hi], &scope)
		lo = hi
	}
	text := string(f.ids)
	for i := range f.rows {
		f.rows[i].EventID = text[36*i : 36*(i+1)]
	}
	return f.rows, nil
}

// featureOut collects a fold's truth rows.
type featureOut struct {
	rows       []lake.FeatureTruthRow
	ids        []byte // the rows' event ids, 36 bytes each
	stream     string
	roll       int64
	computedAt int64
	trigger    string
	dedup      *chunkDedup // the scan's ids, by position
}

// appendKey appends the truth row of every point of one key's sorted
// points that the scope holds.
func (f *featureOut) appendKey(key string, pts []featurePoint, scope *featureScope) {
	lo, hi := 0, 0
	for i := range pts {
		at := pts[i].et
		if !scope.has(key, at) {
			continue
		}
		// (at − roll, at]: lo the first point after at − roll, hi the
		// first after at (ties of at, later in scan order, included).
		start := subSatNanos(at, f.roll)
		for lo < len(pts) && pts[lo].et <= start {
			lo++
		}
		hi = max(hi, i)
		for hi < len(pts) && pts[hi].et <= at {
			hi++
		}
		s := 0.0
		for j := lo; j < hi; j++ {
			s += pts[j].v
		}
		f.ids = appendUUID(f.ids, f.dedup.ids[pts[i].pos].id)
		f.rows = append(f.rows, lake.FeatureTruthRow{
			Stream: f.stream, Key: key, EventTime: at / 1000, SizeNS: f.roll,
			Count: int64(hi - lo), Sum: s, ComputedAt: f.computedAt, Trigger: f.trigger,
		})
	}
}

// subSatNanos is a − b, saturating at the int64 range (the operator's
// subSat for b ≥ 0).
func subSatNanos(a, b int64) int64 {
	if a < math.MinInt64+b {
		return math.MinInt64
	}
	return a - b
}

// appendUUID appends the canonical text of a UUID (lower-case hex,
// 8-4-4-4-12): the only form the lake holds.
func appendUUID(dst []byte, id [16]byte) []byte {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], id[10:16])
	return append(dst, b[:]...)
}

// recomputeFeatures is RecomputeWindows' feature half, for a stream with
// rolling set: the true feature of every event in the recompute's scope,
// compared with what the stream served (the features table), written to
// the feature_truth table unless a dry run.
func (a *BatchTruth) recomputeFeatures(ctx context.Context, st config.Stream, in RecomputeInput,
	res *RecomputeResult) error {
	scope := featureScopeOf(in, st.Window, st.Rolling)
	rows, err := a.foldFeatures(ctx, st, scope, a.now().UTC(), in.Trigger)
	if err != nil {
		return err
	}
	rep, err := a.compareServed(ctx, st, &scope, rows)
	if err != nil {
		return err
	}
	res.Report.Features = &rep
	if in.DryRun || len(rows) == 0 {
		return nil
	}
	files, err := a.Lake.WriteFeatureTruth(ctx, st.Name, TruthFileName(in), rows, in.TruthFile != "")
	if err != nil {
		return err
	}
	for _, f := range files {
		res.Files = append(res.Files, f.Path)
	}
	return nil
}

// compareServed compares truth with the features the stream served for
// the scope's events, as the curated feature_status table holds them (of
// an event served more than once, the first emitted): its hour files of
// the scope, not every served file of the day; the features table itself
// for an hour of events the curation has not written
// (lake.ReadServedStatus). A served feature of another rolling size is
// refused: comparing it with these truths would be wrong.
func (a *BatchTruth) compareServed(ctx context.Context, st config.Stream, scope *featureScope,
	truth []lake.FeatureTruthRow) (FeatureReport, error) {
	var rep FeatureReport
	const hourUS = int64(time.Hour / time.Microsecond)
	hours := make([]int64, 0, len(truth))
	for i := range truth {
		et := truth[i].EventTime
		hours = append(hours, et-((et%hourUS)+hourUS)%hourUS)
	}
	rows, err := a.Lake.ReadServedStatus(ctx, st.Name, time.Unix(0, scope.from).Truncate(time.Microsecond),
		time.Unix(0, scope.to).Add(time.Microsecond-1).Truncate(time.Microsecond), hours)
	if err != nil {
		return rep, err
	}
	type fig struct {
		count int64
		sum   float64
	}
	served := map[string]fig{}
	for i := range rows {
		r := &rows[i]
		if r.ServedCount == nil || !scope.has(r.Key, r.EventTime*1000) {
			continue
		}
		if r.SizeNS != int64(st.Rolling) {
			return rep, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"truth: stream %s served features of rolling %v (event %s), this batch computes %v: "+
					"align rolling before comparing", st.Name, time.Duration(r.SizeNS), r.EventID, st.Rolling),
				ErrTypeTruthSettings, nil)
		}
		served[r.EventID] = fig{*r.ServedCount, *r.ServedSum}
	}
	for i := range truth {
		t := &truth[i]
		rep.Checked++
		f, ok := served[t.EventID]
		if !ok {
			rep.NotServed++
			continue
		}
		delete(served, t.EventID)
		if f.count == t.Count && f.sum == t.Sum {
			rep.Exact++
			continue
		}
		rep.Differs++
		ce, se := math.Abs(float64(f.count-t.Count)), math.Abs(f.sum-t.Sum)
		rep.CountErrMax, rep.SumErrMax = math.Max(rep.CountErrMax, ce), math.Max(rep.SumErrMax, se)
		rep.CountErrTotal += ce
		rep.SumErrTotal += se
	}
	rep.ServedWithoutTruth = int64(len(served))
	rep.means()
	return rep, nil
}

// FeatureTruthRows is the true rolling feature of every event of in's
// scope, as a recompute by a computes it (without comparing or writing):
// for benchmarks and tools. A function, not a method: the worker registers
// BatchTruth's methods as activities.
func FeatureTruthRows(ctx context.Context, a *BatchTruth, in RecomputeInput) ([]lake.FeatureTruthRow, error) {
	st, ok := a.Cfg.StreamByName(in.Stream)
	if !ok {
		return nil, badInput("unknown stream %q", in.Stream)
	}
	if st.Rolling <= 0 {
		return nil, badInput("stream %s has no rolling features", st.Name)
	}
	return a.foldFeatures(ctx, st, featureScopeOf(in, st.Window, st.Rolling), a.now().UTC(), in.Trigger)
}
