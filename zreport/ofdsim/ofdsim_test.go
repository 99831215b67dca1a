package ofdsim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"reckon/zreport"
	"reckon/zreport/ofd"
)

var key = zreport.Key{FiscalDrive: "9960440300000003", Shift: 9}

func newServer(t *testing.T, o Options) (*Server, string) {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts.URL
}

func get(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return resp.StatusCode, v
}

func TestGetFoundNotFoundBadRequest(t *testing.T) {
	st := NewStore()
	n, skipped, err := st.LoadJSONL(strings.NewReader(`{"event_id":"3f2a0000-0000-4000-8000-0000000000c8","event_type":"zreport.ofd.received","occurred_at":"2026-01-01T23:00:00Z","data":{"fiscal_drive":"9960440300000003","shift":9,"receipts":10,"total":1000,"shift_closed_at":"2026-01-01T23:00:00Z"}}
{"event_id":"x","event_type":"zreport.dwh.computed","occurred_at":"2026-01-01T23:00:00Z","data":{"fiscal_drive":"9960440300000003","shift":9,"receipts":10,"total":1000,"shift_closed_at":"2026-01-01T23:00:00Z"}}
not json
{"fiscal_drive":"9960440300000004","shift":3,"receipts":4,"total":400.5,"shift_closed_at":"2026-01-01T23:00:00Z"}
`))
	if err != nil || n != 2 || skipped != 2 {
		t.Fatalf("LoadJSONL = %d, %d, %v", n, skipped, err)
	}
	s, url := newServer(t, Options{Documents: st})
	code, v := get(t, url+"/v1/zreports/9960440300000003/9")
	if code != 200 || v["event_id"] != "3f2a0000-0000-4000-8000-0000000000c8" || v["receipts"] != 10.0 || v["total"] != 1000.0 {
		t.Errorf("found: %d %v", code, v)
	}
	code, v = get(t, url+"/v1/zreports/9960440300000004/3")
	if code != 200 || v["event_id"] != "ofd-9960440300000004-3" {
		t.Errorf("derived id: %d %v", code, v)
	}
	if code, v := get(t, url+"/v1/zreports/9960440300000005/1"); code != 404 || v["error"] != "not_found" {
		t.Errorf("missing: %d %v", code, v)
	}
	for _, p := range []string{"123/1", "9960440300000003/0", "9960440300000003/x"} {
		if code, _ := get(t, url+"/v1/zreports/"+p); code != 400 {
			t.Errorf("%s: %d", p, code)
		}
	}
	if st := s.Stats(); st.Found != 2 || st.NotFound != 1 || st.BadRequest != 3 {
		t.Errorf("stats = %+v", st)
	}
}

func TestFailFirstThenSucceed(t *testing.T) {
	docs := DocumentsFunc(func(k zreport.Key) (ofd.Document, bool) {
		return ofd.Document{FiscalDrive: k.FiscalDrive, Shift: k.Shift, Receipts: 1, Total: 2, ShiftClosedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, true
	})
	s, url := newServer(t, Options{Documents: docs, FailFirst: 2})
	var codes []int
	for i := 0; i < 3; i++ {
		code, _ := get(t, url+"/v1/zreports/9960440300000003/9")
		codes = append(codes, code)
	}
	if fmt.Sprint(codes) != "[503 503 200]" || s.Requests(key) != 3 {
		t.Errorf("codes %v requests %d", codes, s.Requests(key))
	}
}

func TestMissingAndFailureFractionsAreStable(t *testing.T) {
	all := DocumentsFunc(func(k zreport.Key) (ofd.Document, bool) {
		return ofd.Document{FiscalDrive: k.FiscalDrive, Shift: k.Shift, ShiftClosedAt: time.Unix(0, 0)}, true
	})
	s, url := newServer(t, Options{Documents: all, MissingFraction: 0.3})
	missing := 0
	for sh := 1; sh <= 200; sh++ {
		c1, _ := get(t, fmt.Sprintf("%s/v1/zreports/9960440300000003/%d", url, sh))
		c2, _ := get(t, fmt.Sprintf("%s/v1/zreports/9960440300000003/%d", url, sh))
		if c1 != c2 {
			t.Fatalf("shift %d: %d then %d", sh, c1, c2)
		}
		if c1 == 404 {
			missing++
		}
	}
	if missing < 30 || missing > 90 {
		t.Errorf("missing %d of 200 at fraction 0.3", missing)
	}
	_ = s
	if _, err := New(Options{FailureFraction: 2, Delay: -1}); err == nil || !strings.Contains(err.Error(), "delay") || !strings.Contains(err.Error(), "failure") {
		t.Errorf("Validate: %v", err)
	}
}

func TestPutRegisters(t *testing.T) {
	s, url := newServer(t, Options{})
	body := `{"event_id":"doc-1","receipts":5,"total":55.5,"shift_closed_at":"2026-01-01T23:00:00Z"}`
	req, _ := http.NewRequest(http.MethodPut, url+"/v1/zreports/9960440300000003/9", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 || s.Store().Len() != 1 {
		t.Fatalf("put: %d", resp.StatusCode)
	}
	if code, v := get(t, url+"/v1/zreports/9960440300000003/9"); code != 200 || v["event_id"] != "doc-1" || v["total"] != 55.5 {
		t.Errorf("after put: %d %v", code, v)
	}
}
