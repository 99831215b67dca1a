package generate

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"reckon/internal/config"
	"reckon/internal/event"
)

var testStart = time.Date(2026, 11, 7, 8, 0, 0, 0, time.UTC)

// noisy is the default mix with every fault turned up so small runs see all
// of them.
func noisy(s Scenario, count int64) Options {
	o := Defaults(s)
	o.Seed, o.Start, o.Count = 42, testStart, count
	o.LateFraction, o.BeyondLatenessFraction = 0.1, 0.3
	o.DuplicateFraction, o.PoisonFraction, o.SkewFraction = 0.05, 0.05, 0.02
	if s == Fiscal {
		o.LateFraction, o.BeyondLatenessFraction = 0, 0
		o.MismatchFraction, o.MissingFraction, o.CorrectionFraction = 0.1, 0.1, 0.1
	}
	// Oversized records (1 MiB each) dominate run time; TestGate adds them.
	o.PoisonKinds = slices.DeleteFunc(slices.Clone(PoisonKinds), func(k PoisonKind) bool { return k == Oversized })
	return o
}

func mustNew(t testing.TB, o Options) *Generator {
	t.Helper()
	g, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func drain(t testing.TB, o Options) []Record {
	t.Helper()
	g := mustNew(t, o)
	var out []Record
	for r, ok := g.Next(); ok; r, ok = g.Next() {
		out = append(out, r)
	}
	return out
}

// render runs o to JSONL and a manifest, as `reckon generate --no-kafka` does.
func render(t testing.TB, o Options) (jsonl, manifest []byte) {
	t.Helper()
	g := mustNew(t, o)
	rc := NewRecorder(g)
	var out bytes.Buffer
	if err := g.Run(context.Background(), NewJSONLSink(&out), RunOptions{OnRecord: rc.Add}); err != nil {
		t.Fatal(err)
	}
	var m bytes.Buffer
	if _, err := rc.Manifest(true, nil).WriteTo(&m); err != nil {
		t.Fatal(err)
	}
	return out.Bytes(), m.Bytes()
}

func defaultGate(t testing.TB) *event.Gate {
	t.Helper()
	cfg, err := config.Load("", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := event.NewGate(cfg.Gate)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestDeterministic(t *testing.T) {
	for _, s := range Scenarios {
		t.Run(string(s), func(t *testing.T) {
			o := noisy(s, 3000)
			j1, m1 := render(t, o)
			j2, m2 := render(t, o)
			if !bytes.Equal(j1, j2) || !bytes.Equal(m1, m2) {
				t.Fatal("same options and seed gave different bytes")
			}
			o.Seed++
			j3, _ := render(t, o)
			if bytes.Equal(j1, j3) {
				t.Fatal("a different seed gave the same bytes")
			}
			// Kafka-only records (not JSON) are the only ones missing from JSONL.
			var notJSON int
			for _, r := range drain(t, noisy(s, 3000)) {
				if !r.JSON {
					notJSON++
				}
			}
			if lines := bytes.Count(j1, []byte("\n")); lines+notJSON != 3000 {
				t.Fatalf("%d lines + %d non-JSON records != 3000", lines, notJSON)
			}
		})
	}
}

// TestIDNonce: a nonce changes the event_ids and nothing else, and runs
// under different nonces (0 included) share no event_id, so a rerun is not
// deduplicated against the run before it.
func TestIDNonce(t *testing.T) {
	for _, s := range Scenarios {
		t.Run(string(s), func(t *testing.T) {
			o := noisy(s, 3000)
			runs := map[uint64][]Record{}
			for _, n := range []uint64{0, 1, 0x9e3779b97f4a7c15} {
				o.IDNonce = n
				runs[n] = drain(t, o)
			}
			ids := map[string]uint64{}
			for n, recs := range runs {
				if len(recs) != len(runs[0]) {
					t.Fatalf("nonce %d: %d records, nonce 0: %d", n, len(recs), len(runs[0]))
				}
				for i, r := range recs {
					r0 := runs[0][i]
					if !r.Arrival.Equal(r0.Arrival) || r.Category != r0.Category || r.Measure != r0.Measure || !bytes.Equal(r.Key, r0.Key) {
						t.Fatalf("nonce %d record %d differs beyond its event_id: %+v vs %+v", n, i, r, r0)
					}
					if !r.Category.Valid() || r.Category == Duplicate {
						continue
					}
					if other, ok := ids[r.EventID]; ok && other != n {
						t.Fatalf("event_id %s made under nonces %d and %d", r.EventID, other, n)
					}
					ids[r.EventID] = n
				}
			}
			if len(ids) < 3*2000 {
				t.Fatalf("only %d distinct valid event_ids over three runs", len(ids))
			}
		})
	}
}

// TestKeyPrefix: a prefix leaves the traffic as it was and moves every key
// of a valid stream event into its own key space; fiscal refuses it.
func TestKeyPrefix(t *testing.T) {
	for _, s := range []Scenario{Sensors, Payments} {
		o := noisy(s, 2000)
		plain := drain(t, o)
		o.KeyPrefix = "bg-"
		prefixed := drain(t, o)
		if len(plain) != len(prefixed) {
			t.Fatalf("%s: %d records with a prefix, %d without", s, len(prefixed), len(plain))
		}
		n := 0
		for i, r := range prefixed {
			if r.Category != plain[i].Category || !r.Arrival.Equal(plain[i].Arrival) {
				t.Fatalf("%s record %d: the prefix changed the traffic: %+v vs %+v", s, i, r, plain[i])
			}
			if !r.Category.Valid() || r.Stream == "" {
				continue
			}
			n++
			if r.KeyName != "bg-"+plain[i].KeyName {
				t.Fatalf("%s record %d: key %q, want bg-%s", s, i, r.KeyName, plain[i].KeyName)
			}
		}
		if n < 1000 {
			t.Fatalf("%s: only %d valid events checked", s, n)
		}
	}
	if _, err := New(Options{Scenario: Fiscal, Start: testStart, KeyPrefix: "bg-"}); err == nil {
		t.Fatal("fiscal took a key prefix")
	}
}

// TestFirstKey: fiscal runs over disjoint key ranges make disjoint shifts,
// and an operator built with FirstKey 0 (the OFD simulator) answers for the
// keys of a run that started later with that run's figures.
func TestFirstKey(t *testing.T) {
	o := noisy(Fiscal, 3000)
	shifts := func(recs []Record) map[string]bool {
		m := map[string]bool{}
		for _, r := range recs {
			if r.Part != nil {
				m[r.Part.BusinessKey()] = true
			}
		}
		return m
	}
	first := shifts(drain(t, o))
	operator := mustNew(t, o)
	o.FirstKey = FirstKeyAt(testStart, o.Rate, o.Keys)
	if o.FirstKey < int64(len(first)) {
		t.Fatalf("FirstKeyAt(%v) = %d is not past the first run's %d keys", testStart, o.FirstKey, len(first))
	}
	later := drain(t, o)
	for k := range shifts(later) {
		if first[k] {
			t.Fatalf("business key %s made by both runs", k)
		}
	}
	var checked int
	for _, r := range later {
		if p := r.Part; p != nil && p.Source == SourceOFD && r.Category != Duplicate {
			doc, ok := operator.OFDDocument(p.FiscalDrive, p.Shift)
			if !ok || doc.Receipts != p.Receipts || doc.TotalKopeks != p.TotalKopeks {
				t.Fatalf("OFD part %+v, operator document %+v", p, doc)
			}
			checked++
		}
	}
	if checked < 500 {
		t.Fatalf("only %d OFD parts checked", checked)
	}
	if k := FirstKeyAt(FiscalEpoch.Add(-time.Hour), 1, 20); k != 0 {
		t.Fatalf("FirstKeyAt before the epoch = %d", k)
	}
	if a, b := FirstKeyAt(testStart, 1, 20), FirstKeyAt(testStart.Add(time.Minute), 1, 20); b-a != 20 {
		t.Fatalf("a minute at rate 1 advances %d keys, want 20", b-a)
	}
	// Shift numbers stay within the gate's data.shift maximum (100000,
	// deploy/reckon.yaml) whenever a live run starts: for days at the
	// demo's rate 1, an hour at rate 100.
	for _, c := range []struct {
		rate float64
		run  time.Duration
	}{{1, 72 * time.Hour}, {100, time.Hour}} {
		for at := FiscalEpoch; at.Before(FiscalEpoch.AddDate(5, 0, 0)); at = at.Add(97 * time.Hour) {
			k := FirstKeyAt(at, c.rate, 20) + int64(c.run.Seconds()*c.rate/3)
			if shift := 2000 + k/20; shift > 100000 {
				t.Fatalf("a run starting %v at rate %g makes shift %d after %v", at, c.rate, shift, c.run)
			}
		}
	}
}

func TestOrderAndCount(t *testing.T) {
	for _, s := range Scenarios {
		t.Run(string(s), func(t *testing.T) {
			recs := drain(t, noisy(s, 5000))
			if len(recs) != 5000 {
				t.Fatalf("got %d records, want 5000", len(recs))
			}
			for i, r := range recs {
				if r.Seq != int64(i) {
					t.Fatalf("record %d has seq %d", i, r.Seq)
				}
				if i > 0 && r.Arrival.Before(recs[i-1].Arrival) {
					t.Fatalf("record %d arrives %v before record %d at %v", i, r.Arrival, i-1, recs[i-1].Arrival)
				}
				if r.Arrival.Before(testStart) || r.Arrival != r.Arrival.Truncate(time.Millisecond) {
					t.Fatalf("record %d: arrival %v", i, r.Arrival)
				}
			}
		})
	}
}

// TestGate: every valid record and redelivery passes the default config's
// gate at its simulated arrival, as Kafka bytes and as a JSONL line; every
// poison record fails naming the manifest's field.
func TestGate(t *testing.T) {
	gate := defaultGate(t)
	for _, s := range Scenarios {
		t.Run(string(s), func(t *testing.T) {
			kinds := map[PoisonKind]int{}
			o := noisy(s, 4000)
			o.PoisonKinds = nil // all
			for _, r := range drain(t, o) {
				_, res := gate.Check(r.Value, r.Arrival)
				if r.Category != Poison {
					if !res.Valid {
						t.Fatalf("%s record %d rejected: %v\n%s", r.Category, r.Seq, res.Reasons, r.Value)
					}
					line := r.AppendJSONL(nil)
					if _, res := gate.Check(line[:len(line)-1], r.Arrival); !res.Valid {
						t.Fatalf("JSONL line %d rejected: %v\n%s", r.Seq, res.Reasons, line)
					}
					continue
				}
				kinds[r.Poison]++
				if res.Valid {
					t.Fatalf("poison %s record %d accepted:\n%.300s", r.Poison, r.Seq, r.Value)
				}
				if !slices.Contains(res.Fields, r.Field) {
					t.Fatalf("poison %s record %d: gate names %v (%v), manifest expects %q\n%.300s", r.Poison, r.Seq, res.Fields, res.Reasons, r.Field, r.Value)
				}
				if len(res.Fields) != 1 {
					t.Errorf("poison %s record %d fails more than its field: %v", r.Poison, r.Seq, res.Reasons)
				}
				if isJSON := json.Valid(r.Value); isJSON != r.JSON {
					t.Errorf("poison %s record %d: JSON=%v but json.Valid=%v", r.Poison, r.Seq, r.JSON, isJSON)
				}
			}
			for _, k := range PoisonKinds {
				if kinds[k] == 0 {
					t.Errorf("no %s poison in 4000 records", k)
				}
			}
		})
	}
}

func TestFractions(t *testing.T) {
	for _, s := range Scenarios {
		t.Run(string(s), func(t *testing.T) {
			o := Defaults(s)
			o.Seed, o.Start, o.Count = 7, testStart, 20000
			o.LateFraction, o.BeyondLatenessFraction = 0.1, 0.25
			o.DuplicateFraction, o.PoisonFraction, o.SkewFraction = 0.04, 0.03, 0.02
			if s == Fiscal {
				o.LateFraction, o.BeyondLatenessFraction = 0, 0
			}
			n := map[Category]float64{}
			for _, r := range drain(t, o) {
				n[r.Category]++
			}
			total := float64(o.Count)
			near := func(what string, got, want float64) {
				t.Helper()
				if math.Abs(got-want) > 0.15*want+0.002 {
					t.Errorf("%s: got %.4f, want about %.4f", what, got, want)
				}
			}
			near("poison", n[Poison]/total, o.PoisonFraction)
			near("duplicates", n[Duplicate]/total, o.DuplicateFraction)
			if s == Fiscal {
				// Per part: a poison or redelivery follows a part with the fraction's probability.
				near("skewed", n[Skewed]/(n[OnTime]+n[Skewed]), o.SkewFraction)
				return
			}
			near("skewed", n[Skewed]/total, o.SkewFraction)
			ordinary := total * (1 - o.PoisonFraction - o.DuplicateFraction - o.SkewFraction)
			near("late", (n[Late]+n[BeyondLateness])/ordinary, o.LateFraction)
			near("beyond of late", n[BeyondLateness]/(n[Late]+n[BeyondLateness]), o.BeyondLatenessFraction)
		})
	}
}

// TestLateIntent checks the late categories against the target's policy
// under the dense-traffic watermark (arrival − out-of-orderness).
func TestLateIntent(t *testing.T) {
	for _, s := range []Scenario{Sensors, Payments} {
		o := noisy(s, 20000)
		g := mustNew(t, o)
		tg := g.Options().Target
		for r, ok := g.Next(); ok; r, ok = g.Next() {
			end := r.EventTime.Truncate(tg.Window).Add(tg.Window)
			wm := r.Arrival.Add(-tg.OutOfOrderness)
			switch r.Category {
			case OnTime:
				if r.Arrival.Sub(r.EventTime) >= tg.OutOfOrderness {
					t.Fatalf("%s on-time record %d delayed %v", s, r.Seq, r.Arrival.Sub(r.EventTime))
				}
			case Late:
				if wm.Before(end) || !wm.Before(end.Add(tg.AllowedLateness)) {
					t.Fatalf("%s late record %d: wm %v, window end %v", s, r.Seq, wm, end)
				}
				if s == Payments && !bytes.Contains(r.Value, []byte(`"channel":"mobile"`)) {
					t.Fatalf("late payment %d is not mobile: %s", r.Seq, r.Value)
				}
			case BeyondLateness:
				if wm.Before(end.Add(tg.AllowedLateness)) {
					t.Fatalf("%s beyond-lateness record %d: wm %v, window end %v", s, r.Seq, wm, end)
				}
			case Skewed:
				if ahead := r.EventTime.Sub(r.Arrival); ahead <= 0 || ahead > 5*time.Minute {
					t.Fatalf("%s skewed record %d is %v ahead", s, r.Seq, ahead)
				}
			}
		}
	}
}

// TestTruth recomputes the truth from the JSONL alone — gate, dedup by
// event_id, aggregate — and compares it with the manifest.
func TestTruth(t *testing.T) {
	gate := defaultGate(t)
	for _, s := range []Scenario{Sensors, Payments} {
		t.Run(string(s), func(t *testing.T) {
			o := noisy(s, 6000)
			jsonl, mb := render(t, o)
			m, err := ReadManifest(bytes.NewReader(mb))
			if err != nil {
				t.Fatal(err)
			}
			win := map[Scenario]time.Duration{Sensors: time.Hour, Payments: 5 * time.Minute}[s]
			key, val := "id_perangkat", "suhu_c"
			if s == Payments {
				key, val = "user_id", "amount"
			}
			seen := map[string]bool{}
			aggs := map[string]*event.Agg{}
			for _, line := range bytes.Split(bytes.TrimSpace(jsonl), []byte("\n")) {
				var env struct {
					EventID    string         `json:"event_id"`
					OccurredAt time.Time      `json:"occurred_at"`
					ArrivedAt  time.Time      `json:"arrived_at"`
					Data       map[string]any `json:"data"`
				}
				if err := json.Unmarshal(line, &env); err != nil {
					t.Fatal(err)
				}
				if _, res := gate.Check(line, env.ArrivedAt); !res.Valid || seen[env.EventID] {
					continue
				}
				seen[env.EventID] = true
				id := env.Data[key].(string) + "|" + fmtTime(env.OccurredAt.Truncate(win))
				if aggs[id] == nil {
					aggs[id] = &event.Agg{}
				}
				aggs[id].Add(env.Data[val].(float64))
			}
			if int64(len(seen)) != m.Counts.ValidUnique {
				t.Fatalf("JSONL has %d valid unique events, manifest %d", len(seen), m.Counts.ValidUnique)
			}
			if len(m.Truth) != len(aggs) {
				t.Fatalf("manifest truth has %d windows, JSONL %d", len(m.Truth), len(aggs))
			}
			for _, w := range m.Truth {
				a := aggs[w.Key+"|"+w.WindowStart]
				if a == nil || a.Count != w.Count || a.Sum != w.Sum || a.Min != w.Min || a.Max != w.Max {
					t.Fatalf("window %+v: recomputed %+v", w, a)
				}
			}
			var sum int64
			for _, c := range m.Counts.ByCategory {
				sum += c
			}
			if sum != m.Counts.Records || m.Counts.Records != 6000 {
				t.Fatalf("categories sum to %d, records %d", sum, m.Counts.Records)
			}
			if want := m.Counts.Records - m.Counts.ByCategory[OnTime]; int64(len(m.Listed)) != want {
				t.Fatalf("listed %d, want %d", len(m.Listed), want)
			}
		})
	}
}

func TestFiscal(t *testing.T) {
	o := noisy(Fiscal, 9000)
	g := mustNew(t, o)
	rc := NewRecorder(g)
	firstOfSource := map[string]time.Time{}
	for r, ok := g.Next(); ok; r, ok = g.Next() {
		rc.Add(r)
		if r.Part == nil || r.Category == Duplicate {
			continue
		}
		p := r.Part
		if !bytes.HasPrefix(r.Key, []byte(p.FiscalDrive+"/")) || len(p.FiscalDrive) != 16 {
			t.Fatalf("record %d key %q", r.Seq, r.Key)
		}
		if p.Source == SourceOFD {
			if d := r.Arrival.Sub(p.ClosedAt); d < o.OFDDelay/10 {
				t.Fatalf("OFD part %d arrived %v after close", r.Seq, d)
			}
			doc, ok := g.OFDDocument(p.FiscalDrive, p.Shift)
			if !ok || doc.Receipts != p.Receipts || doc.TotalKopeks != p.TotalKopeks || !doc.ClosedAt.Equal(p.ClosedAt) {
				t.Fatalf("OFD part %+v, operator document %+v", p, doc)
			}
		}
		k := p.BusinessKey() + p.Source
		if r.Category == Correction && !r.Arrival.After(firstOfSource[k]) {
			t.Fatalf("correction %d does not follow the part it corrects", r.Seq)
		}
		if _, ok := firstOfSource[k]; !ok {
			firstOfSource[k] = r.Arrival
		}
	}
	m := rc.Manifest(true, nil)
	zt := m.ZReportTotals
	t.Logf("z-reports: %+v", *zt)
	if zt.Keys < 2500 || zt.Matched+zt.Mismatched+zt.Incomplete != zt.Keys {
		t.Fatalf("totals %+v", *zt)
	}
	near := func(what string, got int, want float64) {
		t.Helper()
		if f := float64(got) / float64(zt.Keys); math.Abs(f-want) > 0.3*want {
			t.Errorf("%s: %.3f of keys, want about %.3f", what, f, want)
		}
	}
	// Keys missing a part (10%) are incomplete; the last keys may be cut by Count.
	near("incomplete", zt.Incomplete, 0.1)
	near("mismatched", zt.Mismatched, 0.1*0.9)
	var corrected, viaOperator int
	for _, z := range m.ZReports {
		corrected += z.Corrections
		if z.OperatorDocument != nil {
			viaOperator++
			if z.StatusWithOperator == "incomplete" && len(z.Missing) == 1 {
				t.Fatalf("key %s/%d missing only OFD stays incomplete with the operator document", z.FiscalDrive, z.Shift)
			}
		}
		if z.Status == "matched" && (z.Sources[SourceDWH].Receipts != z.Sources[SourceOFD].Receipts) {
			t.Fatalf("matched key with different receipts: %+v", z)
		}
	}
	if corrected == 0 || viaOperator == 0 {
		t.Fatalf("corrections %d, keys needing the operator %d", corrected, viaOperator)
	}
}

func TestContinuousBounded(t *testing.T) {
	for _, s := range Scenarios {
		o := noisy(s, 0)
		o.OFDDelay, o.PartDelay, o.RedeliveryDelay = 10*time.Minute, time.Minute, time.Minute
		g := mustNew(t, o)
		peak := 0
		for i := 0; i < 60000; i++ {
			if _, ok := g.Next(); !ok {
				t.Fatal("continuous generator stopped")
			}
			peak = max(peak, len(g.heap))
		}
		// Rate 100/s: sensors hold late events up to window + lateness + tail
		// (~1h20m of event time, 10% late), payments ~12m, fiscal the OFD
		// delay (10m ≈ 20k keys) and the redeliveries.
		limit := map[Scenario]int{Sensors: 30000, Payments: 10000, Fiscal: 30000}[s]
		t.Logf("%s: peak %d held records after 60000", s, peak)
		if peak > limit {
			t.Errorf("%s: %d records held", s, peak)
		}
	}
}

type fakeClock struct {
	now   time.Time
	slept time.Duration
}

func (c *fakeClock) Now() time.Time { return c.now }
func (c *fakeClock) Sleep(_ context.Context, d time.Duration) error {
	c.now = c.now.Add(d)
	c.slept += d
	return nil
}

type memSink struct{ recs []Record }

func (s *memSink) Write(_ context.Context, r Record) error { s.recs = append(s.recs, r); return nil }
func (s *memSink) Flush(context.Context) error             { return nil }

// TestPacing: a paced run sleeps until each simulated arrival and yields the
// same records as an unpaced one.
func TestPacing(t *testing.T) {
	o := noisy(Payments, 2000)
	o.Rate = 50
	var fast, paced memSink
	if err := mustNew(t, o).Run(context.Background(), &fast, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	start := clk.now
	err := mustNew(t, o).Run(context.Background(), &paced, RunOptions{Clock: clk, OnRecord: func(r Record) {
		if lag := clk.now.Sub(start) - r.Arrival.Sub(testStart); lag < -time.Millisecond || lag > time.Millisecond {
			t.Fatalf("record %d released %v off its arrival", r.Seq, lag)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(fast.recs) != len(paced.recs) {
		t.Fatal("paced run differs")
	}
	for i := range fast.recs {
		if !bytes.Equal(fast.recs[i].Value, paced.recs[i].Value) || !fast.recs[i].Arrival.Equal(paced.recs[i].Arrival) {
			t.Fatalf("record %d differs when paced", i)
		}
	}
	last := paced.recs[len(paced.recs)-1].Arrival.Sub(testStart)
	if clk.slept < last-time.Second {
		t.Fatalf("slept %v for arrivals spanning %v", clk.slept, last)
	}
}

func TestValidate(t *testing.T) {
	err := Options{Scenario: "boats", LateFraction: 2, Keys: -1, Delay: DelayDist{Kind: "pareto"}}.Validate()
	for _, want := range []string{"scenario", "start is required", "late fraction", "keys -1", "pareto"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to mention %q", err, want)
		}
	}
	if _, err := ParseDelayDist("exp:90s"); err != nil {
		t.Fatal(err)
	}
	if d, err := ParseDelayDist("2m"); err != nil || d.Kind != "exp" || d.Mean != 2*time.Minute {
		t.Fatalf("ParseDelayDist(2m) = %+v, %v", d, err)
	}
}

func TestTargetFromConfig(t *testing.T) {
	cfg, err := config.Load("", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range Scenarios {
		tg, err := TargetFromConfig(cfg, s)
		if err != nil {
			t.Fatal(err)
		}
		def := defaultTarget(s)
		def.MaxFutureSkew, def.MaxPayloadBytes = 5*time.Minute, 1<<20
		if !reflect.DeepEqual(tg, def) {
			t.Errorf("%s: config target %+v, built-in default %+v", s, tg, def)
		}
	}
}

// BenchmarkGenerate measures finite runs as `reckon generate --count` makes
// them (arrival ordering included), with the default mix and without the
// 1 MiB oversized poison records, whose allocation dominates otherwise.
func BenchmarkGenerate(b *testing.B) {
	for _, s := range Scenarios {
		for _, mix := range []string{"default", "no-oversized"} {
			b.Run(string(s)+"/"+mix, func(b *testing.B) {
				o := Defaults(s)
				o.Start, o.Count = testStart, 100000
				if mix == "no-oversized" {
					o.PoisonKinds = slices.DeleteFunc(slices.Clone(PoisonKinds), func(k PoisonKind) bool { return k == Oversized })
				}
				g := mustNew(b, o)
				for b.Loop() {
					if _, ok := g.Next(); !ok {
						o.Seed++
						g = mustNew(b, o)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			})
		}
	}
}

// BenchmarkJSONL adds JSONL rendering to a sensors run.
func BenchmarkJSONL(b *testing.B) {
	o := Defaults(Sensors)
	o.Start, o.Count = testStart, 100000
	g := mustNew(b, o)
	var buf []byte
	for b.Loop() {
		r, ok := g.Next()
		if !ok {
			o.Seed++
			g = mustNew(b, o)
		}
		buf = r.AppendJSONL(buf[:0])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// TestOversizedShare: with OversizedShare set, that share of the poison is
// oversized and the other kinds share the rest evenly.
func TestOversizedShare(t *testing.T) {
	o := Defaults(Sensors)
	o.Seed, o.Start, o.Count = 11, testStart, 8000
	o.PoisonFraction, o.OversizedShare = 0.5, 0.02
	n := map[PoisonKind]int{}
	poison := 0
	for _, r := range drain(t, o) {
		if r.Category == Poison {
			n[r.Poison]++
			poison++
		}
	}
	want := o.OversizedShare * float64(poison)
	if got := float64(n[Oversized]); math.Abs(got-want) > 5*math.Sqrt(want) {
		t.Errorf("oversized %v of %d poison records, want about %.0f", got, poison, want)
	}
	each := (1 - o.OversizedShare) * float64(poison) / float64(len(PoisonKinds)-1)
	for _, k := range PoisonKinds {
		if k != Oversized && math.Abs(float64(n[k])-each) > 5*math.Sqrt(each) {
			t.Errorf("%s: %d records, want about %.0f (%v)", k, n[k], each, n)
		}
	}
}

// TestTruthAlsoHopping: a hopping stream beside the payments stream
// (Target.Also) gets its own truth in the manifest, every window covering
// an event counting it, recomputed here from the JSONL alone.
func TestTruthAlsoHopping(t *testing.T) {
	gate := defaultGate(t)
	o := noisy(Payments, 3000)
	o.Target = defaultTarget(Payments)
	o.Target.Also = []TruthStream{{Stream: "payments_hop", Window: 5 * time.Minute, Hop: time.Minute}}
	jsonl, mb := render(t, o)
	m, err := ReadManifest(bytes.NewReader(mb))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	aggs := map[string]*event.Agg{}
	for _, line := range bytes.Split(bytes.TrimSpace(jsonl), []byte("\n")) {
		var env struct {
			EventID    string         `json:"event_id"`
			OccurredAt time.Time      `json:"occurred_at"`
			ArrivedAt  time.Time      `json:"arrived_at"`
			Data       map[string]any `json:"data"`
		}
		if err := json.Unmarshal(line, &env); err != nil {
			t.Fatal(err)
		}
		if _, res := gate.Check(line, env.ArrivedAt); !res.Valid || seen[env.EventID] {
			continue
		}
		seen[env.EventID] = true
		// Naively: every minute boundary s with s ≤ et < s + 5m.
		for s := env.OccurredAt.Truncate(time.Minute); s.Add(5 * time.Minute).After(env.OccurredAt); s = s.Add(-time.Minute) {
			id := env.Data["user_id"].(string) + "|" + fmtTime(s)
			if aggs[id] == nil {
				aggs[id] = &event.Agg{}
			}
			aggs[id].Add(env.Data["amount"].(float64))
		}
	}
	n := 0
	for _, w := range m.Truth {
		if w.Stream != "payments_hop" {
			continue
		}
		n++
		a := aggs[w.Key+"|"+w.WindowStart]
		ws, _ := time.Parse(time.RFC3339Nano, w.WindowStart)
		if a == nil || a.Count != w.Count || a.Sum != w.Sum || a.Min != w.Min || a.Max != w.Max || w.WindowEnd != fmtTime(ws.Add(5*time.Minute)) {
			t.Fatalf("window %+v: recomputed %+v", w, a)
		}
	}
	if n != len(aggs) || n < 300 {
		t.Fatalf("manifest has %d hopping windows, JSONL %d", n, len(aggs))
	}
}
