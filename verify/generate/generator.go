package generate

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

// ringSize bounds how many recent valid records are redelivery candidates.
const ringSize = 256

// Generator yields a scenario's records in simulated-arrival order. It is
// not safe for concurrent use. Memory is bounded in continuous mode: it
// holds the records generated but not yet due (about Rate × the longest
// delay: window + allowed lateness + the delay tail for streams, the OFD
// delay for fiscal) and a fixed ring of redelivery candidates.
type Generator struct {
	o     Options
	r     *rng
	idMix [2]uint64 // IDNonce's mask over event_id bits; zero for nonce 0

	keyField, valField string

	heap      []*Record
	floor     time.Time // no record generated later arrives before this
	created   int64     // records generated (pushed)
	emitted   int64     // records returned by Next
	exhausted bool      // Count reached: no more generation
	gen       uint64
	step      int64   // steps taken
	base      float64 // event time of the current step, ns after Start

	ring  [ringSize]*Record
	ringN int

	devices []device  // sensors
	users   []string  // payments
	cum     []float64 // payments: cumulative user weights
	drives  []drive   // fiscal
}

type device struct {
	id    string
	floor int
	base  float64 // °C
}

type drive struct {
	number     string
	firstShift int
}

// New returns a generator for o, after filling defaults and validating.
func New(o Options) (*Generator, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	g := &Generator{o: o, r: newRNG(o.Seed, 1)}
	if o.IDNonce != 0 {
		m := newRNG(int64(o.IDNonce), 3)
		g.idMix = [2]uint64{m.uint64(), m.uint64()}
	}
	kr := newRNG(o.Seed, 2) // key material, independent of the traffic
	switch o.Scenario {
	case Sensors:
		g.keyField, g.valField = "id_perangkat", "suhu_c"
		for i := 1; i <= o.Keys; i++ {
			g.devices = append(g.devices, device{
				id:    fmt.Sprintf("%ssensor-%02d", o.KeyPrefix, i),
				floor: 1 + kr.intn(10),
				base:  kr.norm(24, 1.2),
			})
		}
	case Payments:
		g.keyField, g.valField = "user_id", "amount"
		g.users = userIDs(kr, o.Keys)
		for i := range g.users {
			g.users[i] = o.KeyPrefix + g.users[i]
		}
		total := 0.0
		for i := range g.users {
			total += 1 / math.Pow(float64(i+1), 0.8)
			g.cum = append(g.cum, total)
		}
	case Fiscal:
		g.keyField, g.valField = "fiscal_drive", "total"
		seen := map[string]bool{}
		for len(g.drives) < o.Keys {
			n := fmt.Sprintf("99604403%08d", kr.intn(100000000))
			if seen[n] {
				continue
			}
			seen[n] = true
			g.drives = append(g.drives, drive{number: n, firstShift: 1 + kr.intn(2000)})
		}
	}
	return g, nil
}

// Options returns the options in effect, defaults filled.
func (g *Generator) Options() Options { return g.o }

// Next returns the next record in simulated-arrival order (ties in
// generation order), or false when Count records have been returned.
func (g *Generator) Next() (Record, bool) {
	for {
		if len(g.heap) > 0 && (g.exhausted || !g.heap[0].Arrival.After(g.floor)) {
			rec := g.pop()
			rec.Seq = g.emitted
			g.emitted++
			return *rec, true
		}
		if g.exhausted {
			return Record{}, false
		}
		if g.o.Count > 0 && g.created >= g.o.Count {
			g.exhausted = true
			continue
		}
		if g.o.Scenario == Fiscal {
			g.fiscalStep()
		} else {
			g.streamStep()
		}
		g.step++
	}
}

// push adds rec unless Count is reached; valid records become redelivery
// candidates.
func (g *Generator) push(rec *Record) {
	if g.o.Count > 0 && g.created >= g.o.Count {
		return
	}
	g.created++
	g.gen++
	rec.gen = g.gen
	if rec.Topic == "" {
		rec.Topic = g.o.Target.Topic
	}
	g.heap = append(g.heap, rec)
	g.up(len(g.heap) - 1)
	if rec.Category.Valid() {
		g.ring[g.ringN%ringSize] = rec
		g.ringN++
	}
}

func (g *Generator) less(i, j int) bool {
	a, b := g.heap[i], g.heap[j]
	if !a.Arrival.Equal(b.Arrival) {
		return a.Arrival.Before(b.Arrival)
	}
	return a.gen < b.gen
}

