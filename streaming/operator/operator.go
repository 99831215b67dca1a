package operator

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"time"

	"reckon/internal/event"
)

// Forever, as Options.AllowedLateness or Options.DedupTTL, means unbounded:
// windows are never purged, nothing is late, event ids are never forgotten.
// The batch recompute runs the operator this way (see Truth).
const Forever time.Duration = math.MaxInt64

// Errors returned by the operator. A bad record never panics it.
var (
	// ErrOptions wraps every problem Options.Validate finds.
	ErrOptions = errors.New("operator: invalid options")
	// ErrRecord marks a record the operator cannot represent: a time outside
	// the years 1678–2262 (int64 nanoseconds) or a value that is NaN or ±Inf.
	// The gate should have rejected it; the shell dead-letters it.
	ErrRecord = errors.New("operator: invalid record")
)

// Options configures an Operator. The zero value of each field means its
// default, stated in its comment. The Kafka shell and `reckon simulate` map
// config.Stream and config.StreamWorker onto it; the defaults here are the
// operator's own (no config-layer defaults are assumed).
type Options struct {
	// Stream names the stream on emitted panes. Default "".
	Stream string
	// Window is the window size; windows are [start, start+Window)
	// aligned to the Unix epoch, one per key. Default 0: no windows.
	Window time.Duration
	// Hop is the distance between window starts (hopping windows,
	// docs/adr/0041-hopping-windows.md): a window starts at every multiple
	// of Hop, and an event counts in each window covering it, the
	// Window/Hop windows starting in (et − Window, et]. Each window keeps
	// its own panes, versions, lateness and purge, as a tumbling one. Hop
	// must divide Window. Default 0 (or equal to Window): tumbling.
	Hop time.Duration
	// Rolling is the rolling-feature size: for every event accepted for
	// features, count and sum of the key's accepted events in
	// (et − Rolling, et]. Default 0: no features.
	Rolling time.Duration
	// OutOfOrderness is subtracted from the maximum event time seen to get
	// the watermark. Default 0.
	OutOfOrderness time.Duration
	// AllowedLateness keeps fired windows (and rolling buffers) for late
	// events. Default 0. Forever never purges anything.
	AllowedLateness time.Duration
	// IdleTimeout: once this much processing time has passed since the last
	// record, Tick advances the watermark with processing time (see Tick).
	// Default 0: the watermark only moves with records.
	IdleTimeout time.Duration
	// EmitInterval: Tick emits an early pane for every dirty open window at
	// most once per EmitInterval of processing time. Default 0: no early
	// panes from Tick (EmitEarly still works).
	EmitInterval time.Duration
	// DedupTTL is how long (processing time, from first sight) an event id
	// is remembered. Default 24h. Forever never expires.
	DedupTTL time.Duration
	// DedupMaxEntries bounds the dedup set; when full the oldest entry is
	// evicted and counted. Default 1,000,000.
	DedupMaxEntries int
	// CoalesceLatePanes holds the late pane of a fired window until
	// FlushLate (or until its window is purged), so that many late events
	// of one window between two flushes publish one pane: the latest. Every
	// late-accepted event still makes a pane version, so the versions (and
	// the final pane) do not depend on where flushes fall; the published
	// sequence skips the superseded ones, as a compacted topic does. The
	// stream worker flushes once per transaction, whose outputs become
	// visible together anyway (Kafka Streams' record cache does the same
	// per commit). Default false: one late pane published per late-accepted
	// event, the contract of `reckon simulate`.
	CoalesceLatePanes bool
}

func (opts Options) withDefaults() Options {
	if opts.DedupTTL == 0 {
		opts.DedupTTL = 24 * time.Hour
	}
	if opts.DedupMaxEntries == 0 {
		opts.DedupMaxEntries = 1_000_000
	}
	return opts
}

