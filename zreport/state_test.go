package zreport

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// The business key and shift of the fixtures (docs/requirements.md R-Z-1):
// a fiscal drive (ФН)
// and a shift closed at 23:00 UTC on 1 January.
var (
	key    = Key{FiscalDrive: "9960440300123456", Shift: 142}
	closed = time.Date(2026, 1, 1, 23, 0, 0, 0, time.UTC)
	policy = Policy{OFDRequestAfter: 144 * time.Hour, OFDRetry: 24 * time.Hour, Retention: 720 * time.Hour, Linger: time.Hour}
)

func part(src Source, id string, receipts int64, total float64) Part {
	return Part{EventID: id, Source: src, Key: key, Figures: Figures{receipts, total}, ShiftClosedAt: closed}
}

// at is closed plus h hours.
func at(h float64) time.Time { return closed.Add(time.Duration(h * float64(time.Hour))) }

func mustApply(t *testing.T, s *State, p Part, now time.Time) Outcome {
	t.Helper()
	out, err := s.Apply(p, now)
	if err != nil {
		t.Fatalf("Apply(%s %s): %v", p.Source, p.EventID, err)
	}
	return out
}

// TestAllOrdersMatch (docs/requirements.md R-Z-2, R-Z-3): each message
// adds its block to the
// aggregate whatever the order; only RMS present → still incomplete; the
// third source makes it complete. All six orders give one final version 1,
// matched, after two changelog entries.
func TestAllOrdersMatch(t *testing.T) {
	parts := []Part{part(OFD, "ofd-1", 120, 78000.50), part(DWH, "dwh-1", 120, 78000.50), part(RMS, "rms-1", 120, 78000.50)}
	for _, perm := range permutations(3) {
		name := ""
		for _, i := range perm {
			name += string(parts[i].Source)
		}
		t.Run(name, func(t *testing.T) {
			s := New(key, policy)
			var finals []*Aggregate
			for n, i := range perm {
				out := mustApply(t, s, parts[i], at(float64(n+1)))
				if n < 2 {
					if out.Changelog == nil || out.Final != nil {
						t.Fatalf("part %d: want a changelog entry only, got %+v", n, out)
					}
					if got := len(out.Changelog.Present); got != n+1 {
						t.Errorf("part %d: present %v", n, out.Changelog.Present)
					}
					if s.Status() != StatusWaiting {
						t.Errorf("part %d: status %s, want waiting", n, s.Status())
					}
				} else if out.Final != nil {
					finals = append(finals, out.Final)
				}
			}
			if len(finals) != 1 {
				t.Fatalf("finals = %d, want 1", len(finals))
			}
			f := finals[0]
			if f.Version != 1 || f.Status != StatusMatched || len(f.Missing) != 0 || len(f.Differences) != 0 {
				t.Errorf("final = %+v", f)
			}
			if f.Sources.OFD == nil || f.Sources.DWH == nil || f.Sources.RMS == nil || f.Sources.DWH.Receipts != 120 {
				t.Errorf("sources = %+v", f.Sources)
			}
			if !f.FinalizedAt.Equal(at(3)) || !f.ShiftClosedAt.Equal(closed) {
				t.Errorf("finalized %v closed %v", f.FinalizedAt, f.ShiftClosedAt)
			}
		})
	}
}

// TestRMSOnlyStaysIncomplete (docs/requirements.md R-Z-3, R-Z-4): after
// data from RMS alone the object
// remains incomplete; the changelog says exactly what is missing.
func TestRMSOnlyStaysIncomplete(t *testing.T) {
	s := New(key, policy)
	out := mustApply(t, s, part(RMS, "rms-1", 10, 100), at(0.5))
	cl := out.Changelog
	if cl == nil {
		t.Fatal("no changelog entry")
	}
	if !slices.Equal(cl.Present, []Source{RMS}) || !slices.Equal(cl.Missing, []Source{OFD, DWH}) {
		t.Errorf("present %v missing %v", cl.Present, cl.Missing)
	}
	if cl.Status != StatusWaiting || cl.Seq != 1 || cl.Parts.RMS != 1 {
		t.Errorf("changelog = %+v", cl)
	}
	if !cl.Deadlines.OFDRequestAt.Equal(closed.Add(144*time.Hour)) || !cl.Deadlines.RetentionAt.Equal(closed.Add(720*time.Hour)) {
		t.Errorf("deadlines = %+v", cl.Deadlines)
	}
}

