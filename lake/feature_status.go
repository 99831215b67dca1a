package lake

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"reckon/lake/storage"
)

// FeatureStatusDir is the curated table of features: one row per event
// (stream, event_id) with the feature the stream served beside its truth
// and a status, in
// feature_status/stream=<s>/event_date=YYYY-MM-DD/features-HH.parquet, one
// file per UTC hour of event_time (docs/adr/0038-feature-truth.md). It is
// the features table (what was served) and the feature_truth table (what
// was true) merged; the SQL endpoint's view `features` reads it.
const FeatureStatusDir = "feature_status"

// Feature statuses in the feature_status table.
const (
	// FeatureExact: served, and the served count and sum equal the truth.
	FeatureExact = "exact"
	// FeatureDiffers: served, and the count or the sum differs from the truth.
	FeatureDiffers = "differs"
	// FeatureNotServed: the batch computed a truth, the stream served no
	// feature for the event (too late, or lost to a restart).
	FeatureNotServed = "not_served"
	// FeaturePending: served, the batch has not computed its truth yet.
	FeaturePending = "pending"
)

// FeatureStatusRow is one row of the feature_status table. served_* are
// NULL when the stream served no feature for the event, true_* when the
// batch has not computed its truth yet. The last columns say which served
// record and which truth the row holds, so merging rows in any order
// gives the same table: of several served records the first emitted
// (then the lowest partition and offset of the features topic), of
// several truths the latest computed.
type FeatureStatusRow struct {
	Stream      string   `parquet:"stream,dict"`
	Key         string   `parquet:"key,dict"`
	EventID     string   `parquet:"event_id"`
	EventTime   int64    `parquet:"event_time,timestamp(microsecond:utc)"`
	ServedCount *int64   `parquet:"served_count,optional"`
	ServedSum   *float64 `parquet:"served_sum,optional"`
	ServedAt    *int64   `parquet:"served_at,optional,timestamp(microsecond:utc)"`
	TrueCount   *int64   `parquet:"true_count,optional"`
	TrueSum     *float64 `parquet:"true_sum,optional"`
	Status      string   `parquet:"status,dict"`
	// SizeNS is the rolling size of the served feature (of the truth
	// when none was served).
	SizeNS          int64  `parquet:"size_ns"`
	ServedPartition *int32 `parquet:"served_partition,optional"`
	ServedOffset    *int64 `parquet:"served_offset,optional"`
	ComputedAt      *int64 `parquet:"computed_at,optional,timestamp(microsecond:utc)"`
}

// status derives the row's status from what it holds.
func (r *FeatureStatusRow) status() string {
	switch {
	case r.TrueCount == nil:
		return FeaturePending
	case r.ServedCount == nil:
		return FeatureNotServed
	case *r.ServedCount == *r.TrueCount && *r.ServedSum == *r.TrueSum:
		return FeatureExact
	}
	return FeatureDiffers
}

// addServed merges a served feature into the row: the first emitted wins.
func (r *FeatureStatusRow) addServed(f *FeatureRow) {
	if r.ServedAt != nil {
		if c := cmpInt64(*r.ServedAt, f.EmittedAt); c < 0 || c == 0 && (*r.ServedPartition < f.KafkaPartition ||
			*r.ServedPartition == f.KafkaPartition && *r.ServedOffset <= f.KafkaOffset) {
			return
		}
	}
	count, sum, at, p, o := f.Count, f.Sum, f.EmittedAt, f.KafkaPartition, f.KafkaOffset
	r.ServedCount, r.ServedSum, r.ServedAt, r.ServedPartition, r.ServedOffset = &count, &sum, &at, &p, &o
	r.SizeNS = f.SizeNS // the served size wins: a recompute checks it
	if r.TrueCount == nil {
		r.Key, r.EventTime = f.Key, f.EventTime
	}
	r.Status = r.status()
}

// addTruth merges a truth row into the row: the latest computed wins
// (ties: the larger count, then the larger sum, so the order of merging
// never matters).
func (r *FeatureStatusRow) addTruth(t *FeatureTruthRow) {
	if r.ComputedAt != nil {
		if c := cmpInt64(*r.ComputedAt, t.ComputedAt); c > 0 || c == 0 && (*r.TrueCount > t.Count ||
			*r.TrueCount == t.Count && *r.TrueSum >= t.Sum) {
			return
		}
	}
	count, sum, at := t.Count, t.Sum, t.ComputedAt
	r.TrueCount, r.TrueSum, r.ComputedAt = &count, &sum, &at
	r.Key, r.EventTime = t.Key, t.EventTime
	if r.ServedCount == nil {
		r.SizeNS = t.SizeNS
	}
	r.Status = r.status()
}

var featureStatusSorting = []parquet.SortingColumn{
	parquet.Ascending("key"),
	parquet.Ascending("event_time"),
	parquet.Ascending("event_id"),
}

