// Package ofd is the client of the fiscal data operator (OFD): the
// operator's Z-report document and the HTTP call that fetches it. The
// simulator in package ofdsim serves the same document type; production
// code depends only on this package.
package ofd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"reckon/zreport"
)

// Document is the operator's Z-report for one business key, as the API
// returns it.
type Document struct {
	EventID       string    `json:"event_id,omitempty"`
	FiscalDrive   string    `json:"fiscal_drive"`
	Shift         int64     `json:"shift"`
	Receipts      int64     `json:"receipts"`
	Total         float64   `json:"total"`
	ShiftClosedAt time.Time `json:"shift_closed_at"`
}

// Key returns the document's business key.
func (d Document) Key() zreport.Key { return zreport.Key{FiscalDrive: d.FiscalDrive, Shift: d.Shift} }

// Part converts d into an OFD part; an empty event_id becomes
// "ofd-<fiscal_drive>-<shift>".
func (d Document) Part() zreport.Part {
	id := d.EventID
	if id == "" {
		id = DocumentID(d.Key())
	}
	return zreport.Part{
		EventID: id, Source: zreport.OFD, Key: d.Key(),
		Figures:       zreport.Figures{Receipts: d.Receipts, Total: d.Total},
		ShiftClosedAt: d.ShiftClosedAt.UTC(), Origin: "ofd-api",
	}
}

// DocumentID is the id of a document that has none of its own.
func DocumentID(k zreport.Key) string {
	return "ofd-" + k.FiscalDrive + "-" + strconv.FormatInt(k.Shift, 10)
}

// Kind classifies a failed fetch.
type Kind int

const (
	// KindTransient: network errors, timeouts, 408, 429 and 5xx. Asking again
	// later may succeed.
	KindTransient Kind = iota
	// KindClient: our request is wrong (bad key or URL, a 4xx other than 404,
	// 408, 429). Asking again cannot help.
	KindClient
	// KindBadDocument: the operator answered 200 with a document that cannot
	// be used (undecodable, invalid, or for another key).
	KindBadDocument
)

// Error is a failed fetch with its kind.
type Error struct {
	Kind Kind
	Msg  string
	Err  error
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Err }

// KindOf returns err's kind; errors that are not *Error are KindTransient.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindTransient
}

// Client fetches documents from the operator's API.
type Client struct {
	// BaseURL is the API root; documents are at
	// <BaseURL>/v1/zreports/<fiscal_drive>/<shift>.
	BaseURL string
	// HTTP is the client used; nil means one with a 10 s timeout.
	HTTP *http.Client
}

// Fetch asks the operator for k's Z-report. found is false, without
// error, when the operator answers 404 (not available yet: a business
// answer, not a failure). status is the HTTP status when there was one.
func (c *Client) Fetch(ctx context.Context, k zreport.Key) (doc zreport.Part, found bool, status int, err error) {
	fail := func(kind Kind, err error, format string, a ...any) (zreport.Part, bool, int, error) {
		return zreport.Part{}, false, status, &Error{Kind: kind, Msg: fmt.Sprintf(format, a...), Err: err}
	}
	if err := k.Validate(); err != nil {
		return fail(KindClient, err, "%s", err.Error())
	}
	u, err := url.JoinPath(c.BaseURL, "v1", "zreports", k.FiscalDrive, strconv.FormatInt(k.Shift, 10))
	if err != nil {
		return fail(KindClient, err, "zreport: ofd_url: %v", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fail(KindClient, err, "zreport: ofd request: %v", err)
	}
	req.Header.Set("Accept", "application/json")
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fail(KindTransient, err, "zreport: ofd %s: %v", u, err)
	}
	defer resp.Body.Close()
	status = resp.StatusCode
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fail(KindTransient, err, "zreport: ofd %s: read: %v", u, err)
	}
	switch s := resp.StatusCode; {
	case s == http.StatusOK:
		var d Document
		if err := json.Unmarshal(body, &d); err != nil {
			return fail(KindBadDocument, err, "zreport: ofd document: %v", err)
		}
		p := d.Part()
		if err := p.Validate(); err != nil {
			return fail(KindBadDocument, err, "zreport: ofd document: %v", err)
		}
		if p.Key != k {
			return fail(KindBadDocument, nil, "zreport: ofd answered %s for %s", p.Key, k)
		}
		return p, true, status, nil
	case s == http.StatusNotFound:
		return zreport.Part{}, false, status, nil
	case s == http.StatusRequestTimeout || s == http.StatusTooManyRequests || s >= 500:
		return fail(KindTransient, nil, "zreport: ofd %s: %s", u, resp.Status)
	default:
		return fail(KindClient, nil, "zreport: ofd %s: %s: %.200s", u, resp.Status, body)
	}
}