// TestDuplicatesCountedAppliedOnce (docs/requirements.md R-Z-7): the
// Z-report article keeps a counter per source
// (ofdReportCounter, dwhReportCounter, operationReportCounter); the same
// event_id again is counted, never applied twice, before and after final.
func TestDuplicatesCountedAppliedOnce(t *testing.T) {
	s := New(key, policy)
	mustApply(t, s, part(OFD, "ofd-1", 5, 50), at(1))
	for i := 0; i < 3; i++ {
		if out := mustApply(t, s, part(OFD, "ofd-1", 5, 50), at(2)); !out.Duplicate || out.Applied || out.Changelog != nil {
			t.Fatalf("redelivery %d: %+v", i, out)
		}
	}
	// Dedup is per source: the same id from DWH is DWH's first part.
	if out := mustApply(t, s, part(DWH, "ofd-1", 5, 50), at(3)); !out.Applied {
		t.Fatalf("same id from another source: %+v", out)
	}
	out := mustApply(t, s, part(RMS, "rms-1", 5, 50), at(4))
	if out.Final == nil || out.Final.Duplicates != (Counts{OFD: 3}) {
		t.Fatalf("final = %+v", out.Final)
	}
	if out := mustApply(t, s, part(RMS, "rms-1", 5, 50), at(5)); !out.Duplicate || out.Final != nil {
		t.Fatalf("duplicate after final: %+v", out)
	}
	if s.Version != 1 || s.Sources[2].Duplicates != 1 || s.Seq != 3 {
		t.Errorf("version %d rms dups %d seq %d", s.Version, s.Sources[2].Duplicates, s.Seq)
	}
}

// TestCorrectedResend: a new event_id from a source already present replaces
// its figures and is recorded; the superseded part redelivered later is a
// duplicate, not a revert.
func TestCorrectedResend(t *testing.T) {
	s := New(key, policy)
	mustApply(t, s, part(OFD, "ofd-1", 120, 78000.50), at(1))
	mustApply(t, s, part(DWH, "dwh-wrong", 119, 77350), at(2))
	out := mustApply(t, s, part(DWH, "dwh-fixed", 120, 78000.50), at(3))
	if !out.Correction || out.Changelog == nil || out.Changelog.Corrections.DWH != 1 || out.Changelog.Parts.DWH != 2 {
		t.Fatalf("correction outcome = %+v", out)
	}
	dwh := s.Sources[1]
	want := []Revision{{EventID: "dwh-wrong", Figures: Figures{119, 77350}, ReplacedAt: at(3), ReplacedBy: "dwh-fixed"}}
	if !reflect.DeepEqual(dwh.Revisions, want) || dwh.EventID != "dwh-fixed" || dwh.Receipts != 120 {
		t.Fatalf("dwh = %+v", dwh)
	}
	if out := mustApply(t, s, part(DWH, "dwh-wrong", 119, 77350), at(4)); !out.Duplicate {
		t.Fatalf("old part redelivered: %+v", out)
	}
	out = mustApply(t, s, part(RMS, "rms-1", 120, 78000.5), at(5))
	if out.Final == nil || out.Final.Status != StatusMatched || out.Final.Corrections.DWH != 1 {
		t.Fatalf("final = %+v", out.Final)
	}
}

func TestMismatch(t *testing.T) {
	cases := []struct {
		name      string
		dwh, rms  Figures
		want      Status
		wantDiffs []Difference
	}{
		{"equal", Figures{120, 78000.50}, Figures{120, 78000.50}, StatusMatched, nil},
		{"totals within 0.005", Figures{120, 78000.505}, Figures{120, 78000.50}, StatusMatched, nil},
		{"each within 0.005 of OFD, 0.008 apart", Figures{120, 78000.504}, Figures{120, 78000.496}, StatusMismatched, []Difference{
			{RMS, DWH, "total_amount", 78000.496, 78000.504, -0.008},
		}},
		{"lost receipt in DWH", Figures{119, 77350.50}, Figures{120, 78000.50}, StatusMismatched, []Difference{
			{DWH, OFD, "receipts_count", 119, 120, -1},
			{DWH, OFD, "total_amount", 77350.50, 78000.50, -650},
		}},
		{"RMS total off by 3 roubles", Figures{120, 78000.50}, Figures{120, 78003.50}, StatusMismatched, []Difference{
			{RMS, OFD, "total_amount", 78003.50, 78000.50, 3},
		}},
		{"DWH and RMS off by a cent each way", Figures{120, 78000.49}, Figures{120, 78000.51}, StatusMismatched, []Difference{
			{DWH, OFD, "total_amount", 78000.49, 78000.50, -0.01},
			{RMS, OFD, "total_amount", 78000.51, 78000.50, 0.01},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New(key, policy)
			mustApply(t, s, part(OFD, "o", 120, 78000.50), at(1))
			mustApply(t, s, part(DWH, "d", c.dwh.Receipts, c.dwh.Total), at(2))
			out := mustApply(t, s, part(RMS, "r", c.rms.Receipts, c.rms.Total), at(3))
			if out.Final == nil || out.Final.Status != c.want {
				t.Fatalf("final = %+v, want %s", out.Final, c.want)
			}
			if c.wantDiffs == nil {
				c.wantDiffs = []Difference{}
			}
			if !reflect.DeepEqual(out.Final.Differences, c.wantDiffs) {
				t.Errorf("differences = %+v, want %+v", out.Final.Differences, c.wantDiffs)
			}
		})
	}
}

