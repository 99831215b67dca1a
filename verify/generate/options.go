package generate

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"reckon/internal/config"
)

// Scenario names a kind of traffic.
type Scenario string

// Scenarios.
const (
	// Sensors: temperature readings sensor.suhu.terbaca from devices
	// sensor-01.. on floors 1–10 (docs/requirements.md R-GATE-5), stream suhu.
	Sensors Scenario = "sensors"
	// Payments: payment.checkout.completed from users such as Budi, Siti and
	// Dewi (docs/requirements.md R-ROLL-3), amounts in IDR, stream payments;
	// mobile checkouts are
	// the late ones.
	Payments Scenario = "payments"
	// Fiscal: Z-report parts zreport.{ofd.received,dwh.computed,rms.computed}
	// per (fiscal drive, shift) (docs/requirements.md R-Z-2); OFD arrives days
	// late.
	Fiscal Scenario = "fiscal"
)

// Scenarios lists every scenario.
var Scenarios = []Scenario{Sensors, Payments, Fiscal}

// Event types written by the scenarios; deploy/reckon.yaml has gate rules for
// each.
const (
	TypeSensor  = "sensor.suhu.terbaca"
	TypePayment = "payment.checkout.completed"
	TypeOFD     = "zreport.ofd.received"
	TypeDWH     = "zreport.dwh.computed"
	TypeRMS     = "zreport.rms.computed"
)

// Z-report sources.
const (
	SourceOFD = "OFD"
	SourceDWH = "DWH"
	SourceRMS = "RMS"
)

// Sources lists the Z-report sources in their canonical order.
var Sources = []string{SourceOFD, SourceDWH, SourceRMS}

// SourceType returns the event type a Z-report source sends.
func SourceType(source string) string {
	switch source {
	case SourceOFD:
		return TypeOFD
	case SourceDWH:
		return TypeDWH
	case SourceRMS:
		return TypeRMS
	}
	return ""
}

// ErrOptions prefixes every options problem.
var ErrOptions = errors.New("generate: invalid options")

// DelayDist is the distribution of the extra delay of a late event past the
// moment its window fired. The zero value is exponential with mean 1m.
type DelayDist struct {
	// Kind is "exp" (default), "uniform" (in [0, 2·Mean)) or "fixed".
	Kind string
	// Mean of the distribution. Default 1m.
	Mean time.Duration
}

// ParseDelayDist reads "exp:1m", "uniform:30s" or "fixed:2m"; a bare
// duration means exp.
func ParseDelayDist(s string) (DelayDist, error) {
	kind, mean, ok := strings.Cut(s, ":")
	if !ok {
		kind, mean = "exp", s
	}
	d, err := time.ParseDuration(mean)
	if err != nil {
		return DelayDist{}, fmt.Errorf("%w: delay distribution %q: %v", ErrOptions, s, err)
	}
	dd := DelayDist{Kind: kind, Mean: d}
	return dd, dd.validate()
}

func (d DelayDist) String() string {
	d = d.withDefaults()
	return d.Kind + ":" + d.Mean.String()
}

func (d DelayDist) withDefaults() DelayDist {
	if d.Kind == "" {
		d.Kind = "exp"
	}
	if d.Mean == 0 {
		d.Mean = time.Minute
	}
	return d
}

func (d DelayDist) validate() error {
	switch d.Kind {
	case "", "exp", "uniform", "fixed":
	default:
		return fmt.Errorf("%w: delay distribution kind %q is not exp, uniform or fixed", ErrOptions, d.Kind)
	}
	if d.Mean < 0 {
		return fmt.Errorf("%w: delay distribution mean %v is negative", ErrOptions, d.Mean)
	}
	return nil
}

func (d DelayDist) draw(r *rng) time.Duration {
	m := float64(d.Mean)
	switch d.Kind {
	case "uniform":
		return time.Duration(r.between(0, 2*m))
	case "fixed":
		return d.Mean
	}
	return time.Duration(r.exp(m))
}

