package ofdsim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"reckon/zreport"
	"reckon/zreport/ofd"
)

// Documents looks documents up; ok is false when the operator has none.
// Implementations must be safe for concurrent use.
type Documents interface {
	Document(k zreport.Key) (ofd.Document, bool)
}

// DocumentsFunc adapts a function to Documents.
type DocumentsFunc func(zreport.Key) (ofd.Document, bool)

// Document calls f.
func (f DocumentsFunc) Document(k zreport.Key) (ofd.Document, bool) { return f(k) }

// Chain asks each Documents in turn.
type Chain []Documents

// Document returns the first answer found.
func (c Chain) Document(k zreport.Key) (ofd.Document, bool) {
	for _, d := range c {
		if d == nil {
			continue
		}
		if doc, ok := d.Document(k); ok {
			return doc, true
		}
	}
	return ofd.Document{}, false
}

// Store is an in-memory set of documents, safe for concurrent use.
type Store struct {
	mu   sync.RWMutex // protects docs
	docs map[zreport.Key]ofd.Document
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{docs: map[zreport.Key]ofd.Document{}} }

// Put adds or replaces d.
func (s *Store) Put(d ofd.Document) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.docs[d.Key()] = d
}

// Document implements Documents.
func (s *Store) Document(k zreport.Key) (ofd.Document, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d, ok := s.docs[k]
	return d, ok
}

// Len returns the number of documents.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.docs)
}

// LoadJSONL reads documents, one JSON object per line: Z-report part
// envelopes (only valid OFD parts are kept: zreport.ofd.received, or
// zreport.part.received with data.source OFD) or bare Documents. Other
// lines — DWH/RMS parts, poison records of a generator's output — are
// skipped and counted. It fails only on a read error.
func (s *Store) LoadJSONL(r io.Reader) (stored, skipped int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if d, ok := parseDocument(b); ok {
			s.Put(d)
			stored++
		} else {
			skipped++
		}
	}
	if err := sc.Err(); err != nil {
		return stored, skipped, fmt.Errorf("ofdsim: read documents: %w", err)
	}
	return stored, skipped, nil
}

func parseDocument(b []byte) (ofd.Document, bool) {
	var probe struct {
		EventType string `json:"event_type"`
	}
	if json.Unmarshal(b, &probe) != nil {
		return ofd.Document{}, false
	}
	var d ofd.Document
	if probe.EventType != "" {
		p, _, err := zreport.ParseLine(b)
		if err != nil || p.Source != zreport.OFD {
			return ofd.Document{}, false
		}
		d = ofd.Document{EventID: p.EventID, FiscalDrive: p.FiscalDrive, Shift: p.Shift, Receipts: p.Receipts, Total: p.Total,
			ShiftClosedAt: p.ShiftClosedAt}
	} else if json.Unmarshal(b, &d) != nil {
		return ofd.Document{}, false
	}
	return d, d.Part().Validate() == nil
}

// Options configure a Server. The zero value serves only documents PUT to
// it, immediately, without failures.
type Options struct {
	// Documents answers lookups after the documents PUT over HTTP. Nil: none.
	Documents Documents
	// Delay before every answer (honouring the request's cancellation).
	// Default 0.
	Delay time.Duration
	// MissingFraction of business keys are never found (404), by a hash of
	// the key. Default 0.
	MissingFraction float64
	// FailFirst: the first FailFirst requests for each key are answered 503.
	// Default 0.
	FailFirst int
	// FailureFraction of the remaining requests are answered 503, by a hash
	// of the key and the request's number. Default 0.
	FailureFraction float64
}

// Validate reports every problem at once.
func (o Options) Validate() error {
	var errs []error
	if o.Delay < 0 {
		errs = append(errs, errors.New("ofdsim: delay must not be negative"))
	}
	if !(o.MissingFraction >= 0 && o.MissingFraction <= 1) {
		errs = append(errs, fmt.Errorf("ofdsim: missing fraction %v is not in [0, 1]", o.MissingFraction))
	}
	if !(o.FailureFraction >= 0 && o.FailureFraction <= 1) {
		errs = append(errs, fmt.Errorf("ofdsim: failure fraction %v is not in [0, 1]", o.FailureFraction))
	}
	if o.FailFirst < 0 {
		errs = append(errs, errors.New("ofdsim: fail first must not be negative"))
	}
	return errors.Join(errs...)
}