// Validate reports every problem at once, each wrapping ErrOptions.
func (opts Options) Validate() error {
	var errs []error
	neg := func(name string, d time.Duration) {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%w: %s %v is negative", ErrOptions, name, d))
		}
	}
	neg("window", opts.Window)
	neg("hop", opts.Hop)
	switch {
	case opts.Hop <= 0 || opts.Hop == opts.Window:
	case opts.Window <= 0:
		errs = append(errs, fmt.Errorf("%w: hop %v without a window", ErrOptions, opts.Hop))
	case opts.Hop > opts.Window:
		errs = append(errs, fmt.Errorf("%w: hop %v is longer than the window %v", ErrOptions, opts.Hop, opts.Window))
	case opts.Window%opts.Hop != 0:
		errs = append(errs, fmt.Errorf("%w: hop %v does not divide the window %v", ErrOptions, opts.Hop, opts.Window))
	}
	neg("rolling", opts.Rolling)
	neg("out_of_orderness", opts.OutOfOrderness)
	neg("allowed_lateness", opts.AllowedLateness)
	neg("idle_timeout", opts.IdleTimeout)
	neg("emit_interval", opts.EmitInterval)
	neg("dedup_ttl", opts.DedupTTL)
	if opts.DedupMaxEntries < 0 {
		errs = append(errs, fmt.Errorf("%w: dedup_max_entries %d is negative", ErrOptions, opts.DedupMaxEntries))
	}
	return errors.Join(errs...)
}

// Record is one valid event offered to the operator. The operator keeps no
// reference to the caller's memory: strings it retains are copied.
type Record struct {
	// ID is the dedup identity (event_id).
	ID EventID
	// Key is the entity key; windows and rolling features are per key. It
	// may alias the record's bytes (event.Envelope.StringView): Process
	// copies what it keeps, so it is the caller's again when Process
	// returns.
	Key string
	// Value is aggregated (sum, min, max); it must be finite.
	Value float64
	// EventTime is occurred_at.
	EventTime time.Time
	// Arrival is processing time: when the shell received the record (the
	// Kafka record timestamp, or arrived_at in simulate). It drives dedup
	// expiry, idleness, a feature's arrived_at and a pane's processed_at;
	// the operator's processing clock is
	// the maximum of all arrivals and Tick instants, so it never goes back.
	// It also bounds the watermark: a record advances it by
	// min(EventTime, Arrival) − OutOfOrderness, so a future-dated event is
	// accepted and counted but cannot close windows before their time.
	Arrival time.Time
	// Ref is opaque to the operator and echoed on the record's Feature and
	// LateRecord outputs, e.g. the Kafka offset, so the shell can find the
	// original bytes.
	Ref int64
}

// Verdict says what the operator did with a record; it is a set of flags.
type Verdict uint8

// Verdict flags. Accepted is set when the record counted anywhere; then
// InFeatures and/or InWindow say where. Duplicate and Late are exclusive with
// everything else.
const (
	Accepted   Verdict = 1 << iota // applied to features and/or a window
	InFeatures                     // counted in rolling features; a Feature was emitted
	InWindow                       // folded into a window (a late pane may have been emitted)
	Duplicate                      // event id seen within the TTL: counted, not applied
	Late                           // accepted nowhere: a Late output was emitted
)

// Has reports whether every flag of f is set in v.
func (v Verdict) Has(f Verdict) bool { return v&f == f }

// Feature is a rolling feature value for one accepted event
// (docs/requirements.md R-ROLL-1).
// Event converts it to the shared record type for publishing.
type Feature struct {
	Ref       int64
	ID        EventID
	Key       string // owned by the operator; safe to keep
	EventTime time.Time
	Count     int64
	Sum       float64
	// Watermark is the watermark before this event; zero and
	// HasWatermark false before the first event.
	Watermark    time.Time
	HasWatermark bool
	// ArrivedAt is the record's Arrival. When the feature was produced is
	// the shell's to say (event.Feature.EmittedAt).
	ArrivedAt time.Time
}

// Event renders f as the features-topic record of stream with the given
// rolling size, produced at emitted. It allocates the event id text.
func (f Feature) Event(stream string, size time.Duration, emitted time.Time) event.Feature {
	return event.Feature{
		Stream: stream, Key: f.Key, EventID: f.ID.String(), EventTime: f.EventTime,
		Size: size, Count: f.Count, Sum: f.Sum, Watermark: f.Watermark, EmittedAt: emitted, ArrivedAt: f.ArrivedAt,
	}
}

// LateRecord is a record accepted nowhere because it arrived after the watermark
// had passed everything it could still count towards. It goes to the late
// side output; the batch side counts it.
type LateRecord struct {
	Ref       int64
	ID        EventID
	Key       string
	EventTime time.Time
	Value     float64
	Watermark time.Time // the watermark it was judged against
	EmittedAt time.Time
}

// Out collects outputs. The caller owns it, drains it (publishes) and calls
// Reset; the operator only appends. Within each slice the order is the
// emission order: panes of one window appear in version order.
type Out struct {
	Panes    []event.Pane
	Features []Feature
	Late     []LateRecord
}