// Target is where the traffic goes and the event-time policy of the stream
// that will read it, which decides what "late" means. The zero Target means
// the defaults of deploy/reckon.yaml for the scenario; a Target with a Topic
// is used exactly as given (an AllowedLateness of 0 is a real value).
type Target struct {
	// Topic receives the records.
	Topic string
	// Stream is the configured stream name used in the truth ("suhu",
	// "payments"); empty for fiscal.
	Stream string
	// Window is the stream's tumbling window size.
	Window time.Duration
	// OutOfOrderness is the stream's watermark delay.
	OutOfOrderness time.Duration
	// AllowedLateness is how long fired windows stay open for late panes.
	AllowedLateness time.Duration
	// MaxFutureSkew is the gate's bound on occurred_at ahead of arrival.
	// Default 5m.
	MaxFutureSkew time.Duration
	// MaxPayloadBytes is the gate's record size limit. Default 1 MiB.
	MaxPayloadBytes int
	// Also are further streams reading the same records with the same key
	// and value fields, whose windows the manifest's truth holds too (a
	// hopping stream beside the tumbling one, docs/adr/0041). Lateness
	// categories follow the Stream's policy only.
	Also []TruthStream
}

// TruthStream is a stream the manifest's truth covers besides
// Target.Stream: its windows of size Window start every Hop (0: tumbling).
type TruthStream struct {
	Stream      string
	Window, Hop time.Duration
}

func defaultTarget(s Scenario) Target {
	switch s {
	case Sensors:
		return Target{Topic: "m8-suhu-kejadian", Stream: "suhu", Window: time.Hour, OutOfOrderness: 5 * time.Second, AllowedLateness: 10 * time.Minute}
	case Payments:
		return Target{Topic: "payments-kejadian", Stream: "payments", Window: 5 * time.Minute, OutOfOrderness: 5 * time.Second, AllowedLateness: 5 * time.Minute}
	}
	return Target{Topic: "zreport-parts"}
}

// TargetFromConfig returns the target of scenario s under cfg: the topic and
// event-time policy of the stream whose event types include the scenario's
// (the Z-report parts topic for fiscal) and the gate's limits. It fails when
// the stream's key or value field is not the one the scenario writes.
func TargetFromConfig(cfg *config.Config, s Scenario) (Target, error) {
	t := Target{MaxFutureSkew: cfg.Gate.MaxFutureSkew, MaxPayloadBytes: cfg.Gate.MaxPayloadBytes}
	if s == Fiscal {
		t.Topic = cfg.Topics.ZReportParts
		return t, nil
	}
	typ, key, val := TypeSensor, "id_perangkat", "suhu_c"
	if s == Payments {
		typ, key, val = TypePayment, "user_id", "amount"
	} else if s != Sensors {
		return Target{}, fmt.Errorf("%w: unknown scenario %q", ErrOptions, s)
	}
	for _, st := range cfg.Streams {
		if !slices.Contains(st.EventTypes, typ) {
			continue
		}
		if st.KeyField != key || st.ValueField != val {
			return Target{}, fmt.Errorf("%w: stream %s aggregates %s by %s/%s, but the %s scenario writes %s/%s", ErrOptions, st.Name, typ, st.KeyField, st.ValueField, s, key, val)
		}
		if t.Stream != "" {
			if st.Topic == t.Topic {
				t.Also = append(t.Also, TruthStream{Stream: st.Name, Window: st.Window, Hop: st.Hop})
			}
			continue
		}
		t.Topic, t.Stream = st.Topic, st.Name
		t.Window, t.OutOfOrderness, t.AllowedLateness = st.Window, st.OutOfOrderness, st.AllowedLateness
	}
	if t.Stream != "" {
		return t, nil
	}
	return Target{}, fmt.Errorf("%w: no stream in the configuration reads event type %s (scenario %s)", ErrOptions, typ, s)
}

