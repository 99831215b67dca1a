package generate

import (
	"math"
	"strconv"
	"time"
)

// Fiscal business keys are numbered k = FirstKey, FirstKey+1, …: key k is
// shift firstShift(d) + k/len(drives) of drive d = k mod len(drives),
// closing at Start + (k−FirstKey)·gap + jitter(k) with jitter in [0, gap).
// Its true figures and jitter come from a generator seeded by (Seed, k)
// alone, so OFDDocument can answer for any key without replaying the
// traffic.

func (g *Generator) fiscalGap() float64 { return 3 * float64(time.Second) / g.o.Rate }

// FiscalEpoch is the instant FirstKeyAt counts fiscal keys from.
var FiscalEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// FiscalShiftCycle is how many shifts per drive FirstKeyAt counts before it
// starts again from the first: drives start at shift 1..2000, so a run
// starting anywhere in the cycle makes shifts well below the gate's
// data.shift maximum (100000, deploy/reckon.yaml) for days.
const FiscalShiftCycle = 90000

// FirstKeyAt returns the fiscal key whose slot contains t when keys follow
// one another every 3/rate seconds (rate 0: the default 100) from
// FiscalEpoch, counted modulo keys·FiscalShiftCycle (keys 0: the default
// 20) so that shift numbers stay valid; 0 before the epoch. Live runs that
// start with FirstKey = FirstKeyAt(start, rate, keys) make shifts no
// earlier run at that rate made within a cycle (at rate 1 and 20 keys,
// 62 days).
func FirstKeyAt(t time.Time, rate float64, keys int) int64 {
	if rate <= 0 {
		rate = 100
	}
	if keys <= 0 {
		keys = 20
	}
	d := t.Sub(FiscalEpoch)
	if d <= 0 {
		return 0
	}
	return int64(d.Seconds()*rate/3) % (int64(keys) * FiscalShiftCycle)
}

// fiscalKey returns business key k's OFD figures: the primary document.
func (g *Generator) fiscalKey(k int64) Part {
	kr := newRNG(g.o.Seed, 1<<32+uint64(k))
	gap := g.fiscalGap()
	closed := g.o.Start.Add(ms(float64(k-g.o.FirstKey)*gap + kr.between(0, gap)))
	d := g.drives[k%int64(len(g.drives))]
	receipts := 20 + kr.intn(380)
	avg := math.Exp(kr.norm(math.Log(65000), 0.35)) // kopeks per receipt
	total := int64(float64(receipts) * avg * kr.between(0.9, 1.1))
	return Part{
		Source: SourceOFD, FiscalDrive: d.number, Shift: d.firstShift + int(k/int64(len(g.drives))),
		Receipts: receipts, TotalKopeks: total, ClosedAt: closed,
	}
}

// OFDDocument returns the operator's Z-report for (fiscalDrive, shift) — the
// figures the OFD part carries (or would carry, when the generator withheld
// it) — for a simulated fiscal data operator built with the same Options.
// It reports false for a drive or shift this generator never makes.
func (g *Generator) OFDDocument(fiscalDrive string, shift int) (Part, bool) {
	for i, d := range g.drives {
		if d.number == fiscalDrive && shift >= d.firstShift {
			return g.fiscalKey(int64(shift-d.firstShift)*int64(len(g.drives)) + int64(i)), true
		}
	}
	return Part{}, false
}

// skewFigures returns figures that differ from p's beyond the 0.005
// tolerance: a lost or extra receipt, or a total off by a few roubles.
func (g *Generator) skewFigures(p Part) Part {
	avg := p.TotalKopeks / int64(max(p.Receipts, 1))
	switch g.r.intn(3) {
	case 0:
		if p.Receipts > 0 {
			p.Receipts--
			p.TotalKopeks = max(0, p.TotalKopeks-avg)
			break
		}
		fallthrough
	case 1:
		p.Receipts++
		p.TotalKopeks += avg
	default:
		p.TotalKopeks += int64(100 * (1 + g.r.intn(50)))
	}
	return p
}

// fiscalStep generates the parts of the next business key.
func (g *Generator) fiscalStep() {
	o := &g.o
	truth := g.fiscalKey(g.o.FirstKey + g.step)
	g.floor = truth.ClosedAt

	missing := ""
	if g.r.chance(o.MissingFraction) {
		missing = Sources[g.r.intn(3)]
	}
	mismatch := ""
	if g.r.chance(o.MismatchFraction) {
		mismatch = Sources[1+g.r.intn(2)]
	}
	corrected := ""
	if g.r.chance(o.CorrectionFraction) {
		corrected = Sources[1+g.r.intn(2)]
	}
	for _, src := range Sources {
		if src == missing {
			continue
		}
		p := truth
		p.Source = src
		if src == mismatch {
			p = g.skewFigures(p)
		}
		var delay float64
		switch src {
		case SourceOFD:
			delay = max(g.r.exp(float64(o.OFDDelay)), float64(o.OFDDelay)/10)
		case SourceDWH:
			delay = g.r.exp(float64(o.PartDelay))
		default:
			delay = g.r.exp(float64(o.PartDelay) / 2)
		}
		arrival := p.ClosedAt.Add(ms(delay))
		if src == corrected {
			wrong := g.skewFigures(p)
			g.pushPart(wrong, arrival, OnTime)
			arrival = arrival.Add(ms(g.r.exp(float64(o.PartDelay))) + time.Minute)
			g.pushPart(p, arrival, Correction)
			continue
		}
		g.pushPart(p, arrival, OnTime)
	}
}

// pushPart pushes one part and, with the poison and duplicate fractions, a
// poison part for the same key or a redelivery of a recent part.
func (g *Generator) pushPart(p Part, arrival time.Time, cat Category) {
	o := &g.o
	e, key := g.partEnvelope(p)
	occurred := p.ClosedAt
	if cat == OnTime && g.r.chance(o.SkewFraction) {
		occurred = arrival.Add(ms(g.r.between(0.2, 0.8) * float64(o.Target.MaxFutureSkew)))
		e.occurred = fmtTime(occurred)
		cat = Skewed
	}
	pp := p
	g.push(&Record{
		Key: []byte(key), Value: e.render(), Arrival: arrival, EventTime: occurred,
		EventID: e.id, Category: cat, JSON: true, KeyName: key, Measure: p.Total(), Part: &pp,
	})
	switch u := g.r.float(); {
	case u < o.PoisonFraction:
		bad, key := g.partEnvelope(p)
		g.pushPoison(bad, key, arrival.Add(ms(g.r.exp(float64(time.Minute)))))
	case u < o.PoisonFraction+o.DuplicateFraction:
		g.pushDuplicate(arrival)
	}
}

func (g *Generator) partEnvelope(p Part) (*envelope, string) {
	e := &envelope{id: g.eventID(), typ: SourceType(p.Source), occurred: fmtTime(p.ClosedAt)}
	e.data = []field{
		{"fiscal_drive", rawString(p.FiscalDrive)},
		{"shift", rawInt(int64(p.Shift))},
		{"receipts", rawInt(int64(p.Receipts))},
		{"total", rawKopeks(p.TotalKopeks)},
		{"shift_closed_at", rawString(fmtTime(p.ClosedAt))},
	}
	return e, p.FiscalDrive + "/" + strconv.Itoa(p.Shift)
}
