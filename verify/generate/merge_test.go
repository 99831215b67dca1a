package generate

import (
	"errors"
	"strings"
	"testing"
)

// manifestOf runs o with a recorder, as `reckon generate --manifest` does.
func manifestOf(t *testing.T, o Options) *Manifest {
	t.Helper()
	g := mustNew(t, o)
	rc := NewRecorder(g)
	for r, ok := g.Next(); ok; r, ok = g.Next() {
		rc.Add(r)
	}
	return rc.Manifest(true, nil)
}

// TestMerge: two runs side by side on keys of their own merge into one
// account whose counts, listed records and truth are the two runs'; runs
// on the same keys, on other topics or of fiscal traffic do not merge.
func TestMerge(t *testing.T) {
	a := noisy(Payments, 2000)
	b := a
	b.Seed, b.IDNonce, b.Count, b.KeyPrefix = 43, 7, 1500, "bg-"
	ma, mb := manifestOf(t, a), manifestOf(t, b)
	m, err := Merge(ma, mb)
	if err != nil {
		t.Fatal(err)
	}
	if m.Counts.Records != 3500 || m.Counts.ValidUnique != ma.Counts.ValidUnique+mb.Counts.ValidUnique {
		t.Errorf("counts %+v", m.Counts)
	}
	var byCat int64
	for c, n := range m.Counts.ByCategory {
		byCat += n
		if n != ma.Counts.ByCategory[c]+mb.Counts.ByCategory[c] {
			t.Errorf("category %s: %d, want %d + %d", c, n, ma.Counts.ByCategory[c], mb.Counts.ByCategory[c])
		}
	}
	if byCat != m.Counts.Records {
		t.Errorf("categories sum to %d of %d records", byCat, m.Counts.Records)
	}
	if len(m.Listed) != len(ma.Listed)+len(mb.Listed) || len(m.Truth) != len(ma.Truth)+len(mb.Truth) {
		t.Errorf("listed %d, truth %d; want %d + %d, %d + %d", len(m.Listed), len(m.Truth),
			len(ma.Listed), len(mb.Listed), len(ma.Truth), len(mb.Truth))
	}
	for i := 1; i < len(m.Truth); i++ {
		if p, w := m.Truth[i-1], m.Truth[i]; p.Key > w.Key || (p.Key == w.Key && p.WindowStart >= w.WindowStart) {
			t.Fatalf("truth not sorted at %d: %+v then %+v", i, p, w)
		}
	}
	if m.FirstArrival != min(ma.FirstArrival, mb.FirstArrival) || m.LastArrival != max(ma.LastArrival, mb.LastArrival) {
		t.Errorf("arrivals %s–%s", m.FirstArrival, m.LastArrival)
	}
	if !m.Complete {
		t.Error("two complete runs merged incomplete")
	}
	mb.Complete = false
	if m, _ := Merge(ma, mb); m.Complete {
		t.Error("an incomplete run merged complete")
	}

	// The same keys twice: the windows would count twice.
	if _, err := Merge(ma, ma); !errors.Is(err, ErrMerge) || !strings.Contains(err.Error(), "--key-prefix") {
		t.Errorf("same keys: %v", err)
	}
	other := *mb
	other.Topic = "elsewhere"
	if _, err := Merge(ma, &other); !errors.Is(err, ErrMerge) || !strings.Contains(err.Error(), "elsewhere") {
		t.Errorf("other topic: %v", err)
	}
	f := manifestOf(t, noisy(Fiscal, 300))
	if _, err := Merge(f, f); !errors.Is(err, ErrMerge) || !strings.Contains(err.Error(), "fiscal") {
		t.Errorf("fiscal: %v", err)
	}
	if _, err := Merge(); !errors.Is(err, ErrMerge) {
		t.Errorf("no manifest: %v", err)
	}
}
