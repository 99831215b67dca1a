package workers

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"reckon/internal/event"
	"reckon/streaming/operator"
)

// runSimulate is `reckon simulate`: the stream operator over a JSONL file,
// offline and deterministic, as one partition in file order
// (docs/requirements.md R-SIM-1).
// Processing time is each line's arrived_at; no processing-time panes are
// emitted except one early pane per changed window at end of input.
func runSimulate(ctx context.Context, cx *cmdContext) error {
	var (
		input, keyPath, valuePath string
		sim                       simulateOptions
	)
	fs := cx.fs
	fs.StringVar(&input, "input", "", "JSONL envelopes, each with a top-level arrived_at (RFC 3339); - for stdin (required)")
	fs.StringVar(&keyPath, "key", "", "dotted path of the entity key, a JSON string, e.g. data.user (required)")
	fs.StringVar(&valuePath, "value", "", "dotted path of the aggregated value, a finite JSON number, e.g. data.amount (required)")
	fs.DurationVar(&sim.opts.Window, "window", 0, "window size, e.g. 5m; 0 = no windows")
	fs.DurationVar(&sim.opts.Hop, "hop", 0,
		"hopping windows: a window starts every hop, which divides the window, e.g. 1m; 0 = tumbling")
	fs.DurationVar(&sim.opts.Rolling, "rolling", 0, "rolling feature size, e.g. 60s; 0 = no features")
	fs.DurationVar(&sim.opts.OutOfOrderness, "out-of-orderness", 0, "watermark = max event time seen − this")
	fs.DurationVar(&sim.opts.AllowedLateness, "allowed-lateness", 0, "how long fired windows stay open for late panes")
	fs.BoolVar(&sim.compare, "compare", false, "after the input, compare the stream's answers with a full recompute")
	fs.Usage = func() {
		fmt.Fprintln(cx.stderr, "usage: reckon simulate --input FILE --key PATH --value PATH [--window D [--hop D]] [--rolling D] [--out-of-orderness D] [--allowed-lateness D] [--compare]")
		fs.PrintDefaults()
	}
	if err := cx.parse(); err != nil {
		return err
	}
	var missing []string
	for _, f := range []struct{ name, v string }{{"--input", input}, {"--key", keyPath}, {"--value", valuePath}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s required", errUsage, strings.Join(missing, ", "))
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if err := sim.opts.Validate(); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	sim.keyPath, sim.valuePath = keyPath, valuePath

	var in io.Reader = cx.stdin
	if input != "-" {
		f, err := os.Open(input)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	w := bufio.NewWriter(cx.stdout)
	err := sim.run(ctx, in, w, cx.stderr)
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	return err
}

type simulateOptions struct {
	opts               operator.Options
	keyPath, valuePath string
	compare            bool
}

// simulation is the state of one run beyond the operator: counts and, with
// --compare, what the recompute needs.
type simulation struct {
	simulateOptions
	out *bufio.Writer
	op  *operator.Operator
	buf operator.Out

	events, accepted, late, duplicates, invalid int

	valid     []operator.Record            // every valid record in file order, duplicates included (Truth dedups)
	unique    map[string][]operator.Record // per key: valid unique records, late ones included
	featured  map[string][]operator.Record // per key: records accepted for features
	lastPane  map[windowID]event.Pane      // the stream's latest pane per window
	windowIDs map[windowID]struct{}        // windows holding any valid unique record
	lastAt    map[string]time.Time         // per key: latest feature-accepted event time
}

type windowID struct {
	key   string
	start int64
}

func (s *simulateOptions) run(ctx context.Context, in io.Reader, out *bufio.Writer, diag io.Writer) error {
	opts := s.opts
	// One partition replayed from a file: every repeated event_id is a
	// duplicate, however far apart.
	opts.DedupTTL, opts.DedupMaxEntries = operator.Forever, math.MaxInt
	op, err := operator.New(opts)
	if err != nil {
		return err
	}
	gate, err := event.NewGate(event.GateOptions{AllowUnknownTypes: true})
	if err != nil {
		return err
	}
	sim := &simulation{
		simulateOptions: *s, out: out, op: op,
		unique: map[string][]operator.Record{}, featured: map[string][]operator.Record{},
		lastPane: map[windowID]event.Pane{}, windowIDs: map[windowID]struct{}{}, lastAt: map[string]time.Time{},
	}
	r := bufio.NewReader(in)
	for lineNo := 1; ; lineNo++ {
		line, rerr := r.ReadBytes('\n')
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return rerr
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			if lineNo%4096 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			sim.events++
			rec, reason := s.decode(gate, line)
			if reason != "" {
				sim.invalid++
				fmt.Fprintf(diag, "reckon simulate: line %d: invalid: %s\n", lineNo, reason)
			} else if err := sim.process(rec); err != nil {
				sim.invalid++
				fmt.Fprintf(diag, "reckon simulate: line %d: invalid: %v\n", lineNo, err)
			}
		}
		if rerr != nil {
			break
		}
	}
	sim.buf.Reset()
	op.EmitEarly(&sim.buf)
	if err := sim.emit(); err != nil {
		return err
	}
	if s.compare {
		if err := sim.compareAll(); err != nil {
			return err
		}
	}
	return sim.line(totalsLine{"totals", sim.events, sim.accepted, sim.late, sim.duplicates, sim.invalid})
}

// decode applies simulate's validity rules: the gate's structural checks
// (JSON object, event_id a lowercase canonical UUID, occurred_at RFC 3339,
// no NaN/Inf), then the key (a JSON string), the value (a finite JSON
// number; strings and booleans are invalid) and arrived_at (RFC 3339).
func (s *simulateOptions) decode(gate *event.Gate, line []byte) (operator.Record, string) {
	env, res := gate.Parse(line)
	if !res.Valid {
		return operator.Record{}, strings.Join(res.Reasons, "; ")
	}
	var reasons []string
	key, ok := env.String(s.keyPath)
	if !ok {
		if env.Exists(s.keyPath) {
			reasons = append(reasons, s.keyPath+": key is not a JSON string")
		} else {
			reasons = append(reasons, s.keyPath+": key missing")
		}
	}
	v, ok := env.Number(s.valuePath)
	if !ok {
		reasons = append(reasons, s.valuePath+": not a finite JSON number")
	}
	var arrival time.Time
	if a, ok := env.String("arrived_at"); !ok {
		reasons = append(reasons, "arrived_at: missing or not a string")
	} else if arrival, ok = parseTime(a); !ok {
		reasons = append(reasons, fmt.Sprintf("arrived_at: %q is not RFC 3339", a))
	}
	id, ok := operator.ParseEventID(env.EventID)
	if !ok { // the gate guarantees the form; keep the operator's own check honest
		reasons = append(reasons, "event_id: not a lowercase canonical UUID")
	}
	if len(reasons) > 0 {
		return operator.Record{}, strings.Join(reasons, "; ")
	}
	return operator.Record{ID: id, Key: key, Value: v, EventTime: env.OccurredAt, Arrival: arrival}, ""
}

func parseTime(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, s)
	return t.UTC(), err == nil
}