// TestDaySixRequestThenRetention: OFD and RMS in, DWH never comes; OFD is
// present so the operator is not asked; at the retention the key becomes
// incomplete naming DWH.
func TestMissingDWHUntilRetention(t *testing.T) {
	s := New(key, policy)
	mustApply(t, s, part(OFD, "o", 7, 70), at(50))
	mustApply(t, s, part(RMS, "r", 7, 70), at(1))
	tm, ok := s.NextTimer()
	if !ok || tm.Kind != TimerRetention || !tm.At.Equal(at(720)) {
		t.Fatalf("next timer = %+v", tm)
	}
	if out := s.Fire(TimerRetention, at(719)); out.Final != nil {
		t.Fatal("retention fired early")
	}
	out := s.Fire(TimerRetention, at(720))
	f := out.Final
	if f == nil || f.Status != StatusIncomplete || !slices.Equal(f.Missing, []Source{DWH}) || f.Version != 1 || f.Reason != "retention expired" {
		t.Fatalf("final = %+v", f)
	}
	if tm, _ := s.NextTimer(); tm.Kind != TimerClose || !tm.At.Equal(at(720)) {
		t.Errorf("after final: %+v", tm)
	}
}

// TestOFDRequestSchedule: DWH and RMS in, OFD missing. Day six: request;
// not found → again every ofd_retry while before the retention; a failure
// counts the same; no request at or after the retention.
func TestOFDRequestSchedule(t *testing.T) {
	p := policy
	p.Retention = 200 * time.Hour // requests at 144, 168, 192; retention at 200
	s := New(key, p)
	mustApply(t, s, part(DWH, "d", 7, 70), at(1))
	mustApply(t, s, part(RMS, "r", 7, 70), at(2))
	var requests []float64
	for i := 0; i < 10; i++ {
		tm, ok := s.NextTimer()
		if !ok {
			t.Fatal("no timer")
		}
		if tm.Kind != TimerOFDRequest {
			if tm.Kind != TimerRetention || !tm.At.Equal(at(200)) {
				t.Fatalf("timer %+v", tm)
			}
			break
		}
		out := s.Fire(tm.Kind, tm.At)
		if !out.RequestOFD || !s.OFD.InFlight {
			t.Fatalf("fire: %+v", out)
		}
		if tm2, _ := s.NextTimer(); tm2.Kind != TimerRetention {
			t.Fatalf("while in flight: %+v", tm2)
		}
		requests = append(requests, tm.At.Sub(closed).Hours())
		if i == 1 {
			s.OFDFailed("ofd: 503 Service Unavailable", tm.At)
			continue
		}
		if _, err := s.OFDAnswer(nil, tm.At); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(requests, []float64{144, 168, 192}) {
		t.Errorf("requests at hours %v", requests)
	}
	if s.OFD.Requests != 3 || s.OFD.NotFound != 2 || s.OFD.Failures != 1 {
		t.Errorf("ofd = %+v", s.OFD)
	}
	out := s.Fire(TimerRetention, at(200))
	if out.Final == nil || !slices.Equal(out.Final.Missing, []Source{OFD}) {
		t.Fatalf("final = %+v", out.Final)
	}
}

// TestOFDDocumentFound: the operator's document completes the key.
func TestOFDDocumentFound(t *testing.T) {
	s := New(key, policy)
	mustApply(t, s, part(DWH, "d", 7, 70), at(1))
	mustApply(t, s, part(RMS, "r", 7, 70), at(2))
	if out := s.Fire(TimerOFDRequest, at(144)); !out.RequestOFD {
		t.Fatal("no request on day six")
	}
	doc := part(OFD, "ofd-doc", 7, 70)
	doc.Source = "" // the operator's answer is OFD by definition
	out, err := s.OFDAnswer(&doc, at(144))
	if err != nil {
		t.Fatal(err)
	}
	if out.Final == nil || out.Final.Status != StatusMatched || s.OFD.LastResult != "found" {
		t.Fatalf("final = %+v, ofd %+v", out.Final, s.OFD)
	}
	// An OFD part that arrived while the request was in flight wins.
	s2 := New(key, policy)
	mustApply(t, s2, part(DWH, "d", 7, 70), at(1))
	s2.Fire(TimerOFDRequest, at(144))
	mustApply(t, s2, part(OFD, "o-kafka", 7, 70), at(144.1))
	if out, _ := s2.OFDAnswer(&doc, at(144.2)); out.Applied || s2.Sources[0].EventID != "o-kafka" {
		t.Fatalf("document applied over the part: %+v", out)
	}
}

// TestPartAfterFinalization (docs/requirements.md R-Z-9): the Z-report
// article's aggregate skipped messages after
// completion; reckon publishes a new version instead, never a silent run.
func TestPartAfterFinalization(t *testing.T) {
	s := New(key, policy)
	mustApply(t, s, part(OFD, "o", 7, 70), at(1))
	mustApply(t, s, part(RMS, "r", 7, 70), at(2))
	v1 := s.Fire(TimerRetention, at(720)).Final
	if v1 == nil || v1.Status != StatusIncomplete {
		t.Fatalf("v1 = %+v", v1)
	}
	out := mustApply(t, s, part(DWH, "d", 7, 70), at(721))
	v2 := out.Final
	if v2 == nil || v2.Version != 2 || v2.Status != StatusMatched || out.Changelog != nil {
		t.Fatalf("v2 = %+v", out)
	}
	if !strings.HasPrefix(v2.Reason, "part after finalization") {
		t.Errorf("reason %q", v2.Reason)
	}
	out = mustApply(t, s, part(DWH, "d2", 6, 60), at(722))
	if out.Final == nil || out.Final.Version != 3 || out.Final.Status != StatusMismatched {
		t.Fatalf("v3 = %+v", out.Final)
	}
	if tm, _ := s.NextTimer(); tm.Kind != TimerClose || !tm.At.Equal(at(723)) {
		t.Errorf("close timer = %+v (linger after the last change)", tm)
	}
}

// TestRestoreContinuesVersions: an entity started again after its run
// ended continues from the latest published version.
func TestRestoreContinuesVersions(t *testing.T) {
	s := New(key, policy)
	mustApply(t, s, part(OFD, "o", 7, 70), at(1))
	mustApply(t, s, part(DWH, "d", 7, 70), at(2))
	v1 := mustApply(t, s, part(RMS, "r", 7, 70), at(3)).Final
	b, _ := json.Marshal(v1)
	var back Aggregate
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	r, err := Restore(&back, policy)
	if err != nil {
		t.Fatal(err)
	}
	if out := mustApply(t, r, part(RMS, "r", 7, 70), at(800)); !out.Duplicate {
		t.Fatalf("redelivery of a current part after restore: %+v", out)
	}
	out := mustApply(t, r, part(RMS, "r2", 8, 80), at(801))
	if out.Final == nil || out.Final.Version != 2 || out.Final.Status != StatusMismatched || out.Final.Corrections.RMS != 1 {
		t.Fatalf("after restore: %+v", out.Final)
	}
}

func TestApplyRejects(t *testing.T) {
	s := New(key, policy)
	other := part(OFD, "o", 1, 1)
	other.Shift = 143
	if _, err := s.Apply(other, at(1)); !errors.Is(err, ErrWrongKey) {
		t.Errorf("other key: %v", err)
	}
	bad := part(OFD, "", -1, -1)
	bad.FiscalDrive = "99604403001234567"
	_, err := s.Apply(bad, at(1))
	if !errors.Is(err, ErrInvalidPart) {
		t.Fatalf("bad part: %v", err)
	}
	for _, want := range []string{"event_id", "receipts_count", "total_amount", "fiscal_drive"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if s.Seq != 0 || !s.ShiftClosedAt.IsZero() {
		t.Errorf("state changed: %+v", s)
	}
}

// TestStateJSONRoundTrip: the state crosses continue-as-new as JSON.
func TestStateJSONRoundTrip(t *testing.T) {
	s := New(key, policy)
	mustApply(t, s, part(OFD, "o", 7, 70.25), at(1))
	mustApply(t, s, part(DWH, "d", 7, 70.25), at(2))
	mustApply(t, s, part(DWH, "d2", 7, 70.25), at(3))
	s.Fire(TimerRetention, at(720))
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back State
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, &back) {
		t.Errorf("round trip differs:\n%+v\n%+v", s, &back)
	}
}

func TestKeys(t *testing.T) {
	if got := key.WorkflowID(); got != "zreport/9960440300123456/142" {
		t.Errorf("workflow id %q", got)
	}
	for _, s := range []string{"zreport/9960440300123456/142", "9960440300123456/142"} {
		if k, err := ParseKey(s); err != nil || k != key {
			t.Errorf("ParseKey(%q) = %v, %v", s, k, err)
		}
	}
	for _, s := range []string{"996044030012345/1", "9960440300123456/0", "9960440300123456/x", "../../etc/1", "99604403001234a6/1"} {
		if _, err := ParseKey(s); err == nil {
			t.Errorf("ParseKey(%q) accepted", s)
		}
	}
}

type fields map[string]any

func (f fields) String(p string) (string, bool)  { v, ok := f[p].(string); return v, ok }
func (f fields) Number(p string) (float64, bool) { v, ok := f[p].(float64); return v, ok }

func TestPartOf(t *testing.T) {
	base := fields{"data.fiscal_drive": "9960440300123456", "data.shift": 142.0, "data.receipts": 120.0, "data.total": 78000.5, "data.shift_closed_at": "2026-01-01T23:00:00Z"}
	p, err := PartOf("id-1", TypeDWH, closed, base)
	want := Part{EventID: "id-1", Source: DWH, Key: key, Figures: Figures{120, 78000.5}, ShiftClosedAt: closed, OccurredAt: closed}
	if err != nil || p != want {
		t.Fatalf("PartOf = %+v, %v", p, err)
	}
	long := fields{"data.source": "rms", "data.fiscal_drive": "9960440300123456", "data.shift": 142.0, "data.receipts_count": 120.0, "data.total_amount": 78000.5, "data.shift_closed_at": "2026-01-02T02:00:00+03:00"}
	p, err = PartOf("id-2", TypePart, time.Time{}, long)
	if err != nil || p.Source != RMS || p.Receipts != 120 || !p.ShiftClosedAt.Equal(closed) {
		t.Fatalf("long names: %+v, %v", p, err)
	}
	for name, mod := range map[string]func(fields){
		"fractional shift":  func(f fields) { f["data.shift"] = 1.5 },
		"receipts a string": func(f fields) { f["data.receipts"] = "12" },
		"no close time":     func(f fields) { delete(f, "data.shift_closed_at") },
		"bad close time":    func(f fields) { f["data.shift_closed_at"] = "yesterday" },
	} {
		f := fields{}
		for k, v := range base {
			f[k] = v
		}
		mod(f)
		if _, err := PartOf("id", TypeOFD, closed, f); !errors.Is(err, ErrInvalidPart) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if _, err := PartOf("id", "zreport.pos.computed", closed, base); err == nil {
		t.Error("foreign event type accepted")
	}
}

func permutations(n int) [][]int {
	if n == 1 {
		return [][]int{{0}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(append([]int{}, p[:i]...), n-1), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}

func ExampleState_Apply() {
	s := New(key, Policy{})
	for _, p := range []Part{part(RMS, "r", 3, 30), part(OFD, "o", 3, 30), part(DWH, "d", 2, 20)} {
		out, _ := s.Apply(p, closed.Add(time.Hour))
		if out.Changelog != nil {
			fmt.Println("waiting, missing", out.Changelog.Missing)
		}
		if out.Final != nil {
			fmt.Println(out.Final.Status, "v", out.Final.Version, out.Final.Differences[0].Field)
		}
	}
	// Output:
	// waiting, missing [OFD DWH]
	// waiting, missing [DWH]
	// mismatched v 1 receipts_count
}

// TestRedeliveryIsNotADuplicate: the applied part's own record delivered
// again (same event_id, same origin: the bridge re-reading after a lost
// offset commit) is counted as a redelivery; the same event_id from another
// record (the source sent it twice) is a duplicate.
func TestRedeliveryIsNotADuplicate(t *testing.T) {
	s := New(key, policy)
	p := part(OFD, "ofd-1", 5, 50)
	p.Origin = "zreport-parts/1/40"
	mustApply(t, s, p, at(1))
	if out := mustApply(t, s, p, at(2)); !out.Duplicate || out.Applied {
		t.Fatalf("redelivered record: %+v", out)
	}
	again := p
	again.Origin = "zreport-parts/1/41"
	mustApply(t, s, again, at(3))
	if src := s.Sources[0]; src.Redeliveries != 1 || src.Duplicates != 1 {
		t.Errorf("redeliveries %d duplicates %d, want 1 and 1", src.Redeliveries, src.Duplicates)
	}
}