// Reset empties o, keeping its capacity.
func (o *Out) Reset() {
	o.Panes = o.Panes[:0]
	o.Features = o.Features[:0]
	o.Late = o.Late[:0]
}

// Len is the number of outputs in o.
func (o *Out) Len() int { return len(o.Panes) + len(o.Features) + len(o.Late) }

// Operator is the per-partition state machine. Create it with New; it is not
// safe for concurrent use (one owner, see the package doc).
type Operator struct {
	opts Options
	// Durations in nanoseconds; lateness and ttl may be math.MaxInt64.
	size, roll, ooo, lateness, idle, emit int64
	// hop is the distance between window starts: size for tumbling
	// windows; hopping iff 0 < hop < size.
	hop     int64
	hopping bool

	// Event-time clock. hasWM is false until the first record or the idle
	// rule's first advance; after it, wm = max(wm, maxET − ooo) after every
	// record and the idle rule in Tick. maxET (valid iff hasMaxET) is the
	// maximum over records of min(event time, arrival): an event dated
	// ahead of its record timestamp moves the watermark only as far as the
	// record timestamp (docs/adr/0015-stream-progress.md), so the
	// watermark never runs ahead of the clock that stamped the records.
	hasWM    bool
	wm       int64
	hasMaxET bool
	maxET    int64
	// Processing-time clock: the maximum arrival / Tick instant seen.
	hasProc bool
	proc    int64
	// lastRecord is the processing clock after the last record and
	// wmAtRecord the watermark right after it: the idle rule's anchor,
	// valid iff hasAnchor. Before the first record StartIdle may set it
	// as if a record had arrived then, dated then
	// (docs/adr/0033-progress-every-partition-and-broker-outages.md).
	hasAnchor  bool
	lastRecord int64
	wmAtRecord int64
	// nextEmit is when Tick next emits early panes; valid iff hasNextEmit.
	hasNextEmit bool
	nextEmit    int64

	buckets  []*bucket  // held windows grouped by start, ascending
	lateDue  []lateRef  // fired windows with a held late pane (CoalesceLatePanes), first change first
	spare    []*bucket  // purged buckets for reuse
	order    []keyIndex // scratch for sorting windows by key
	orderTmp []keyIndex // sortKeys' scratch

	keys    map[string]*rollKey // rolling buffers
	sweepAt int64               // next rolling horizon at which all keys are pruned
	dirty   []*rollKey          // keys changed since the last PublishTo (lookup.go)
	// refreshed holds the ids of too-late events folded back (Refresh),
	// with their event time, until the horizon passes them.
	refreshed     map[EventID]int64
	refreshPruned int64 // the horizon refreshed was last pruned at: a burst under one horizon prunes once

	dd      dedup
	keySeed maphash.Seed // for keyHash
	n       counters
}

// keyHash hashes a key for the window index, with a per-operator random
// seed: keys are producer-chosen.
func (o *Operator) keyHash(key string) uint32 { return uint32(maphash.String(o.keySeed, key)) }

// counters are the monotonic counts kept in snapshots.
type counters struct {
	records, accepted, duplicates, late, featureLate uint64
	features, earlyPanes, onTimePanes, latePanes     uint64
}

// New returns an operator with empty state.
func New(opts Options) (*Operator, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	o := &Operator{
		opts:     opts,
		size:     int64(opts.Window),
		roll:     int64(opts.Rolling),
		ooo:      int64(opts.OutOfOrderness),
		lateness: int64(opts.AllowedLateness),
		idle:     int64(opts.IdleTimeout),
		emit:     int64(opts.EmitInterval),
		keys:     map[string]*rollKey{},
		sweepAt:  math.MinInt64,
		keySeed:  maphash.MakeSeed(),
	}
	o.hop = o.size
	if opts.Hop > 0 && opts.Hop < opts.Window {
		o.hop, o.hopping = int64(opts.Hop), true
	}
	o.dd.init(int64(opts.DedupTTL), opts.DedupMaxEntries)
	return o, nil
}

// Options returns the options in effect, defaults filled in.
func (o *Operator) Options() Options { return o.opts }

var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

func inRange(t time.Time) bool { return !t.Before(minTime) && !t.After(maxTime) }

func ts(n int64) time.Time { return time.Unix(0, n).UTC() }