func (sim *simulation) process(rec operator.Record) error {
	sim.buf.Reset()
	v, err := sim.op.Process(rec, &sim.buf)
	if err != nil {
		return err
	}
	switch {
	case v.Has(operator.Duplicate):
		sim.duplicates++
	case v.Has(operator.Late):
		sim.late++
	default:
		sim.accepted++
	}
	if sim.compare && !v.Has(operator.Duplicate) {
		sim.valid = append(sim.valid, rec)
		sim.unique[rec.Key] = append(sim.unique[rec.Key], rec)
		if sim.opts.Window > 0 {
			// Every window covering the event: one when tumbling,
			// window/hop when hopping.
			step := sim.opts.Window
			if sim.opts.Hop > 0 {
				step = sim.opts.Hop
			}
			et := rec.EventTime.UnixNano()
			w := int64(sim.opts.Window)
			for s := floorTime(rec.EventTime, step); s > et-w || et-w > et; s -= int64(step) {
				sim.windowIDs[windowID{rec.Key, s}] = struct{}{}
				if s < math.MinInt64+int64(step) {
					break // the next start is before int64's range
				}
			}
		}
		if v.Has(operator.InFeatures) {
			sim.featured[rec.Key] = append(sim.featured[rec.Key], rec)
			if at, ok := sim.lastAt[rec.Key]; !ok || rec.EventTime.After(at) {
				sim.lastAt[rec.Key] = rec.EventTime
			}
		}
	}
	return sim.emit()
}

// floorTime is the Unix-nanosecond start of t's epoch-aligned window.
func floorTime(t time.Time, size time.Duration) int64 {
	n := t.UnixNano()
	m := n % int64(size)
	if m < 0 {
		m += int64(size)
	}
	return n - m
}

// emit prints the buffered outputs of one step: features, late records,
// then panes.
func (sim *simulation) emit() error {
	for _, f := range sim.buf.Features {
		l := featureLine{Type: "feature", Key: f.Key, EventID: f.ID.String(), EventTime: rfc3339(f.EventTime), Count: f.Count, Sum: f.Sum}
		if f.HasWatermark {
			wm := rfc3339(f.Watermark)
			l.Watermark = &wm
		}
		if err := sim.line(l); err != nil {
			return err
		}
	}
	for _, l := range sim.buf.Late {
		if err := sim.line(lateLine{"late", l.Key, l.ID.String(), rfc3339(l.EventTime), rfc3339(l.Watermark)}); err != nil {
			return err
		}
	}
	for _, p := range sim.buf.Panes {
		if sim.compare {
			sim.lastPane[windowID{p.Key, p.WindowStart.UnixNano()}] = p
		}
		err := sim.line(paneLine{"pane", p.Key, rfc3339(p.WindowStart), rfc3339(p.WindowEnd),
			p.Count, p.Sum, p.Min, p.Max, p.Version, string(p.Timing)})
		if err != nil {
			return err
		}
	}
	return nil
}

