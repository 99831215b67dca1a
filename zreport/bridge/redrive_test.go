package bridge

import (
	"testing"
	"time"

	"reckon/zreport"
)

// TestHeldPartsRebuildsTheCurrentParts: the parts rebuilt from a carried
// state are the ones its present sources hold now — a correction's
// replacement, not the part it replaced — and the state applies them as
// redeliveries, so a run holding them already changes nothing.
func TestHeldPartsRebuildsTheCurrentParts(t *testing.T) {
	if heldParts(nil) != nil {
		t.Error("parts from no state")
	}
	k := zreport.Key{FiscalDrive: "9960440300000051", Shift: 8}
	closed := time.Date(2026, 12, 3, 21, 0, 0, 0, time.UTC)
	now := closed.Add(time.Hour)
	part := func(id string, src zreport.Source, receipts int64, origin string) zreport.Part {
		return zreport.Part{EventID: id, Source: src, Key: k, Figures: zreport.Figures{Receipts: receipts, Total: 10},
			ShiftClosedAt: closed, Origin: origin}
	}
	st := zreport.New(k, zreport.Policy{}.WithDefaults())
	for _, p := range []zreport.Part{
		part("dwh-1", zreport.DWH, 5, "zreport-parts/0/1"),
		part("rms-1", zreport.RMS, 6, "zreport-parts/0/2"),
		part("dwh-2", zreport.DWH, 7, "zreport-parts/0/3"), // a correction
	} {
		if _, err := st.Apply(p, now); err != nil {
			t.Fatal(err)
		}
	}
	got := heldParts(st)
	want := map[zreport.Source]zreport.Part{
		zreport.DWH: part("dwh-2", zreport.DWH, 7, "zreport-parts/0/3"),
		zreport.RMS: part("rms-1", zreport.RMS, 6, "zreport-parts/0/2"),
	}
	if len(got) != len(want) {
		t.Fatalf("held parts %+v, want %d", got, len(want))
	}
	for _, p := range got {
		if w := want[p.Source]; p != w {
			t.Errorf("%s: %+v, want %+v", p.Source, p, w)
		}
	}
	before := st.Seq
	for _, p := range got {
		out, err := st.Apply(p, now)
		if err != nil || !out.Duplicate {
			t.Errorf("%s again: %+v %v, want a duplicate", p.EventID, out, err)
		}
	}
	for _, src := range st.Sources {
		if src.Duplicates != 0 {
			t.Errorf("%s: %d duplicates, want the re-sent parts counted as redeliveries", src.Source, src.Duplicates)
		}
	}
	if st.Seq != before {
		t.Errorf("seq %d after the held parts again, want %d", st.Seq, before)
	}
}