func compareFeatureStatus(a, b *FeatureStatusRow) int {
	if c := strings.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	if c := cmpInt64(a.EventTime, b.EventTime); c != 0 {
		return c
	}
	return strings.Compare(a.EventID, b.EventID)
}

func featureStatusFile(hour int) string { return fmt.Sprintf("features-%02d.parquet", hour) }

// parseEventDateFile splits <table>/stream=<s>/event_date=<d>/<name>.parquet.
func parseEventDateFile(key string) (table, stream string, day time.Time, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 4 || !strings.HasSuffix(parts[3], ".parquet") || hidden(parts[3]) {
		return "", "", time.Time{}, false
	}
	stream, ok1 := strings.CutPrefix(parts[1], "stream=")
	day, ok2 := parseDateDir("event_date", parts[2])
	if !ok1 || !ok2 || ValidateName(stream) != nil {
		return "", "", time.Time{}, false
	}
	return parts[0], stream, day, true
}

// curateFeatures merges files of the features and feature_truth tables
// (others are ignored) into the feature_status table: per (stream, event
// date), under that day's lock, it rewrites the hour files of the events
// the files hold. Merging is order-independent (FeatureStatusRow), so
// curating the same files again changes nothing and served rows and
// truths may come in any order.
func (l *Lake) curateFeatures(ctx context.Context, files []string) (CurateResult, error) {
	var res CurateResult
	type day struct {
		stream string
		day    int64
	}
	var order []day
	src := map[day][]string{}
	for _, f := range files {
		table, stream, d, ok := parseEventDateFile(f)
		if !ok || (table != FeaturesDir && table != FeatureTruthDir) {
			continue
		}
		k := day{stream, d.UnixMicro() / microsPerDay}
		if _, seen := src[k]; !seen {
			order = append(order, k)
		}
		src[k] = append(src[k], f)
	}
	for _, d := range order {
		var served []FeatureRow
		var truth []FeatureTruthRow
		for _, f := range src[d] {
			if strings.HasPrefix(f, FeatureTruthDir+"/") {
				rows, err := readRows[FeatureTruthRow](ctx, l, f, -1)
				if err != nil {
					return res, fmt.Errorf("lake: curate features: %w", err)
				}
				truth = append(truth, rows...)
				continue
			}
			rows, err := readRows[FeatureRow](ctx, l, f, -1)
			if err != nil {
				return res, fmt.Errorf("lake: curate features: %w", err)
			}
			served = append(served, rows...)
		}
		r, err := l.curateFeatureDay(ctx, d.stream, d.day, served, truth, false)
		res.add(r)
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// RebuildFeatureStatus rewrites the feature_status table of stream's
// event date day from the whole features and feature_truth tables of that
// day, replacing what it held: the repair, and the reference the
// incremental curation is tested against.
func (l *Lake) RebuildFeatureStatus(ctx context.Context, stream string, day time.Time) (CurateResult, error) {
	if err := ValidateName(stream); err != nil {
		return CurateResult{}, err
	}
	d := floorDiv(day.UnixMicro(), microsPerDay)
	var served []FeatureRow
	var truth []FeatureTruthRow
	for _, table := range []string{FeaturesDir, FeatureTruthDir} {
		dir := eventDateKey(table, stream, d)
		fs, err := l.lakeFiles(ctx, dir)
		if err != nil {
			return CurateResult{}, fmt.Errorf("lake: curate features: %w", err)
		}
		for _, f := range fs {
			key := storage.JoinKey(dir, f.Name)
			if table == FeaturesDir {
				rs, err := readRows[FeatureRow](ctx, l, key, f.Size)
				if err != nil {
					return CurateResult{}, fmt.Errorf("lake: curate features: %w", err)
				}
				served = append(served, rs...)
				continue
			}
			rs, err := readRows[FeatureTruthRow](ctx, l, key, f.Size)
			if err != nil {
				return CurateResult{}, fmt.Errorf("lake: curate features: %w", err)
			}
			truth = append(truth, rs...)
		}
	}
	return l.curateFeatureDay(ctx, stream, d, served, truth, true)
}

// curateFeatureDay merges served and truth rows of stream's event date
// day (days since the epoch) into the hour files they touch (every hour,
// from nothing, when rebuild).
func (l *Lake) curateFeatureDay(ctx context.Context, stream string, day int64, served []FeatureRow,
	truth []FeatureTruthRow, rebuild bool) (CurateResult, error) {
	var res CurateResult
	dir := eventDateKey(FeatureStatusDir, stream, day)
	unlock, err := l.curateLock(ctx, dir)
	if err != nil {
		return res, err
	}
	defer unlock()
	hourOf := func(et int64) int { return int(floorDiv(et, microsPerHour) - day*24) }
	type hourRows struct {
		served []*FeatureRow
		truth  []*FeatureTruthRow
	}
	touched := map[int]*hourRows{}
	get := func(h int) *hourRows {
		hr := touched[h]
		if hr == nil {
			hr = &hourRows{}
			touched[h] = hr
		}
		return hr
	}
	for i := range served {
		if f := &served[i]; f.Stream == stream && floorDiv(f.EventTime, microsPerDay) == day {
			hr := get(hourOf(f.EventTime))
			hr.served = append(hr.served, f)
		}
	}
	for i := range truth {
		if t := &truth[i]; t.Stream == stream && floorDiv(t.EventTime, microsPerDay) == day {
			hr := get(hourOf(t.EventTime))
			hr.truth = append(hr.truth, t)
		}
	}
	es, err := l.lakeFiles(ctx, dir)
	if err != nil {
		return res, fmt.Errorf("lake: curate features: %w", err)
	}
	sizes := map[string]int64{}
	for _, e := range es {
		sizes[storage.JoinKey(dir, e.Name)] = e.Size
		if h, ok := curatedHourOf(e.Name); ok && rebuild {
			get(h) // hours curated before but without rows now are emptied too
		}
	}
	hours := make([]int, 0, len(touched))
	for h := range touched {
		hours = append(hours, h)
	}
	slices.Sort(hours)
	for _, h := range hours {
		key := storage.JoinKey(dir, featureStatusFile(h))
		byID := map[string]*FeatureStatusRow{}
		var old []FeatureStatusRow
		if size, ok := sizes[key]; ok && !rebuild {
			old, err = readRows[FeatureStatusRow](ctx, l, key, size)
			if err != nil {
				return res, fmt.Errorf("lake: curate features: %w", err)
			}
		}
		rows := make([]*FeatureStatusRow, 0, len(old)+len(touched[h].served))
		for i := range old {
			byID[old[i].EventID] = &old[i]
			rows = append(rows, &old[i])
		}
		row := func(stream, id string) *FeatureStatusRow {
			r := byID[id]
			if r == nil {
				r = &FeatureStatusRow{Stream: stream, EventID: id}
				byID[id] = r
				rows = append(rows, r)
			}
			return r
		}
		for _, f := range touched[h].served {
			row(f.Stream, f.EventID).addServed(f)
		}
		for _, t := range touched[h].truth {
			row(t.Stream, t.EventID).addTruth(t)
		}
		out := make([]FeatureStatusRow, len(rows))
		for i, r := range rows {
			out[i] = *r
		}
		slices.SortFunc(out, func(a, b FeatureStatusRow) int { return compareFeatureStatus(&a, &b) })
		if _, err := putRows(ctx, l, key, out, l.writerOptions(featureStatusSorting...)...); err != nil {
			return res, err
		}
		res.Files = append(res.Files, key)
		res.Features += int64(len(out))
	}
	return res, nil
}

// ReadFeatureStatus returns the feature_status rows of stream whose
// event_time lies in [from, to), in file order.
func (l *Lake) ReadFeatureStatus(ctx context.Context, stream string, from, to time.Time) ([]FeatureStatusRow, error) {
	return readCuratedTable(ctx, l, FeatureStatusDir, "event_date", stream, from, to,
		func(r *FeatureStatusRow) int64 { return r.EventTime })
}

// ReadServedStatus is what a recompute compares its truths with: the
// feature_status rows of stream whose event_time lies in [from, to) and,
// for each hour of eventHours (hour starts in µs, e.g. those of the
// truths' events) that has no feature_status file, the served features of
// the features table merged as the curation merges them (the first
// emitted wins). Curation is a step of its own that may fail or may not
// have run over files archived before it existed: its absence must not
// make served features read as not served. Hours without events cost no
// read.
func (l *Lake) ReadServedStatus(ctx context.Context, stream string, from, to time.Time,
	eventHours []int64) ([]FeatureStatusRow, error) {
	rows, err := l.ReadFeatureStatus(ctx, stream, from, to)
	if err != nil {
		return nil, err
	}
	files, err := l.datedFiles(ctx, FeatureStatusDir, "event_date", stream, from, to)
	if err != nil {
		return nil, err
	}
	curated := map[int64]bool{}
	for _, f := range files {
		if h, ok := curatedHourOf(f.name); ok {
			curated[f.day.UnixMicro()+int64(h)*microsPerHour] = true
		}
	}
	fromUS, toUS := from.UnixMicro(), to.UnixMicro()
	byID := map[string]*FeatureStatusRow{}
	for _, h := range slices.Compact(slices.Sorted(slices.Values(eventHours))) {
		if curated[h] {
			continue
		}
		served, err := l.ReadFeatures(ctx, stream, time.UnixMicro(max(h, fromUS)), time.UnixMicro(min(h+microsPerHour, toUS)))
		if err != nil {
			return nil, err
		}
		for i := range served {
			f := &served[i]
			r := byID[f.EventID]
			if r == nil {
				r = &FeatureStatusRow{Stream: stream, EventID: f.EventID}
				byID[f.EventID] = r
			}
			r.addServed(f)
		}
	}
	for _, r := range byID {
		rows = append(rows, *r)
	}
	return rows, nil
}