// Process applies one record: dedup, then the lateness decision against the
// watermark as it stood before the record, then features, window update and
// late output, then the watermark advance the record causes (on-time panes,
// purges). Outputs are appended to out in that order. An error (ErrRecord)
// leaves the state untouched.
//
// The combined late rule, with wm the watermark before the record, L the
// allowed lateness and [start, end) the record's window:
//   - features: accepted iff there is no watermark yet or et ≥ wm − L;
//   - windows:  accepted iff there is no watermark yet or end + L > wm
//     (the window is not purged); if end ≤ wm the window has fired (or
//     had no events when the watermark passed it) and a late pane is
//     emitted at once;
//   - the record goes to the late side output iff it was accepted by
//     neither of the enabled parts.
//
// With hopping windows (Options.Hop) the window rule applies to each
// window covering the record; it counts in those not purged and is late
// only if it counts nowhere (applyHopping).
//
// Because end > et, a record accepted for features is always accepted for
// its window; the converse does not hold: with lateness 0 a record with
// et < wm < end updates its (not yet fired) window but gets no feature.
func (o *Operator) Process(r Record, out *Out) (Verdict, error) {
	if !inRange(r.EventTime) || !inRange(r.Arrival) {
		return 0, fmt.Errorf("%w: time outside 1678–2262", ErrRecord)
	}
	if math.IsNaN(r.Value) || math.IsInf(r.Value, 0) {
		return 0, fmt.Errorf("%w: value %v is not finite", ErrRecord, r.Value)
	}
	et := r.EventTime.UnixNano()
	// With a large dedup set the id's index slot is a cache miss: start
	// loading it, look the window up meanwhile (read only), then dedup.
	h := o.dd.hash(r.ID)
	o.dd.prefetch(h)
	o.observe(r.Arrival.UnixNano())
	o.n.records++
	var start, end int64
	ref := windowRef{i: -1}
	if o.size > 0 && !o.hopping {
		start = floorTo(et, o.size)
		end = addSat(start, o.size)
		ref = o.peekWindow(r.Key, o.keyHash(r.Key), start)
	}
	if !o.dd.addHashed(&r.ID, h, o.proc) {
		o.n.duplicates++
		return Duplicate, nil
	}
	var v Verdict
	if o.hopping {
		v = o.applyHopping(&r, et, out)
	} else {
		v = o.apply(&r, et, start, end, ref, out)
	}
	if p := min(et, r.Arrival.UnixNano()); !o.hasMaxET || p > o.maxET {
		o.maxET, o.hasMaxET = p, true
	}
	o.lastRecord, o.hasAnchor = o.proc, true
	o.advance(subSat(o.maxET, o.ooo), out)
	o.wmAtRecord = o.wm
	return v, nil
}

// apply runs the lateness decision, features and the window update for a
// new record; [start, end) is its window and ref that window looked up
// (when Window > 0).
func (o *Operator) apply(r *Record, et, start, end int64, ref windowRef, out *Out) Verdict {
	featureIn := o.roll > 0 && (!o.hasWM || et >= subSat(o.wm, o.lateness))
	windowIn := o.size > 0 && (!o.hasWM || addSat(end, o.lateness) > o.wm)
	v := o.admit(r, et, featureIn, windowIn, out)
	if v == Late {
		return v
	}
	if windowIn {
		o.fold(r.Key, start, end, r.Value, ref, out)
		v |= InWindow
	}
	return v
}

// admit is the lateness decision and the features of a new record, for
// apply and applyHopping: Late (and a late record out) when it counts in
// neither the features nor a window of a stream that has either;
// otherwise Accepted, with InFeatures when the features took it.
func (o *Operator) admit(r *Record, et int64, featureIn, windowIn bool, out *Out) Verdict {
	if !featureIn && !windowIn && (o.roll > 0 || o.size > 0) {
		o.n.late++
		out.Late = append(out.Late, LateRecord{
			Ref: r.Ref, ID: r.ID, Key: strings.Clone(r.Key), EventTime: ts(et), Value: r.Value,
			Watermark: ts(o.wm), EmittedAt: ts(o.proc),
		})
		return Late
	}
	o.n.accepted++
	v := Accepted
	if featureIn {
		o.feature(r, et, out)
		v |= InFeatures
	} else if o.roll > 0 {
		o.n.featureLate++
	}
	return v
}

// observe moves the processing clock forward to t (never back) and expires
// dedup entries.
func (o *Operator) observe(t int64) {
	if !o.hasProc || t > o.proc {
		o.proc, o.hasProc = t, true
	}
	o.dd.expire(o.proc)
}

