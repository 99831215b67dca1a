package ofd

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"reckon/zreport"
)

// answer is an http.RoundTripper that returns one fixed response, so the
// fuzzer reaches Fetch's decoding without a network.
type answer struct {
	status int
	body   []byte
}

func (a answer) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: a.status, Status: http.StatusText(a.status), Body: io.NopCloser(bytes.NewReader(a.body)),
		Header: http.Header{}, Request: r}, nil
}

// FuzzFetch feeds the OFD client's document decoder an operator answer
// (status and body). It must never panic; a document it accepts is for
// the key asked, valid, and found; 404 is "not found" without error; any
// other answer is an *Error whose kind follows the status (408, 429, 5xx
// transient; a bad 200 a bad document; other 4xx a client error), so the
// Z-report workflow retries only what can succeed.
//
//	go test ./zreport/ofd -run '^$' -fuzz '^FuzzFetch$' -fuzztime 60s
func FuzzFetch(f *testing.F) {
	ok := `{"event_id":"e1","fiscal_drive":"9960440300123456","shift":142,"receipts":5,"total":50.5,"shift_closed_at":"2026-01-01T23:00:00Z"}`
	f.Add(200, []byte(ok))
	f.Add(200, []byte(strings.Replace(ok, `"shift":142`, `"shift":143`, 1)))
	f.Add(200, []byte(`{"fiscal_drive":"9960440300123456","shift":142,"receipts":-1,"total":1e309,"shift_closed_at":"x"}`))
	f.Add(200, []byte(`{"fiscal_drive":"9960440300123456","shift":142,"receipts":5,"total":50.5}`))
	f.Add(200, []byte(`[]`))
	f.Add(200, []byte(``))
	f.Add(404, []byte(`not yet`))
	f.Add(429, []byte(``))
	f.Add(503, []byte(`<html>`))
	f.Add(400, []byte(`{"error":"bad"}`))
	key := zreport.Key{FiscalDrive: "9960440300123456", Shift: 142}
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 100 || status > 999 {
			return // net/http never hands out such a status
		}
		c := &Client{BaseURL: "http://ofd.invalid", HTTP: &http.Client{Transport: answer{status, body}}}
		p, found, st, err := c.Fetch(t.Context(), key)
		if st != status {
			t.Fatalf("status %d reported as %d", status, st)
		}
		switch {
		case err == nil && found:
			if status != http.StatusOK {
				t.Fatalf("status %d gave a document", status)
			}
			if p.Key != key || p.Source != zreport.OFD {
				t.Fatalf("document for %v from %s, asked %v", p.Key, p.Source, key)
			}
			if err := p.Validate(); err != nil {
				t.Fatalf("accepted an invalid document: %v", err)
			}
		case err == nil:
			if status != http.StatusNotFound {
				t.Fatalf("status %d: not found without error", status)
			}
		default:
			want := KindClient
			switch {
			case status == http.StatusOK:
				want = KindBadDocument
			case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500:
				want = KindTransient
			}
			if k := KindOf(err); k != want {
				t.Fatalf("status %d: %v is kind %d, want %d", status, err, k, want)
			}
		}
	})
}