// Options configures a Generator. Fractions are probabilities in [0, 1] and
// their zero value means "none": the zero knobs give clean, on-time
// traffic. Defaults returns the realistic mix `reckon generate` uses.
type Options struct {
	// Scenario is required.
	Scenario Scenario
	// Seed selects the traffic; any value, 0 included.
	Seed int64
	// IDNonce is mixed into every event_id: runs with the same Seed and
	// different nonces make the same traffic under disjoint event_ids, so a
	// rerun into the same topics is not taken for redeliveries of the
	// earlier run (dedup by event_id would drop it). Default 0: the ids
	// come from Seed alone.
	IDNonce uint64
	// Start is the event time of the first event. Required (the package
	// reads no clock; the CLI passes the current time by default).
	Start time.Time
	// Count is the number of records to produce, every category included;
	// 0 means unbounded (continuous mode: memory stays bounded, see Next).
	Count int64
	// Rate is the event-time density in events per second: consecutive
	// events are spaced by exponential gaps of mean 1/Rate (for fiscal, each
	// business key's shift closes ~3/Rate after the previous one, as it
	// yields about three parts). Default 100.
	Rate float64
	// Keys is the key cardinality: devices (at most 99), users, or fiscal
	// drives. Default 20 devices, 50 users, 20 drives.
	Keys int
	// KeyPrefix is put before every device id or user id (not the fiscal
	// drives, whose numbers are their format), so two runs side by side
	// touch disjoint keys and windows. Default none.
	KeyPrefix string

	// LateFraction of valid stream events arrive after their window fired
	// (the watermark passed the window end). Sensors and payments only.
	LateFraction float64
	// Delay is the distribution of a late event's extra delay past the
	// firing point; late events within lateness redraw until the delay fits
	// in the allowed lateness.
	Delay DelayDist
	// BeyondLatenessFraction of the late events arrive after the allowed
	// lateness too (the window was purged: the late side output).
	BeyondLatenessFraction float64
	// DuplicateFraction of records are redeliveries of an earlier valid
	// record: same event_id, same bytes, arriving later.
	DuplicateFraction float64
	// RedeliveryDelay is the mean extra delay of a redelivery. Default 30s
	// (fiscal: 2h).
	RedeliveryDelay time.Duration
	// PoisonFraction of records are invalid in one of PoisonKinds.
	PoisonFraction float64
	// PoisonKinds to mix, uniformly. Default all (see PoisonKinds).
	PoisonKinds []PoisonKind
	// OversizedShare, when above 0, is the share of poison records that
	// are Oversized (when PoisonKinds holds it), the others mixed
	// uniformly: a ~1 MiB record costs what a thousand others do, so a
	// long-running demo makes few. Default 0: Oversized is one kind among
	// the others.
	OversizedShare float64
	// SkewFraction of records come from a clock running ahead: occurred_at
	// is ahead of arrival by less than the gate's MaxFutureSkew (accepted;
	// "future" poison covers skew beyond it).
	SkewFraction float64

	// MismatchFraction of fiscal business keys end with DWH or RMS figures
	// that differ from OFD.
	MismatchFraction float64
	// MissingFraction of fiscal business keys never get one of their three
	// parts (OFD, DWH or RMS, equally likely).
	MissingFraction float64
	// CorrectionFraction of fiscal business keys get a corrected resend:
	// DWH or RMS first sends wrong figures, later a new event_id with the
	// final ones.
	CorrectionFraction float64
	// OFDDelay is the mean delay of the OFD part after shift close
	// (exponential, at least a tenth of the mean). Default 48h.
	OFDDelay time.Duration
	// PartDelay is the mean delay of DWH parts after shift close (RMS: half
	// of it). Default 20m.
	PartDelay time.Duration
	// FirstKey is the number of the first fiscal business key the run
	// makes: key k is drive k mod Keys, shift firstShift + k div Keys, and
	// its figures depend on Seed and k only. Default 0. Runs whose key
	// ranges do not overlap make disjoint shifts (FirstKeyAt). Fiscal only.
	FirstKey int64

	// Target: topic and event-time policy. Zero means deploy defaults.
	Target Target
}

// Defaults returns the knobs `reckon generate` starts from for scenario s:
// 5% late (a fifth of them beyond lateness), 1% redeliveries, 1% poison,
// 0.5% skewed, and for fiscal 5% mismatched, 3% missing a part, 2% corrected.
// Start is left zero.
func Defaults(s Scenario) Options {
	o := Options{
		Scenario:               s,
		Rate:                   100,
		LateFraction:           0.05,
		BeyondLatenessFraction: 0.2,
		DuplicateFraction:      0.01,
		PoisonFraction:         0.01,
		SkewFraction:           0.005,
	}
	if s == Fiscal {
		o.LateFraction, o.BeyondLatenessFraction = 0, 0
		o.MismatchFraction, o.MissingFraction, o.CorrectionFraction = 0.05, 0.03, 0.02
	}
	return o
}

// Live returns Defaults(s) scaled for a live stack that runs for minutes,
// not days, starting at start: fiscal parts arrive within seconds to
// minutes (OFD after ~2m, DWH ~20s, RMS ~10s, redeliveries ~30s), to pair
// with a Z-report ofd_request_after of minutes; stream traffic keeps its
// configured windows. Memory stays about Rate × the longest delay.
func Live(s Scenario, start time.Time, rate float64) Options {
	o := Defaults(s)
	o.Start, o.Rate = start, rate
	if s == Fiscal {
		o.OFDDelay, o.PartDelay, o.RedeliveryDelay = 2*time.Minute, 20*time.Second, 30*time.Second
	}
	return o
}