// advance raises the watermark to wm if that is higher (or the first), then
// fires windows whose end it passed, purges windows past their lateness and
// prunes rolling buffers.
func (o *Operator) advance(wm int64, out *Out) {
	if o.hasWM && wm <= o.wm {
		return
	}
	o.hasWM, o.wm = true, wm
	// Invariant: after every advance the buckets with end ≤ wm are exactly
	// the fired ones, a prefix (a bucket created behind the watermark is
	// born fired). Start at the first unfired one so a long lateness does
	// not make every advance walk the held history.
	for _, b := range o.buckets[o.firstUnfired():] {
		if b.end > o.wm {
			break
		}
		o.fire(b, event.TimingOnTime, out)
		b.fired = true
	}
	purge := 0
	for _, b := range o.buckets {
		if addSat(b.end, o.lateness) > o.wm {
			break
		}
		purge++
	}
	if purge > 0 {
		o.FlushLate(out) // a held late pane leaves before its window does
		for _, b := range o.buckets[:purge] {
			o.recycle(b)
		}
		n := copy(o.buckets, o.buckets[purge:])
		clear(o.buckets[n:])
		o.buckets = o.buckets[:n]
	}
	if h, ok := o.horizon(); ok && h >= o.sweepAt {
		for k, rk := range o.keys {
			if rk.prune(h) == 0 {
				delete(o.keys, k)
			}
		}
		o.sweepAt = addSat(h, o.roll)
	}
}

// horizon is the event time at or before which no rolling point can be
// counted again: every future feature-accepted event has et ≥ wm − L and
// counts only points after et − Rolling.
func (o *Operator) horizon() (int64, bool) {
	if o.roll == 0 || !o.hasWM || o.lateness == int64(Forever) {
		return 0, false
	}
	return subSat(subSat(o.wm, o.lateness), o.roll), true
}

// Tick does processing-time work at now (monotonic: an earlier now is
// treated as the current processing clock):
//
//   - Idle advance: if IdleTimeout > 0 and at least IdleTimeout has
//     passed since the last record (by the processing clock), the
//     watermark becomes
//     max(wm, wm_last + (now − last_arrival − IdleTimeout)),
//     where wm_last is the watermark right after the last record and
//     last_arrival the processing clock then: after the timeout the
//     watermark moves at the speed of processing time from where it stood,
//     never backwards, and a record resumes the normal rule
//     (wm = max(wm, max_et − out_of_orderness)). The rule is relative, so
//     a replay of old data is not made late by the wall clock. Before the
//     first record there is no watermark, unless StartIdle stood in for
//     that record.
//   - Early panes: with EmitInterval > 0, the first Tick arms a timer; each
//     Tick at or after it emits an early pane for every dirty open window
//     (EmitEarly) and re-arms it EmitInterval later.
//
// The shell calls Tick from its run loop's timer, e.g. every 100ms.
func (o *Operator) Tick(now time.Time, out *Out) {
	if !inRange(now) {
		return
	}
	o.observe(now.UnixNano())
	if o.idle > 0 && o.hasAnchor && o.proc-o.lastRecord >= o.idle {
		o.advance(addSat(o.wmAtRecord, o.proc-o.lastRecord-o.idle), out)
	}
	if o.emit > 0 {
		if !o.hasNextEmit {
			o.hasNextEmit, o.nextEmit = true, addSat(o.proc, o.emit)
		} else if o.proc >= o.nextEmit {
			o.EmitEarly(out)
			o.nextEmit = addSat(o.proc, o.emit)
		}
	}
}

// StartIdle starts the idle rule of an operator that has seen no record,
// at processing time now: as if a record had arrived then, dated then, so
// that once IdleTimeout has passed Tick advances the watermark with
// processing time — now − OutOfOrderness + (tick − now − IdleTimeout).
// The shell calls it before Tick for a partition that holds no record at
// all (only transaction markers): like an empty partition it holds no
// window, and its windows become final; a record that comes later is
// judged against that watermark. A partition with records of other event
// types only does not call it and keeps no watermark
// (docs/adr/0015-stream-progress.md). A no-op after a record or a first
// StartIdle (docs/adr/0033-progress-every-partition-and-broker-outages.md).
func (o *Operator) StartIdle(now time.Time) {
	if o.hasAnchor || !inRange(now) {
		return
	}
	o.observe(now.UnixNano())
	o.hasAnchor, o.lastRecord, o.wmAtRecord = true, o.proc, subSat(o.proc, o.ooo)
}