// compareAll prints the stream-vs-recompute rows: windows (key, start
// order), then rolling features (key order).
func (sim *simulation) compareAll() error {
	if sim.opts.Window > 0 {
		truth, err := operator.HoppingTruth(sim.opts.Window, sim.opts.Hop, slices.Values(sim.valid))
		if err != nil {
			return err
		}
		batch := make(map[windowID]event.Agg, len(truth))
		for _, w := range truth {
			batch[windowID{w.Key, w.Start.UnixNano()}] = w.Agg
		}
		ids := make([]windowID, 0, len(sim.windowIDs))
		for id := range sim.windowIDs {
			ids = append(ids, id)
		}
		slices.SortFunc(ids, func(a, b windowID) int {
			if c := strings.Compare(a.key, b.key); c != 0 {
				return c
			}
			return cmp.Compare(a.start, b.start)
		})
		for _, id := range ids {
			var st aggJSON
			if p, ok := sim.lastPane[id]; ok {
				st = aggJSON{p.Count, p.Sum}
			}
			b := batch[id]
			bt := aggJSON{b.Count, b.Sum}
			start := time.Unix(0, id.start).UTC()
			err := sim.line(compareWindowLine{"compare", id.key, rfc3339(start), rfc3339(start.Add(sim.opts.Window)), st, bt, st.matches(bt)})
			if err != nil {
				return err
			}
		}
	}
	if sim.opts.Rolling > 0 {
		for _, key := range sortedKeys(sim.lastAt) {
			at := sim.lastAt[key]
			s := operator.RollingTruth(sim.opts.Rolling, at, sim.featured[key])
			b := operator.RollingTruth(sim.opts.Rolling, at, sim.unique[key])
			st, bt := aggJSON{s.Count, s.Sum}, aggJSON{b.Count, b.Sum}
			if err := sim.line(compareRollingLine{"compare", key, rfc3339(at), st, bt, st.matches(bt)}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (sim *simulation) line(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = sim.out.Write(b)
	return err
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Output lines; field order is a contract (docs/requirements.md R-SIM-2).
type (
	featureLine struct {
		Type      string  `json:"type"`
		Key       string  `json:"key"`
		EventID   string  `json:"event_id"`
		EventTime string  `json:"event_time"`
		Watermark *string `json:"watermark"`
		Count     int64   `json:"count"`
		Sum       float64 `json:"sum"`
	}
	lateLine struct {
		Type      string `json:"type"`
		Key       string `json:"key"`
		EventID   string `json:"event_id"`
		EventTime string `json:"event_time"`
		Watermark string `json:"watermark"`
	}
	paneLine struct {
		Type        string  `json:"type"`
		Key         string  `json:"key"`
		WindowStart string  `json:"window_start"`
		WindowEnd   string  `json:"window_end"`
		Count       int64   `json:"count"`
		Sum         float64 `json:"sum"`
		Min         float64 `json:"min"`
		Max         float64 `json:"max"`
		Version     int64   `json:"version"`
		Timing      string  `json:"timing"`
	}
	aggJSON struct {
		Count int64   `json:"count"`
		Sum   float64 `json:"sum"`
	}
	compareWindowLine struct {
		Type        string  `json:"type"`
		Key         string  `json:"key"`
		WindowStart string  `json:"window_start"`
		WindowEnd   string  `json:"window_end"`
		Stream      aggJSON `json:"stream"`
		Batch       aggJSON `json:"batch"`
		Match       bool    `json:"match"`
	}
	compareRollingLine struct {
		Type   string  `json:"type"`
		Key    string  `json:"key"`
		At     string  `json:"at"`
		Stream aggJSON `json:"stream"`
		Batch  aggJSON `json:"batch"`
		Match  bool    `json:"match"`
	}
	totalsLine struct {
		Type       string `json:"type"`
		Events     int    `json:"events"`
		Accepted   int    `json:"accepted"`
		Late       int    `json:"late"`
		Duplicates int    `json:"duplicates"`
		Invalid    int    `json:"invalid"`
	}
)

// matches: equal counts and sums equal within 1e-9 relative.
func (a aggJSON) matches(b aggJSON) bool {
	if a.Count != b.Count {
		return false
	}
	d := math.Abs(a.Sum - b.Sum)
	return d == 0 || d <= 1e-9*math.Max(math.Abs(a.Sum), math.Abs(b.Sum))
}