// withDefaults fills zero values that mean "default".
func (o Options) withDefaults() Options {
	if o.Rate == 0 {
		o.Rate = 100
	}
	if o.Keys == 0 {
		o.Keys = 20
		if o.Scenario == Payments {
			o.Keys = 50
		}
	}
	o.Delay = o.Delay.withDefaults()
	if o.RedeliveryDelay == 0 {
		o.RedeliveryDelay = 30 * time.Second
		if o.Scenario == Fiscal {
			o.RedeliveryDelay = 2 * time.Hour
		}
	}
	if len(o.PoisonKinds) == 0 {
		o.PoisonKinds = PoisonKinds
	}
	if o.OFDDelay == 0 {
		o.OFDDelay = 48 * time.Hour
	}
	if o.PartDelay == 0 {
		o.PartDelay = 20 * time.Minute
	}
	if o.Target.Topic == "" {
		def := defaultTarget(o.Scenario)
		def.MaxFutureSkew, def.MaxPayloadBytes = o.Target.MaxFutureSkew, o.Target.MaxPayloadBytes
		o.Target = def
	}
	if o.Target.MaxFutureSkew == 0 {
		o.Target.MaxFutureSkew = 5 * time.Minute
	}
	if o.Target.MaxPayloadBytes == 0 {
		o.Target.MaxPayloadBytes = 1 << 20
	}
	o.Start = o.Start.UTC().Truncate(time.Millisecond)
	return o
}

// Validate reports every problem at once.
func (o Options) Validate() error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrOptions}, a...)...))
	}
	if !slices.Contains(Scenarios, o.Scenario) {
		bad("scenario %q is not one of sensors, payments, fiscal", o.Scenario)
	}
	if o.Start.IsZero() {
		bad("start is required")
	}
	if o.Count < 0 {
		bad("count %d is negative", o.Count)
	}
	if !(o.Rate >= 0 && o.Rate <= 1e7) {
		bad("rate %v is not in [0 (default 100), 1e7]", o.Rate)
	}
	if o.Keys < 0 {
		bad("keys %d is negative", o.Keys)
	}
	if o.FirstKey < 0 || (o.FirstKey > 0 && o.Scenario != Fiscal) {
		bad("first key %d: must be non-negative, and is for the fiscal scenario only", o.FirstKey)
	}
	if o.KeyPrefix != "" && o.Scenario == Fiscal {
		bad("key prefix %q: fiscal drive numbers take none", o.KeyPrefix)
	}
	if o.Scenario == Sensors && o.Keys > 99 {
		bad("keys %d: sensor ids are sensor-01..sensor-99", o.Keys)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"late fraction", o.LateFraction}, {"beyond-lateness fraction", o.BeyondLatenessFraction},
		{"duplicate fraction", o.DuplicateFraction}, {"poison fraction", o.PoisonFraction},
		{"skew fraction", o.SkewFraction}, {"mismatch fraction", o.MismatchFraction},
		{"missing fraction", o.MissingFraction}, {"correction fraction", o.CorrectionFraction},
		{"oversized share", o.OversizedShare},
	} {
		if !(f.v >= 0 && f.v <= 1) {
			bad("%s %v is not in [0, 1]", f.name, f.v)
		}
	}
	if s := o.DuplicateFraction + o.PoisonFraction + o.SkewFraction; s > 1 {
		bad("duplicate + poison + skew fractions add up to %v > 1", s)
	}
	if err := o.Delay.validate(); err != nil {
		errs = append(errs, err)
	}
	for _, k := range o.PoisonKinds {
		if !slices.Contains(PoisonKinds, k) {
			bad("poison kind %q is not one of %s", k, joinKinds(PoisonKinds))
		}
	}
	if o.RedeliveryDelay < 0 || o.OFDDelay < 0 || o.PartDelay < 0 {
		bad("delays must not be negative")
	}
	t := o.Target
	if t.Topic != "" && o.Scenario != Fiscal {
		if t.Window <= 0 || (24*time.Hour)%t.Window != 0 {
			bad("target window %v must be positive and divide a day", t.Window)
		}
		if t.OutOfOrderness < 0 || t.AllowedLateness < 0 {
			bad("target out-of-orderness and allowed lateness must not be negative")
		}
	}
	if t.MaxFutureSkew < 0 || t.MaxPayloadBytes < 0 {
		bad("target gate limits must not be negative")
	}
	return errors.Join(errs...)
}