// Watermark returns the partition watermark; false before the first record
// or idle advance.
func (o *Operator) Watermark() (time.Time, bool) {
	if !o.hasWM {
		return time.Time{}, false
	}
	return ts(o.wm), true
}

// Progress is the operator's position in event and processing time, as
// the stream publishes it (event.StreamProgress). Zero times are unknown.
type Progress struct {
	Watermark      time.Time // zero before the first record or idle advance
	MaxEventTime   time.Time // max over records of min(event time, arrival); zero before a record
	ProcessingTime time.Time
	// PurgedThrough is Watermark − AllowedLateness: every window ending at
	// or before it has been purged (zero without a watermark, or with
	// unbounded lateness).
	PurgedThrough time.Time
}

// Progress returns the operator's progress.
func (o *Operator) Progress() Progress {
	var p Progress
	if o.hasProc {
		p.ProcessingTime = ts(o.proc)
	}
	if !o.hasWM {
		return p
	}
	p.Watermark = ts(o.wm)
	if o.hasMaxET {
		p.MaxEventTime = ts(o.maxET)
	}
	if o.lateness != int64(Forever) {
		p.PurgedThrough = ts(subSat(o.wm, o.lateness))
	}
	return p
}

// WatermarkLag is the processing clock minus the watermark: how far event
// time trails processing time. Zero before the first record.
func (o *Operator) WatermarkLag() time.Duration {
	if !o.hasWM || !o.hasProc {
		return 0
	}
	return time.Duration(subSat(o.proc, o.wm))
}

// Stats are counters (monotonic, kept in snapshots) and gauges (current
// state size) of one operator.
type Stats struct {
	Records     uint64 // valid records offered, duplicates included
	Accepted    uint64 // applied to features and/or a window
	Duplicates  uint64 // dropped by dedup
	Late        uint64 // sent to the late side output
	FeatureLate uint64 // accepted for a window but too late for features
	Features    uint64 // features emitted
	EarlyPanes  uint64
	OnTimePanes uint64
	LatePanes   uint64
	// DedupEvicted counts entries dropped because the set was full before
	// their TTL: a redelivery of one of them would be applied twice.
	DedupEvicted uint64
	DedupExpired uint64 // entries dropped at the end of their TTL

	DedupEntries  int // gauge: event ids remembered
	Windows       int // gauge: (key, window) states held
	RollingKeys   int // gauge: keys with rolling buffers
	RollingPoints int // gauge: events held in rolling buffers
}

// Stats returns the current counters and gauges.
func (o *Operator) Stats() Stats {
	s := Stats{
		Records: o.n.records, Accepted: o.n.accepted, Duplicates: o.n.duplicates,
		Late: o.n.late, FeatureLate: o.n.featureLate, Features: o.n.features,
		EarlyPanes: o.n.earlyPanes, OnTimePanes: o.n.onTimePanes, LatePanes: o.n.latePanes,
		DedupEvicted: o.dd.evicted, DedupExpired: o.dd.expired, DedupEntries: o.dd.n,
		RollingKeys: len(o.keys),
	}
	for _, b := range o.buckets {
		s.Windows += len(b.wins)
	}
	for _, k := range o.keys {
		s.RollingPoints += len(k.pts) - k.head
	}
	return s
}

// WindowAgg is the aggregate of one (key, window).
type WindowAgg struct {
	Key        string
	Start, End time.Time
	Agg        event.Agg
	Version    int64 // panes emitted so far; 0 if none
}

// Windows returns every held window, sorted by key then start.
func (o *Operator) Windows() []WindowAgg {
	var ws []WindowAgg
	for _, b := range o.buckets {
		for _, w := range b.wins {
			ws = append(ws, WindowAgg{Key: w.key, Start: ts(b.start), End: ts(b.end), Agg: w.agg, Version: w.version})
		}
	}
	slices.SortFunc(ws, func(a, b WindowAgg) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return a.Start.Compare(b.Start)
	})
	return ws
}

// floorTo rounds t down to a multiple of size (epoch aligned, also for
// negative t).
func floorTo(t, size int64) int64 {
	m := t % size
	if m < 0 {
		m += size
	}
	return t - m
}

func addSat(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	if b < 0 && a < math.MinInt64-b {
		return math.MinInt64
	}
	return a + b
}

func subSat(a, b int64) int64 {
	if b == math.MinInt64 {
		return addSat(addSat(a, math.MaxInt64), 1)
	}
	return addSat(a, -b)
}
