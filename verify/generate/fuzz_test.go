package generate

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// FuzzReadManifest feeds the manifest decoder (`reckon verify --manifest`,
// `make chaos`). A manifest it accepts must write (WriteTo) and read back,
// and writing is then a fixed point: the second write equals the first.
// Seeds are real manifests of the three scenarios.
//
//	go test ./verify/generate -run '^$' -fuzz '^FuzzReadManifest$' -fuzztime 60s
func FuzzReadManifest(f *testing.F) {
	for _, sc := range Scenarios {
		o := Defaults(sc)
		o.Seed, o.Count, o.Start = 3, 40, time.Date(2026, 11, 7, 8, 0, 0, 0, time.UTC)
		o.LateFraction, o.DuplicateFraction, o.PoisonFraction = 0.2, 0.1, 0.1
		g, err := New(o)
		if err != nil {
			f.Fatal(err)
		}
		rec := NewRecorder(g)
		for off := int64(0); ; off++ {
			r, ok := g.Next()
			if !ok {
				break
			}
			rec.Add(r)
			rec.Acked(r.Seq, int32(off%3), off)
		}
		var b bytes.Buffer
		if _, err := rec.Manifest(true, []string{"reckon", "generate"}).WriteTo(&b); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	f.Add([]byte(`{"listed":null,"truth":[{"sum":1e308,"min":-1e308}],"zreport_totals":{}}`))
	f.Add([]byte(`{"counts":{"by_category":{"":1},"poison_by_kind":{"x":null}}} trailing`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ReadManifest(bytes.NewReader(b))
		if err != nil {
			return
		}
		var first bytes.Buffer
		if _, err := m.WriteTo(&first); err != nil {
			t.Fatalf("a manifest read cannot be written: %v", err)
		}
		m2, err := ReadManifest(bytes.NewReader(first.Bytes()))
		if err != nil {
			t.Fatalf("a written manifest cannot be read: %v\n%s", err, first.Bytes())
		}
		var second bytes.Buffer
		if _, err := m2.WriteTo(&second); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first.Bytes(), second.Bytes()) {
			t.Fatalf("write/read is not a fixed point:\n%s\n---\n%s", first.Bytes(), second.Bytes())
		}
	})
}

// FuzzParseDelayDist: a distribution ParseDelayDist accepts renders
// (String) as one it parses back to the same distribution.
//
//	go test ./verify/generate -run '^$' -fuzz '^FuzzParseDelayDist$' -fuzztime 60s
func FuzzParseDelayDist(f *testing.F) {
	for _, s := range []string{"exp:1m", "uniform:30s", "fixed:2m", "90s", "0", "fixed:0s", ":1m", "exp:-1s", "gauss:1m", "exp:1m:2m", "uniform:2562047h47m16.854775807s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDelayDist(s)
		if err != nil {
			if !errors.Is(err, ErrOptions) {
				t.Fatalf("error does not wrap ErrOptions: %v", err)
			}
			return
		}
		back, err := ParseDelayDist(d.String())
		if err != nil || back.withDefaults() != d.withDefaults() {
			t.Fatalf("ParseDelayDist(%q) = %+v; its String %q parses as %+v, %v", s, d, d.String(), back, err)
		}
	})
}
