package lake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"reckon/internal/event"
	"reckon/lake/storage"
)

// Curated tables: what analysts read instead of assembling the history
// themselves (docs/adr/0019-curated-tables.md, docs/lake.md).
const (
	// WindowsDir holds one row per (stream, key, window_start): the latest
	// version published for the window (the highest version, then the
	// latest emitted_at) with its status, in
	// windows/stream=<s>/window_date=YYYY-MM-DD/windows-HH.parquet, one
	// file per UTC hour of window_start.
	WindowsDir = "windows"
	// CorrectionsDir holds one row per batch correction ever published,
	// with the figures of the version it replaced, in
	// corrections/stream=<s>/window_date=YYYY-MM-DD/corrections-HH.parquet.
	CorrectionsDir = "corrections"
)

// Window statuses in the windows table.
const (
	// StatusProvisional: the latest version is a stream pane the batch has
	// not checked.
	StatusProvisional = "provisional"
	// StatusFinal: the latest version is a stream pane and the truth table
	// holds a row for the window (a recompute checked it and found
	// nothing to correct).
	StatusFinal = "final"
	// StatusCorrected: the latest version is a batch correction.
	StatusCorrected = "corrected"
)

// WindowRow is one row of the windows table: the summaries columns of the
// window's latest version (the embedded SummaryRow: its columns come
// first, in its order, and its Pane converts the row back), its status and
// when it was published.
type WindowRow struct {
	SummaryRow
	// Status is StatusProvisional, StatusFinal or StatusCorrected.
	Status string `parquet:"status,dict"`
	// UpdatedAt is the latest version's emitted_at.
	UpdatedAt int64 `parquet:"updated_at,timestamp(microsecond:utc)"`
}

// CorrectionRow is one row of the corrections table: a batch correction as
// published and the version it replaced (Prev* NULL when the window had
// no version before: reason "missing").
type CorrectionRow struct {
	Stream      string   `parquet:"stream,dict"`
	Key         string   `parquet:"key,dict"`
	WindowStart int64    `parquet:"window_start,timestamp(microsecond:utc)"`
	WindowEnd   int64    `parquet:"window_end,timestamp(microsecond:utc)"`
	Version     int64    `parquet:"version"`
	Reason      string   `parquet:"reason"`
	EmittedAt   int64    `parquet:"emitted_at,timestamp(microsecond:utc)"`
	Count       int64    `parquet:"count"`
	Sum         float64  `parquet:"sum"`
	Min         float64  `parquet:"min"`
	Max         float64  `parquet:"max"`
	PrevVersion *int64   `parquet:"prev_version,optional"`
	PrevCount   *int64   `parquet:"prev_count,optional"`
	PrevSum     *float64 `parquet:"prev_sum,optional"`
	PrevMin     *float64 `parquet:"prev_min,optional"`
	PrevMax     *float64 `parquet:"prev_max,optional"`
	// PrevComputedBy and PrevEmittedAt say who published the replaced
	// version and when (NULL like the other Prev columns).
	PrevComputedBy *string `parquet:"prev_computed_by,optional"`
	PrevEmittedAt  *int64  `parquet:"prev_emitted_at,optional,timestamp(microsecond:utc)"`
}

// CurateResult says what a curation rewrote.
type CurateResult struct {
	// Files rewritten (windows and corrections), relative to the lake root.
	Files []string `json:"files,omitempty"`
	// Windows and Corrections are the rows the rewritten files hold.
	Windows     int64 `json:"windows"`
	Corrections int64 `json:"corrections"`
	// Features are the rows the rewritten feature_status files hold.
	Features int64 `json:"features,omitempty"`
}

// curateLockAge is how old a curation lock must be before another
// curation takes it over: a curation rewrites a few hour files in well
// under a second, so an older lock is a crashed curator's.
const curateLockAge = 2 * time.Minute