func (g *Generator) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !g.less(i, p) {
			return
		}
		g.heap[i], g.heap[p] = g.heap[p], g.heap[i]
		i = p
	}
}

func (g *Generator) pop() *Record {
	h := g.heap
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h[n] = nil
	g.heap = h[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && g.less(r, l) {
			m = r
		}
		if !g.less(m, i) {
			break
		}
		g.heap[i], g.heap[m] = g.heap[m], g.heap[i]
		i = m
	}
	return top
}

func ms(d float64) time.Duration { return time.Duration(d).Truncate(time.Millisecond) }

// eventID draws the next event_id. The traffic stream draws the same bits
// whatever the nonce, so the nonce changes the ids and nothing else; XOR
// with a fixed mask keeps the ids of one run distinct.
func (g *Generator) eventID() string { return g.r.uuid(g.idMix) }

// onTimeDelay is how long an ordinary record takes: network and batching
// latency, exponential with mean out-of-orderness/20 (250ms for 5s), capped
// below half the out-of-orderness so it is never behind the watermark.
func (g *Generator) onTimeDelay() time.Duration {
	ooo := float64(g.o.Target.OutOfOrderness)
	return ms(min(g.r.exp(ooo/20), ooo/2))
}

// streamStep generates one sensor or payment record at the next event time.
func (g *Generator) streamStep() {
	o := &g.o
	g.base += g.r.exp(float64(time.Second) / o.Rate)
	et := o.Start.Add(ms(g.base))
	g.floor = et
	u := g.r.float()
	switch {
	case u < o.PoisonFraction:
		arrival := et.Add(g.onTimeDelay())
		e, key, _ := g.streamEvent(et, false)
		g.pushPoison(e, key, arrival)
	case u < o.PoisonFraction+o.DuplicateFraction && g.ringN > 0:
		g.pushDuplicate(et)
	case u < o.PoisonFraction+o.DuplicateFraction+o.SkewFraction:
		arrival := et.Add(g.onTimeDelay())
		e, key, v := g.streamEvent(et, false)
		occurred := arrival.Add(ms(g.r.between(0.2, 0.8) * float64(o.Target.MaxFutureSkew)))
		e.occurred = fmtTime(occurred)
		g.pushValid(e, key, v, occurred, arrival, Skewed)
	default:
		cat, arrival := OnTime, et.Add(g.onTimeDelay())
		if g.r.chance(o.LateFraction) {
			cat, arrival = g.lateArrival(et)
		}
		e, key, v := g.streamEvent(et, cat != OnTime)
		g.pushValid(e, key, v, et, arrival, cat)
	}
}

// lateArrival places a late event after its window fired: within the
// allowed lateness or, for the beyond-lateness share, after it.
func (g *Generator) lateArrival(et time.Time) (Category, time.Time) {
	t := g.o.Target
	fire := et.Truncate(t.Window).Add(t.Window + t.OutOfOrderness)
	margin := min(t.AllowedLateness/5, 30*time.Second)
	room := t.AllowedLateness - 2*margin
	if room <= 0 || g.r.chance(g.o.BeyondLatenessFraction) {
		x := g.o.Delay.draw(g.r)
		return BeyondLateness, fire.Add(t.AllowedLateness + margin + x).Truncate(time.Millisecond)
	}
	x := g.o.Delay.draw(g.r)
	for i := 0; x > room && i < 8; i++ {
		x = g.o.Delay.draw(g.r)
	}
	if x > room {
		x = time.Duration(g.r.between(0, float64(room)))
	}
	return Late, fire.Add(margin + x).Truncate(time.Millisecond)
}