// Stats counts answers by status.
type Stats struct {
	Found, NotFound, Failed, BadRequest, Registered int64
}

// Server is the simulated operator. Its handler is safe for concurrent use.
type Server struct {
	opts Options
	put  *Store

	mu       sync.Mutex // protects requests and stats
	requests map[zreport.Key]int
	stats    Stats
}

// New returns a server for opts.
func New(opts Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Server{opts: opts, put: NewStore(), requests: map[zreport.Key]int{}}, nil
}

// Store returns the store of documents registered over HTTP; Put on it
// works the same.
func (s *Server) Store() *Store { return s.put }

// Stats returns the answers so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Requests returns how many GETs key k has had.
func (s *Server) Requests(k zreport.Key) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[k]
}

// Handler returns the HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/zreports/{fiscal_drive}/{shift}", s.get)
	mux.HandleFunc("PUT /v1/zreports/{fiscal_drive}/{shift}", s.putDoc)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	return mux
}

func keyOf(r *http.Request) (zreport.Key, error) {
	sh, err := strconv.ParseInt(r.PathValue("shift"), 10, 64)
	if err != nil {
		return zreport.Key{}, fmt.Errorf("shift %q is not an integer", r.PathValue("shift"))
	}
	k := zreport.Key{FiscalDrive: r.PathValue("fiscal_drive"), Shift: sh}
	return k, k.Validate()
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	k, err := keyOf(r)
	if err != nil {
		s.count(func(st *Stats) { st.BadRequest++ })
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad_request", "message": err.Error()})
		return
	}
	s.mu.Lock()
	s.requests[k]++
	n := s.requests[k]
	s.mu.Unlock()
	if s.opts.Delay > 0 {
		t := time.NewTimer(s.opts.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if n <= s.opts.FailFirst || fraction(k.String()+"#"+strconv.Itoa(n)) < s.opts.FailureFraction {
		s.count(func(st *Stats) { st.Failed++ })
		writeJSON(w, http.StatusServiceUnavailable,
			map[string]string{"error": "unavailable", "message": "simulated operator failure"})
		return
	}
	doc, ok := s.lookup(k)
	if !ok {
		s.count(func(st *Stats) { st.NotFound++ })
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not_found"})
		return
	}
	if doc.EventID == "" {
		doc.EventID = ofd.DocumentID(k)
	}
	s.count(func(st *Stats) { st.Found++ })
	writeJSON(w, http.StatusOK, doc)
}

func (s *Server) lookup(k zreport.Key) (ofd.Document, bool) {
	if d, ok := s.put.Document(k); ok {
		return d, true
	}
	if s.opts.MissingFraction > 0 && fraction(k.String()) < s.opts.MissingFraction {
		return ofd.Document{}, false
	}
	if s.opts.Documents == nil {
		return ofd.Document{}, false
	}
	return s.opts.Documents.Document(k)
}

func (s *Server) putDoc(w http.ResponseWriter, r *http.Request) {
	k, err := keyOf(r)
	var d ofd.Document
	if err == nil {
		err = json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&d)
	}
	if err == nil {
		d.FiscalDrive, d.Shift = k.FiscalDrive, k.Shift
		err = d.Part().Validate()
	}
	if err != nil {
		s.count(func(st *Stats) { st.BadRequest++ })
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad_request", "message": err.Error()})
		return
	}
	s.put.Put(d)
	s.count(func(st *Stats) { st.Registered++ })
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) count(f func(*Stats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.stats)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// fraction maps s to [0, 1) by hash: stable across runs and machines.
func fraction(s string) float64 {
	h := fnv.New64a()
	io.WriteString(h, s)
	return float64(h.Sum64()>>11) / math.Exp2(53)
}

// ListenAndServe serves h on addr until ctx ends, then shuts down within 5s.
func ListenAndServe(ctx context.Context, srv *http.Server) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	}
}