// Curate brings the windows and corrections tables up to date with files
// just written to the summaries or truth table (paths relative to the lake
// root, as WritePanes, WriteTruth and the archive activities report
// them), and the feature_status table with files of the features and
// feature_truth tables (curateFeatures): it reads only those files and rewrites, per (stream, window
// date), the hour files of the windows they touch, merging their rows into
// what the hour files hold. Curating the same files again changes nothing,
// so a retried activity is idempotent. Files of other tables are ignored.
//
// Curations of one (stream, window date) take that day's lock (the
// compaction lock of its windows directory), so concurrent curators never
// lose each other's rows; a curator that finds the lock held waits for it
// while ctx allows.
//
// The merge is exact when every version of a window reaches the summaries
// table in publication order, which holds because a window's versions
// share a record key and so a partition of the summaries topic, archived
// in offset order (docs/adr/0019-curated-tables.md).
func (l *Lake) Curate(ctx context.Context, files []string) (CurateResult, error) {
	var res CurateResult
	type day struct {
		stream string
		date   string
	}
	var order []day
	src := map[day][]string{}
	for _, f := range files {
		table, stream, date, ok := parsePaneFile(f)
		if !ok || (table != SummariesDir && table != TruthDir) {
			continue
		}
		d := day{stream, date}
		if _, seen := src[d]; !seen {
			order = append(order, d)
		}
		src[d] = append(src[d], f)
	}
	for _, d := range order {
		var summaries, truth []SummaryRow
		for _, f := range src[d] {
			rows, err := readSummaryRows(ctx, l, f, -1)
			if err != nil {
				return res, fmt.Errorf("lake: curate: %w", err)
			}
			if strings.HasPrefix(f, TruthDir+"/") {
				truth = append(truth, rows...)
			} else {
				summaries = append(summaries, rows...)
			}
		}
		t, _ := time.Parse(time.DateOnly, d.date)
		r, err := l.curateDay(ctx, d.stream, t, summaries, truth, false)
		res.add(r)
		if err != nil {
			return res, err
		}
	}
	// Served features and their truths: the feature_status table.
	r, err := l.curateFeatures(ctx, files)
	res.add(r)
	return res, err
}

// RebuildCurated rewrites the windows and corrections tables of stream's
// window date day from the whole summaries and truth tables of that day,
// replacing what they held: the repair for a curated day, and the
// reference the incremental Curate is tested against.
func (l *Lake) RebuildCurated(ctx context.Context, stream string, day time.Time) (CurateResult, error) {
	if err := ValidateName(stream); err != nil {
		return CurateResult{}, err
	}
	day = day.UTC().Truncate(24 * time.Hour)
	var rows [2][]SummaryRow
	for i, table := range []string{SummariesDir, TruthDir} {
		dir := paneDateKey(table, stream, day)
		fs, err := l.lakeFiles(ctx, dir)
		if err != nil {
			return CurateResult{}, fmt.Errorf("lake: curate: %w", err)
		}
		for _, f := range fs {
			rs, err := readSummaryRows(ctx, l, storage.JoinKey(dir, f.Name), f.Size)
			if err != nil {
				return CurateResult{}, fmt.Errorf("lake: curate: %w", err)
			}
			rows[i] = append(rows[i], rs...)
		}
	}
	return l.curateDay(ctx, stream, day, rows[0], rows[1], true)
}

func (r *CurateResult) add(o CurateResult) {
	r.Files = append(r.Files, o.Files...)
	r.Windows += o.Windows
	r.Corrections += o.Corrections
	r.Features += o.Features
}

// parsePaneFile splits <table>/stream=<s>/window_date=<d>/<name>.parquet.
func parsePaneFile(key string) (table, stream, date string, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 4 || !strings.HasSuffix(parts[3], ".parquet") || hidden(parts[3]) {
		return "", "", "", false
	}
	stream, ok1 := strings.CutPrefix(parts[1], "stream=")
	_, ok2 := parseDateDir("window_date", parts[2])
	if !ok1 || !ok2 || ValidateName(stream) != nil {
		return "", "", "", false
	}
	return parts[0], stream, strings.TrimPrefix(parts[2], "window_date="), true
}