// streamEvent draws one sensor reading or payment at event time et.
func (g *Generator) streamEvent(et time.Time, late bool) (e *envelope, key string, value float64) {
	e = &envelope{id: g.eventID(), occurred: fmtTime(et)}
	if g.o.Scenario == Sensors {
		d := g.devices[g.r.intn(len(g.devices))]
		hour := float64(et.Hour()) + float64(et.Minute())/60
		v := d.base + 2.5*math.Sin(2*math.Pi*(hour-9)/24) + g.r.norm(0, 0.4)
		// DS18B20 resolution: 1/16 °C, exact in binary, so sums do not
		// depend on the order a consumer adds them in.
		v = math.Max(-40, math.Min(60, math.Round(v*16)/16))
		e.typ = TypeSensor
		e.data = []field{{"id_perangkat", rawString(d.id)}, {"lantai", rawInt(int64(d.floor))}, {"suhu_c", rawFloat(v)}}
		return e, d.id, v
	}
	u := g.r.float() * g.cum[len(g.cum)-1]
	i := 0
	for lo, hi := 0, len(g.cum)-1; lo <= hi; {
		m := (lo + hi) / 2
		if g.cum[m] > u {
			i, hi = m, m-1
		} else {
			lo = m + 1
		}
	}
	user := g.users[i]
	amount := math.Round(math.Exp(g.r.norm(math.Log(120000), 0.8))/500) * 500
	amount = math.Max(1000, math.Min(50_000_000, amount))
	channel := "mobile"
	if !late {
		switch c := g.r.float(); {
		case c < 0.45:
			channel = "web"
		case c < 0.8:
			channel = "pos"
		}
	}
	e.typ = TypePayment
	e.data = []field{{"user_id", rawString(user)}, {"amount", rawFloat(amount)}, {"currency", rawString("IDR")}, {"channel", rawString(channel)}}
	return e, user, amount
}

func (g *Generator) pushValid(e *envelope, key string, v float64, occurred, arrival time.Time, cat Category) {
	g.push(&Record{
		Key: []byte(key), Value: e.render(), Arrival: arrival, EventTime: occurred,
		EventID: e.id, Category: cat, JSON: true,
		Stream: g.o.Target.Stream, KeyName: key, Measure: v,
	})
}

// poisonKind draws the kind of the next poison record: uniformly from
// PoisonKinds, or with OversizedShare set Oversized at that share and the
// other kinds uniformly.
func (g *Generator) poisonKind() PoisonKind {
	kinds := g.o.PoisonKinds
	if g.o.OversizedShare <= 0 || !slices.Contains(kinds, Oversized) {
		return kinds[g.r.intn(len(kinds))]
	}
	if g.r.float() < g.o.OversizedShare || len(kinds) == 1 {
		return Oversized
	}
	k := kinds[g.r.intn(len(kinds)-1)]
	if k == Oversized { // skip it: the last kind takes its place
		k = kinds[len(kinds)-1]
	}
	return k
}

func (g *Generator) pushPoison(e *envelope, key string, arrival time.Time) {
	kind := g.poisonKind()
	value, fld, isJSON, key := g.poison(kind, e, key, arrival)
	rec := &Record{
		Key: []byte(key), Value: value, Arrival: arrival, EventID: e.id,
		Category: Poison, Poison: kind, Field: fld, JSON: isJSON,
	}
	if t, err := time.Parse(time.RFC3339, e.occurred); err == nil {
		rec.EventTime = t
	}
	g.push(rec)
}

// pushDuplicate redelivers a recent valid record: same key, same bytes,
// arriving after the original and not before now.
func (g *Generator) pushDuplicate(now time.Time) {
	n := min(g.ringN, ringSize)
	orig := g.ring[g.r.intn(n)]
	d := *orig
	d.Category = Duplicate
	at := orig.Arrival
	if now.After(at) {
		at = now
	}
	d.Arrival = at.Add(ms(g.r.exp(float64(g.o.RedeliveryDelay))) + time.Millisecond)
	g.push(&d)
}

var indonesianNames = []string{
	"Budi", "Siti", "Dewi", "Agus", "Rina", "Andi", "Putri", "Wahyu", "Sri", "Joko",
	"Ayu", "Bambang", "Indah", "Rudi", "Lestari", "Hendra", "Nur", "Yusuf", "Fitri", "Eko",
	"Wulan", "Dimas", "Ratna", "Fajar", "Intan", "Bayu", "Maya", "Arif", "Sari", "Teguh",
}

// userIDs returns n user ids: the fraud-features example's names first
// (docs/requirements.md R-ROLL-3), then generated ids
// matching [A-Za-z0-9_-]{1,64}.
func userIDs(r *rng, n int) []string {
	ids := make([]string, 0, n)
	for i := 0; i < n; i++ {
		if i < len(indonesianNames) {
			ids = append(ids, indonesianNames[i])
			continue
		}
		const alnum = "abcdefghijklmnopqrstuvwxyz0123456789"
		s := []byte("usr_" + strconv.Itoa(i) + "-")
		for j := 0; j < 4; j++ {
			s = append(s, alnum[r.intn(len(alnum))])
		}
		ids = append(ids, string(s))
	}
	return ids
}
