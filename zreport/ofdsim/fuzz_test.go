package ofdsim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reckon/zreport/ofd"
	"strconv"
	"testing"
)

// FuzzLoadJSONL feeds the OFD documents decoder (`reckon zreport ofd-sim
// --documents`, zreport.ofd_sim_documents) arbitrary JSONL. It never
// fails on content; every non-blank line is stored or skipped exactly
// once; every stored document is a valid OFD part, is what the simulator
// serves for its key over HTTP, and loads back unchanged when written as a
// bare document line.
//
//	go test ./zreport/ofdsim -run '^$' -fuzz '^FuzzLoadJSONL$' -fuzztime 60s
func FuzzLoadJSONL(f *testing.F) {
	for _, name := range []string{"simulate_ofd.jsonl", "simulate_parts.jsonl"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"fiscal_drive":"9960440300000003","shift":9,"receipts":10,"total":1000.5,"shift_closed_at":"2026-01-01T23:00:00+03:00"}` + "\n\n" +
		`{"event_id":"e","fiscal_drive":"9960440300000003","shift":9,"receipts":-1,"total":1,"shift_closed_at":"2026-01-01T23:00:00Z"}` + "\r\n" +
		`{"event_type":"zreport.part.received","event_id":"p","data":{"source":"ofd","fiscal_drive":"9960440300000004","shift":1,"receipts_count":1,"total_amount":2,"shift_closed_at":"2026-01-01T23:00:00Z"}}` + "\n" +
		`[1,2]` + "\n" + `null` + "\n" + `{"event_type":5}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s := NewStore()
		stored, skipped, err := s.LoadJSONL(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("LoadJSONL failed on content: %v", err)
		}
		var lines int
		for l := range bytes.SplitSeq(b, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 {
				lines++
			}
		}
		if stored+skipped != lines {
			t.Fatalf("%d lines, %d stored + %d skipped", lines, stored, skipped)
		}
		if s.Len() > stored {
			t.Fatalf("%d documents from %d stored lines", s.Len(), stored)
		}
		srv, err := New(Options{Documents: s})
		if err != nil {
			t.Fatal(err)
		}
		h := srv.Handler()
		s.mu.RLock()
		docs := make([]ofd.Document, 0, len(s.docs))
		for _, d := range s.docs {
			docs = append(docs, d)
		}
		s.mu.RUnlock()
		for _, d := range docs {
			if err := d.Part().Validate(); err != nil {
				t.Fatalf("stored an invalid document %+v: %v", d, err)
			}
			line, err := json.Marshal(d)
			if err != nil {
				t.Fatalf("marshal %+v: %v", d, err)
			}
			back, ok := parseDocument(line)
			if !ok || !sameDoc(back, d) {
				t.Fatalf("document line %s loads as %+v (%v), want %+v", line, back, ok, d)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/zreports/"+url.PathEscape(d.FiscalDrive)+"/"+itoa(d.Shift), nil))
			var got ofd.Document
			if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &got) != nil {
				t.Fatalf("GET %v: %d %s", d.Key(), rec.Code, rec.Body.Bytes())
			}
			if want := d.Part(); got.Key() != d.Key() || got.Receipts != d.Receipts || got.Total != d.Total ||
				!got.ShiftClosedAt.Equal(d.ShiftClosedAt) || got.EventID != want.EventID {
				t.Fatalf("GET %v served %+v, stored %+v", d.Key(), got, d)
			}
		}
	})
}

// FuzzPut registers a document over HTTP: a request is either refused
// (400, or the mux's answer to a path it cleans) and leaves nothing behind, or answered 204, after which GET
// serves a valid document for exactly the key of the path.
//
//	go test ./zreport/ofdsim -run '^$' -fuzz '^FuzzPut$' -fuzztime 60s
func FuzzPut(f *testing.F) {
	f.Add("9960440300000003", "9", []byte(`{"receipts":10,"total":1000,"shift_closed_at":"2026-01-01T23:00:00Z"}`))
	f.Add("9960440300000003", "+9", []byte(`{"fiscal_drive":"0000000000000000","shift":1,"receipts":10,"total":1e400,"shift_closed_at":"2026-01-01T23:00:00Z"}`))
	f.Add("../../etc", "1", []byte(`{}`))
	f.Add("9960440300000003", "1", []byte(`{"receipts":1,"total":-0,"shift_closed_at":"0001-01-01T00:00:00Z"} trailing`))
	f.Fuzz(func(t *testing.T, drive, shift string, body []byte) {
		srv, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		h := srv.Handler()
		path := "/v1/zreports/" + url.PathEscape(drive) + "/" + url.PathEscape(shift)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPut, path, bytes.NewReader(body)))
		switch {
		case rec.Code == http.StatusNoContent:
		case rec.Code >= 500:
			t.Fatalf("PUT %s: status %d %s", path, rec.Code, rec.Body.Bytes())
		default: // 400, or the mux's 404/405/redirect for a path it cleans
			if srv.Store().Len() != 0 {
				t.Fatalf("refused PUT (%d) stored a document", rec.Code)
			}
			return
		}
		if srv.Store().Len() != 1 {
			t.Fatalf("PUT answered 204 but stored %d documents", srv.Store().Len())
		}
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var got ofd.Document
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &got) != nil {
			t.Fatalf("GET after PUT: %d %s", rec.Code, rec.Body.Bytes())
		}
		if n, err := strconv.ParseInt(shift, 10, 64); err != nil || got.FiscalDrive != drive || got.Shift != n {
			t.Fatalf("PUT %q/%q served %v", drive, shift, got.Key())
		}
		if err := got.Part().Validate(); err != nil {
			t.Fatalf("served an invalid document %+v: %v", got, err)
		}
	})
}

func sameDoc(a, b ofd.Document) bool {
	return a.EventID == b.EventID && a.Key() == b.Key() && a.Receipts == b.Receipts && a.Total == b.Total && a.ShiftClosedAt.Equal(b.ShiftClosedAt)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