// curatedHour is the curated state of one hour of one stream's windows.
type curatedHour struct {
	windows     map[curatedKey]*WindowRow
	corrections map[correctionKey]*CorrectionRow
	// wOrder and cOrder list the keys of windows and corrections in file
	// order, then new ones: the files come sorted, so writing them back
	// sorts only what a step added.
	wOrder []curatedKey
	cOrder []correctionKey
	// checked lists windows the truth table holds a row for but the
	// summaries table had no version of yet (a recompute read it from the
	// topic's unarchived tail): they become final when their pane arrives.
	// Kept in the windows file's metadata, so the table holds only windows
	// that have a version.
	checked map[curatedKey]bool
}

type curatedKey struct {
	key   string
	start int64
}

// compare orders windows by key, then window start: the curated files'
// row order.
func (k curatedKey) compare(o curatedKey) int {
	if c := strings.Compare(k.key, o.key); c != 0 {
		return c
	}
	return cmpInt64(k.start, o.start)
}

type correctionKey struct {
	curatedKey
	version int64
}

// checkedMetaKey is the windows files' key-value metadata entry listing
// checked windows without a version yet: a JSON array of [key, start µs].
const checkedMetaKey = "reckon.checked_without_version"

// curateDay merges summaries and truth rows of stream's window date day
// into the curated hour files they touch (every hour of the day's rows
// when rebuild, starting from nothing), under the day's lock.
func (l *Lake) curateDay(ctx context.Context, stream string, day time.Time, summaries, truth []SummaryRow, rebuild bool) (CurateResult, error) {
	var res CurateResult
	wdir := paneDateKey(WindowsDir, stream, day)
	cdir := paneDateKey(CorrectionsDir, stream, day)
	unlock, err := l.curateLock(ctx, wdir)
	if err != nil {
		return res, err
	}
	defer unlock()

	hourOf := func(r *SummaryRow) int {
		return int(floorDiv(r.WindowStart, microsPerHour) - floorDiv(day.UnixMicro(), microsPerHour))
	}
	// Versions in publication order per window, so each correction finds
	// the version it replaced as the window's latest; then the rows of
	// each hour of the day.
	slices.SortFunc(summaries, compareVersions)
	type hourRows struct{ versions, checks []*SummaryRow }
	touched := map[int]*hourRows{}
	for t, rs := range [][]SummaryRow{summaries, truth} {
		for i := range rs {
			r := &rs[i]
			if r.Stream != stream || floorDiv(r.WindowStart, microsPerDay)*microsPerDay != day.UnixMicro() {
				continue
			}
			hr := touched[hourOf(r)]
			if hr == nil {
				hr = &hourRows{}
				touched[hourOf(r)] = hr
			}
			if t == 0 {
				hr.versions = append(hr.versions, r)
			} else {
				hr.checks = append(hr.checks, r)
			}
		}
	}
	// The day's curated files and their sizes, listed once.
	sizes := map[string]int64{}
	for _, dir := range []string{wdir, cdir} {
		es, err := l.lakeFiles(ctx, dir)
		if err != nil {
			return res, fmt.Errorf("lake: curate: %w", err)
		}
		for _, e := range es {
			sizes[storage.JoinKey(dir, e.Name)] = e.Size
			if h, ok := curatedHourOf(e.Name); ok && rebuild && touched[h] == nil {
				// Hours curated before but without rows now are emptied too.
				touched[h] = &hourRows{}
			}
		}
	}
	hours := make([]int, 0, len(touched))
	for h := range touched {
		hours = append(hours, h)
	}
	slices.Sort(hours)

	for _, h := range hours {
		st := &curatedHour{windows: map[curatedKey]*WindowRow{}, corrections: map[correctionKey]*CorrectionRow{}, checked: map[curatedKey]bool{}}
		if !rebuild {
			if err := l.readCuratedHour(ctx, wdir, cdir, h, sizes, st); err != nil {
				return res, err
			}
		}
		for _, r := range touched[h].versions {
			st.addVersion(r)
		}
		for _, r := range touched[h].checks {
			st.addChecked(curatedKey{r.Key, r.WindowStart})
		}
		r, err := l.writeCuratedHour(ctx, wdir, cdir, h, sizes, st)
		res.add(r)
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// curateLock takes the curation lock of a windows day directory, waiting
// (polling) while another curator holds it.
func (l *Lake) curateLock(ctx context.Context, dir string) (func(), error) {
	if ls, ok := l.base().(*storage.Local); ok {
		// A local lock file needs its directory; on S3 it is just a key.
		if err := storage.MkdirAllSync(ls.Path(dir)); err != nil {
			return nil, err
		}
	}
	wait := 20 * time.Millisecond
	for {
		unlock, err := l.store.Lock(ctx, dir, l.opts.Now(), curateLockAge)
		if err == nil {
			return unlock, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("lake: curate %s: %w", dir, ctx.Err())
		}
		if !errors.Is(err, storage.ErrLockHeld) {
			return nil, fmt.Errorf("lake: curate: %w", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("lake: curate %s: %w", dir, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}

// compareVersions orders pane rows by window, then version, then
// emitted_at: the order the latest-version rule ranks them.
func compareVersions(a, b SummaryRow) int {
	if c := strings.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	if c := cmpInt64(a.WindowStart, b.WindowStart); c != 0 {
		return c
	}
	if c := cmpInt64(a.Version, b.Version); c != 0 {
		return c
	}
	return cmpInt64(a.EmittedAt, b.EmittedAt)
}

// addVersion merges one published version of a window.
func (st *curatedHour) addVersion(r *SummaryRow) {
	k := curatedKey{r.Key, r.WindowStart}
	cur := st.windows[k]
	if r.ComputedBy == event.ComputedByBatch {
		ck := correctionKey{k, r.Version}
		if _, done := st.corrections[ck]; !done {
			c := &CorrectionRow{Stream: r.Stream, Key: r.Key, WindowStart: r.WindowStart, WindowEnd: r.WindowEnd,
				Version: r.Version, Reason: r.Reason, EmittedAt: r.EmittedAt, Count: r.Count, Sum: r.Sum, Min: r.Min, Max: r.Max}
			if cur != nil && cur.Version < r.Version {
				p := *cur // cur is replaced below
				c.PrevVersion, c.PrevCount, c.PrevSum, c.PrevMin, c.PrevMax = &p.Version, &p.Count, &p.Sum, &p.Min, &p.Max
				c.PrevComputedBy, c.PrevEmittedAt = &p.ComputedBy, &p.EmittedAt
			}
			st.corrections[ck] = c
			st.cOrder = append(st.cOrder, ck)
		}
	}
	if cur != nil && (cur.Version > r.Version || cur.Version == r.Version && cur.EmittedAt >= r.EmittedAt) {
		return
	}
	checked := st.checked[k] || cur != nil && cur.Status != StatusProvisional
	delete(st.checked, k)
	w := &WindowRow{SummaryRow: *r, UpdatedAt: r.EmittedAt}
	w.Status = windowStatus(w.ComputedBy, checked)
	if cur == nil {
		st.wOrder = append(st.wOrder, k)
	}
	st.windows[k] = w
}

// addChecked records that the truth table holds a row for window k.
func (st *curatedHour) addChecked(k curatedKey) {
	w := st.windows[k]
	if w == nil {
		st.checked[k] = true
		return
	}
	w.Status = windowStatus(w.ComputedBy, true)
}

// windowStatus is a window's status from its latest version's publisher
// and whether the batch checked it. A corrected window is checked: the
// recompute writes the truth row before publishing the correction.
func windowStatus(computedBy string, checked bool) string {
	switch {
	case computedBy == event.ComputedByBatch:
		return StatusCorrected
	case checked:
		return StatusFinal
	}
	return StatusProvisional
}

func windowsFile(hour int) string     { return fmt.Sprintf("windows-%02d.parquet", hour) }
func correctionsFile(hour int) string { return fmt.Sprintf("corrections-%02d.parquet", hour) }

// curatedHourOf parses the hour of a windows, corrections or
// feature_status file name.
func curatedHourOf(name string) (int, bool) {
	for _, p := range []string{"windows-", "corrections-", "features-"} {
		if v, ok := strings.CutPrefix(name, p); ok {
			v, ok = strings.CutSuffix(v, ".parquet")
			h, err := strconv.Atoi(v)
			return h, ok && err == nil && len(v) == 2 && h >= 0 && h < 24
		}
	}
	return 0, false
}

// readCuratedHour loads an hour's windows and corrections files, if any.
func (l *Lake) readCuratedHour(ctx context.Context, wdir, cdir string, hour int, sizes map[string]int64, st *curatedHour) error {
	ws, meta, err := readCurated[WindowRow](ctx, l, storage.JoinKey(wdir, windowsFile(hour)), sizes)
	if err != nil {
		return err
	}
	for i := range ws {
		w := &ws[i]
		k := curatedKey{w.Key, w.WindowStart}
		st.windows[k] = w
		st.wOrder = append(st.wOrder, k)
	}
	if meta != "" {
		var checked [][2]json.RawMessage
		if err := json.Unmarshal([]byte(meta), &checked); err != nil {
			return fmt.Errorf("%w: %s: metadata %s: %v",
				ErrBadFile, storage.JoinKey(wdir, windowsFile(hour)), checkedMetaKey, err)
		}
		for _, c := range checked {
			var k curatedKey
			if err := errors.Join(json.Unmarshal(c[0], &k.key), json.Unmarshal(c[1], &k.start)); err != nil {
				return fmt.Errorf("%w: %s: metadata %s: %v",
					ErrBadFile, storage.JoinKey(wdir, windowsFile(hour)), checkedMetaKey, err)
			}
			st.checked[k] = true
		}
	}
	cs, _, err := readCurated[CorrectionRow](ctx, l, storage.JoinKey(cdir, correctionsFile(hour)), sizes)
	if err != nil {
		return err
	}
	for i := range cs {
		c := &cs[i]
		k := correctionKey{curatedKey{c.Key, c.WindowStart}, c.Version}
		st.corrections[k] = c
		st.cOrder = append(st.cOrder, k)
	}
	return nil
}

// readCurated reads every row of a curated file and its checked-windows
// metadata; a file not in sizes (the day's listing) is empty.
func readCurated[T any](ctx context.Context, l *Lake, key string, sizes map[string]int64) ([]T, string, error) {
	size, ok := sizes[key]
	if !ok {
		return nil, "", nil
	}
	f, pf, err := l.openParquet(ctx, key, size)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	meta, _ := pf.Lookup(checkedMetaKey)
	rows := make([]T, pf.NumRows())
	r := parquet.NewGenericReader[T](pf)
	defer r.Close()
	n, err := r.Read(rows)
	if err != nil && !errors.Is(err, io.EOF) || int64(n) != pf.NumRows() {
		return nil, "", fmt.Errorf("%w: %s: read %d of %d rows: %v", ErrBadFile, key, n, pf.NumRows(), err)
	}
	return rows, meta, nil
}

// writeCuratedHour writes an hour's windows and corrections files, sorted
// by key and window_start (then version), atomically each; an hour without
// corrections gets a corrections file only to replace one it had (sizes:
// the day's listing).
func (l *Lake) writeCuratedHour(ctx context.Context, wdir, cdir string, hour int, sizes map[string]int64, st *curatedHour) (CurateResult, error) {
	var res CurateResult
	ws := make([]WindowRow, 0, len(st.windows))
	for _, k := range st.wOrder {
		ws = append(ws, *st.windows[k])
	}
	cmpWindows := func(a, b WindowRow) int {
		return curatedKey{a.Key, a.WindowStart}.compare(curatedKey{b.Key, b.WindowStart})
	}
	if !slices.IsSortedFunc(ws, cmpWindows) {
		slices.SortFunc(ws, cmpWindows)
	}
	var checked [][2]any
	for _, k := range slices.SortedFunc(maps.Keys(st.checked), curatedKey.compare) {
		checked = append(checked, [2]any{k.key, k.start})
	}
	opts := l.writerOptions(summarySorting[:2]...)
	if len(checked) > 0 {
		b, err := json.Marshal(checked)
		if err != nil {
			return res, err
		}
		opts = append(opts, parquet.KeyValueMetadata(checkedMetaKey, string(b)))
	}
	key := storage.JoinKey(wdir, windowsFile(hour))
	if _, err := putRows(ctx, l, key, ws, opts...); err != nil {
		return res, err
	}
	res.Files, res.Windows = append(res.Files, key), int64(len(ws))
	if _, had := sizes[storage.JoinKey(cdir, correctionsFile(hour))]; len(st.corrections) == 0 && !had {
		return res, nil
	}
	cs := make([]CorrectionRow, 0, len(st.corrections))
	for _, k := range st.cOrder {
		cs = append(cs, *st.corrections[k])
	}
	cmpCorrections := func(a, b CorrectionRow) int {
		if c := (curatedKey{a.Key, a.WindowStart}).compare(curatedKey{b.Key, b.WindowStart}); c != 0 {
			return c
		}
		return cmpInt64(a.Version, b.Version)
	}
	if !slices.IsSortedFunc(cs, cmpCorrections) {
		slices.SortFunc(cs, cmpCorrections)
	}
	key = storage.JoinKey(cdir, correctionsFile(hour))
	if _, err := putRows(ctx, l, key, cs, l.writerOptions(summarySorting...)...); err != nil {
		return res, err
	}
	res.Files, res.Corrections = append(res.Files, key), int64(len(cs))
	return res, nil
}

// ReadWindows returns the windows table of stream for window starts in
// [from, to), in file order (window date, hour, key, window_start).
func (l *Lake) ReadWindows(ctx context.Context, stream string, from, to time.Time) ([]WindowRow, error) {
	return readCuratedTable[WindowRow](ctx, l, WindowsDir, "window_date", stream, from, to, func(r *WindowRow) int64 { return r.WindowStart })
}

// ReadCorrections returns the corrections table of stream for window
// starts in [from, to), in file order.
func (l *Lake) ReadCorrections(ctx context.Context, stream string, from, to time.Time) ([]CorrectionRow, error) {
	return readCuratedTable[CorrectionRow](ctx, l, CorrectionsDir, "window_date", stream, from, to, func(r *CorrectionRow) int64 { return r.WindowStart })
}

// readCuratedTable reads the rows of table's hour files (partitioned by
// dateCol) whose hours overlap [from, to) and whose start lies in it: an
// hourly step reads its hour's files, not the day's.
func readCuratedTable[T any](ctx context.Context, l *Lake, table, dateCol, stream string, from, to time.Time,
	start func(*T) int64) ([]T, error) {
	files, err := l.datedFiles(ctx, table, dateCol, stream, from, to)
	if err != nil {
		return nil, err
	}
	fromUS, toUS := from.UnixMicro(), to.UnixMicro()
	var out []T
	for _, f := range files {
		h, ok := curatedHourOf(f.name)
		if !ok || f.day.UnixMicro()+int64(h+1)*microsPerHour <= fromUS || f.day.UnixMicro()+int64(h)*microsPerHour >= toUS {
			continue
		}
		rows, err := readRows[T](ctx, l, f.key, f.size)
		if err != nil {
			return nil, err
		}
		for i := range rows {
			if s := start(&rows[i]); s >= fromUS && s < toUS {
				out = append(out, rows[i])
			}
		}
	}
	return out, nil
}
