package zverify

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/verify/generate"
	"reckon/zreport"
)

// fiscalManifest is the manifest of a small fiscal run.
func fiscalManifest(t *testing.T) *generate.Manifest {
	t.Helper()
	o := generate.Defaults(generate.Fiscal)
	o.Seed, o.Count, o.Start = 7, 600, time.Date(2026, 11, 7, 10, 0, 0, 0, time.UTC)
	g, err := generate.New(o)
	if err != nil {
		t.Fatal(err)
	}
	rec := generate.NewRecorder(g)
	for {
		r, ok := g.Next()
		if !ok {
			break
		}
		rec.Add(r)
	}
	return rec.Manifest(true, nil)
}

// asPlanned is the final every key of m should end with.
func asPlanned(t *testing.T, m *generate.Manifest) Finals {
	t.Helper()
	f := Finals{}
	for _, z := range m.ZReports {
		a := &zreport.Aggregate{FiscalDrive: z.FiscalDrive, Shift: int64(z.Shift), Version: 1, Status: zreport.Status(z.StatusWithOperator)}
		for _, s := range generate.Sources {
			fig, ok := z.Sources[s]
			if !ok && s == generate.SourceOFD && z.OperatorDocument != nil {
				fig, ok = *z.OperatorDocument, true
			}
			if ok {
				sf := &zreport.SourceFigures{Figures: zreport.Figures{Receipts: int64(fig.Receipts), Total: fig.Total}, EventID: fig.EventID}
				switch s {
				case generate.SourceOFD:
					a.Sources.OFD = sf
				case generate.SourceDWH:
					a.Sources.DWH = sf
				default:
					a.Sources.RMS = sf
				}
			}
		}
		a.Duplicates = zreport.Counts{OFD: int64(z.Duplicates[generate.SourceOFD]), DWH: int64(z.Duplicates[generate.SourceDWH]), RMS: int64(z.Duplicates[generate.SourceRMS])}
		f[Key(z)] = Final{Aggregate: a}
	}
	return f
}

func TestCheck(t *testing.T) {
	m := fiscalManifest(t)
	if len(m.ZReports) < 50 {
		t.Fatalf("%d keys planned", len(m.ZReports))
	}
	got := asPlanned(t, m)
	if r := Check(m, got); r.Err() != nil || r.Settled != r.Keys || r.Finalized != r.Keys {
		t.Fatalf("finals as planned: %v: %v", r, r.Err())
	}

	// One key of each kind of fault: lost, wrong status, a part lost (a
	// source missing), figures off, a duplicate counted twice.
	var withDWH []generate.ZReport
	for _, z := range m.ZReports {
		if _, ok := z.Sources[generate.SourceDWH]; ok {
			withDWH = append(withDWH, z)
		}
	}
	if len(withDWH) < 5 {
		t.Fatalf("%d keys with a DWH part", len(withDWH))
	}
	delete(got, Key(withDWH[0]))
	got[Key(withDWH[1])].Aggregate.Status = "bogus"
	got[Key(withDWH[2])].Aggregate.Sources.DWH = nil
	got[Key(withDWH[3])].Aggregate.Sources.DWH.Total += 1
	sent := withDWH[4].Duplicates[generate.SourceDWH]
	got[Key(withDWH[4])].Aggregate.Duplicates.DWH = int64(sent) + 1
	r := Check(m, got)
	want := []string{"no final version", "latest final bogus", "DWH missing (a part lost)", "DWH figures",
		"DWH " + strconv.Itoa(sent+1) + " duplicates counted, " + strconv.Itoa(sent) + " sent"}
	if len(r.Problems) != 5 || r.Err() == nil {
		t.Fatalf("%d problems, want 5: %q", len(r.Problems), r.Problems)
	}
	all := strings.Join(r.Problems, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("no problem says %q:\n%s", w, all)
		}
	}
	if r.Finalized != r.Keys-1 || r.Settled != r.Keys-2 {
		t.Errorf("finalized %d, settled %d of %d keys", r.Finalized, r.Settled, r.Keys)
	}
}

// TestFinalsAdd: the highest version wins whatever the order, at its
// first publication.
func TestFinalsAdd(t *testing.T) {
	f := Finals{}
	at := time.Date(2026, 11, 7, 10, 0, 0, 0, time.UTC)
	for i, v := range []int64{2, 3, 1, 3} {
		b, err := json.Marshal(zreport.Aggregate{FiscalDrive: "9960440300123456", Shift: 7, Version: v, Status: zreport.Status("v" + strconv.FormatInt(v, 10))})
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Add(&kgo.Record{Value: b, Timestamp: at.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	g, ok := f["9960440300123456/7"]
	if len(f) != 1 || !ok || g.Aggregate.Version != 3 || !g.At.Equal(at.Add(time.Second)) {
		t.Fatalf("finals %+v", f)
	}
	if err := f.Add(&kgo.Record{Value: []byte("{")}); err == nil {
		t.Error("a bad record folded without an error")
	}
}
