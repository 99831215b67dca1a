package streaming

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The lookups' HTTP side (ADR 0040): requests, answers and errors, the
// GET and POST handlers, and forwarding to the owner of a partition.

// lookupAnswer is one key's answer.
type lookupAnswer struct {
	Stream    string         `json:"stream"`
	Key       string         `json:"key"`
	AsOf      time.Time      `json:"as_of"`
	Watermark *time.Time     `json:"watermark"` // null before the partition's first record
	Known     bool           `json:"known"`
	Features  map[string]any `json:"features"`
}

type batchRequest struct {
	Keys []string `json:"keys"`
	// At is the instant of the answers (RFC 3339); default now.
	At string `json:"at,omitempty"`
}

type batchAnswer struct {
	Stream  string         `json:"stream"`
	AsOf    time.Time      `json:"as_of"`
	Results []lookupAnswer `json:"results"`
}

// lookupError is an answer other than 200: the status, a reason and, for
// 503, when to try again.
type lookupError struct {
	status int
	msg    string
}

func (e *lookupError) Error() string { return e.msg }

func bad(format string, a ...any) *lookupError {
	return &lookupError{http.StatusBadRequest, fmt.Sprintf(format, a...)}
}

func unavailable(format string, a ...any) *lookupError {
	return &lookupError{http.StatusServiceUnavailable, fmt.Sprintf(format, a...)}
}

func (l *lookups) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/features/{stream}/{key}", l.serveGet)
	mux.HandleFunc("/v1/features/{stream}", l.servePost)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		l.fail(w, "-", &lookupError{http.StatusNotFound,
			"no such path: lookups are GET /v1/features/<stream>/<key> and POST /v1/features/<stream>"})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l.token != "" && !l.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="reckon"`)
			l.fail(w, "-", &lookupError{http.StatusUnauthorized, "missing or wrong bearer token (stream_worker.serve_auth)"})
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func (l *lookups) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(tok), []byte(l.token)) == 1
}

// fail writes a JSON error and counts it.
func (l *lookups) fail(w http.ResponseWriter, stream string, e *lookupError) {
	if e.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	b, _ := json.Marshal(map[string]string{"error": e.msg})
	_, _ = w.Write(append(b, '\n'))
	l.count(w, stream, e.status)
}

// count counts an answer written to the client: a part of a POST kept in
// a recorder is counted once, when the merged answer is written.
func (l *lookups) count(w http.ResponseWriter, stream string, status int) {
	if _, part := w.(*recorder); !part {
		l.counter.With(stream, strconv.Itoa(status)).Add(1)
	}
}

func (l *lookups) ok(w http.ResponseWriter, stream, servedBy string, v any) {
	b, err := json.Marshal(v)
	if err != nil { // cannot happen: strings, numbers, times
		l.fail(w, stream, &lookupError{http.StatusInternalServerError, err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(headerServedBy, servedBy)
	_, _ = w.Write(append(b, '\n'))
	l.count(w, stream, http.StatusOK)
}

// request resolves the stream and the instant of a request.
func (l *lookups) request(stream, at string) (*lookupStream, time.Time, *lookupError) {
	st := l.streams[stream]
	if st == nil {
		return nil, time.Time{}, &lookupError{http.StatusNotFound, fmt.Sprintf("unknown stream %q", stream)}
	}
	if !st.rolling {
		return nil, time.Time{}, &lookupError{http.StatusNotFound,
			fmt.Sprintf("stream %q has no rolling features (its rolling size is 0)", stream)}
	}
	if at == "" {
		return st, l.now().UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return nil, time.Time{}, bad("at: %q is not an RFC 3339 time", at)
	}
	return st, t.UTC(), nil
}

func (st *lookupStream) checkKey(key string) *lookupError {
	switch limit := st.maxLen; {
	case key == "":
		return bad("key: empty")
	case limit == 0 && len(key) > maxLookupKeyBytes:
		return bad("key: %d bytes, longer than the %d a lookup accepts", len(key), maxLookupKeyBytes)
	case limit > 0 && len(key) > limit:
		return bad("key: %d bytes, longer than the gate's max_len %d for %s", len(key), limit, st.keyField)
	case st.re != nil && !st.re.MatchString(key):
		return bad("key: %d bytes, does not match the gate's pattern %s for %s", len(key), st.pattern, st.keyField)
	}
	return nil
}

func (l *lookups) serveGet(w http.ResponseWriter, r *http.Request) {
	stream := r.PathValue("stream")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET")
		l.fail(w, label(l, stream), &lookupError{http.StatusMethodNotAllowed,
			"method " + r.Method + ": a key is looked up with GET"})
		return
	}
	st, at, e := l.request(stream, r.URL.Query().Get("at"))
	if e != nil {
		l.fail(w, label(l, stream), e)
		return
	}
	key := r.PathValue("key")
	if e := st.checkKey(key); e != nil {
		l.fail(w, st.name, e)
		return
	}
	forwarded := r.Header.Get(headerForwarded) != ""
	p, e := l.partitionOf(r.Context(), st.topic, key)
	if e != nil {
		l.fail(w, st.name, e)
		return
	}
	a, local, e := l.local(st, p, key, at)
	switch {
	case e != nil:
		l.fail(w, st.name, e)
	case local:
		l.ok(w, st.name, l.advertised(), a)
	case forwarded:
		l.fail(w, st.name, unavailable("partition %d of %s is moving: this worker does not own it", p, st.topic))
	default:
		l.forwardGet(w, r, st, p, key, at)
	}
}

func label(l *lookups, stream string) string {
	if l.streams[stream] != nil {
		return stream
	}
	return "-"
}

// local answers key from this worker's copy of partition p: local is
// false when the worker does not own p.
func (l *lookups) local(st *lookupStream, p int32, key string, at time.Time) (lookupAnswer, bool, *lookupError) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	pl := l.parts[tp{st.topic, p}]
	if pl == nil {
		return lookupAnswer{}, false, nil
	}
	lk := pl.by[st.name]
	if !pl.serving || lk == nil {
		return lookupAnswer{}, true, unavailable("partition %d of %s is being restored on this worker; try again",
			p, st.topic)
	}
	res, err := lk.At(key, at)
	if err != nil {
		return lookupAnswer{}, true, &lookupError{http.StatusUnprocessableEntity,
			fmt.Sprintf("at %s: %v (watermark %s minus the allowed lateness)", at.Format(time.RFC3339Nano), err,
				res.Watermark.Format(time.RFC3339Nano))}
	}
	a := lookupAnswer{Stream: st.name, Key: key, AsOf: at, Known: res.Known,
		Features: map[string]any{"count": res.Agg.Count, "sum": res.Agg.Sum}}
	if res.HasWatermark {
		wm := res.Watermark
		a.Watermark = &wm
	}
	return a, true, nil
}

// owner is the advertised address of partition p's owner, from the
// progress records.
func (l *lookups) owner(st *lookupStream, p int32) (string, *lookupError) {
	pr, ok := l.view.Get(st.name, st.topic, p)
	switch {
	case !ok || pr.Serve == "":
		return "", unavailable("partition %d of %s: no owner serving lookups is known yet", p, st.topic)
	case pr.Serve == l.advertised():
		return "", unavailable("partition %d of %s is moving: it left this worker and its new owner has not committed yet",
			p, st.topic)
	}
	return pr.Serve, nil
}

func (l *lookups) forwardGet(w http.ResponseWriter, r *http.Request, st *lookupStream, p int32, key string,
	at time.Time) {
	to, e := l.owner(st, p)
	if e != nil {
		l.fail(w, st.name, e)
		return
	}
	u := l.scheme + "://" + to + "/v1/features/" + url.PathEscape(st.name) + "/" + url.PathEscape(key) +
		"?at=" + url.QueryEscape(at.Format(time.RFC3339Nano))
	l.forward(w, r.Context(), st, http.MethodGet, u, nil, to)
}

// forward relays a lookup to the owner's worker and its answer back.
func (l *lookups) forward(w http.ResponseWriter, ctx context.Context, st *lookupStream, method, u string, body []byte,
	to string) {
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		l.fail(w, st.name, &lookupError{http.StatusInternalServerError, err.Error()})
		return
	}
	req.Header.Set(headerForwarded, l.advertised())
	if l.token != "" {
		req.Header.Set("Authorization", "Bearer "+l.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := l.client.Do(req)
	if err != nil {
		l.fail(w, st.name, unavailable("the owner of the key's partition at %s does not answer: %v", to, err))
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		l.fail(w, st.name, unavailable("the owner at %s: %v", to, err))
		return
	}
	for _, h := range []string{"Content-Type", "Retry-After", headerServedBy} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(b)
	l.count(w, st.name, resp.StatusCode)
}

func (l *lookups) servePost(w http.ResponseWriter, r *http.Request) {
	stream := r.PathValue("stream")
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		l.fail(w, label(l, stream), &lookupError{http.StatusMethodNotAllowed,
			"method " + r.Method + ": keys are looked up with POST {\"keys\": [...]}, one key with GET .../<key>"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		l.fail(w, label(l, stream), &lookupError{http.StatusRequestEntityTooLarge, "body: " + err.Error()})
		return
	}
	var req batchRequest
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		l.fail(w, label(l, stream), bad("body: malformed JSON: %v (want {\"keys\": [\"...\"]})", err))
		return
	}
	st, at, e := l.request(stream, req.At)
	if e != nil {
		l.fail(w, label(l, stream), e)
		return
	}
	switch {
	case len(req.Keys) == 0:
		l.fail(w, st.name, bad("keys: none given"))
		return
	case len(req.Keys) > MaxLookupKeys:
		l.fail(w, st.name, bad("keys: %d, more than the %d one request may look up", len(req.Keys), MaxLookupKeys))
		return
	}
	for i, k := range req.Keys {
		if e := st.checkKey(k); e != nil {
			e.msg = fmt.Sprintf("keys[%d]: %s", i, strings.TrimPrefix(e.msg, "key: "))
			l.fail(w, st.name, e)
			return
		}
	}
	forwarded := r.Header.Get(headerForwarded) != ""
	out := batchAnswer{Stream: st.name, AsOf: at, Results: make([]lookupAnswer, len(req.Keys))}
	remote := map[string][]int{} // owner -> indexes of its keys
	for i, k := range req.Keys {
		p, e := l.partitionOf(r.Context(), st.topic, k)
		if e != nil {
			l.fail(w, st.name, e)
			return
		}
		a, local, e := l.local(st, p, k, at)
		switch {
		case e != nil:
			l.fail(w, st.name, e)
			return
		case local:
			out.Results[i] = a
			continue
		case forwarded:
			l.fail(w, st.name, unavailable("partition %d of %s is moving: this worker does not own it", p, st.topic))
			return
		}
		to, e := l.owner(st, p)
		if e != nil {
			l.fail(w, st.name, e)
			return
		}
		remote[to] = append(remote[to], i)
	}
	for to, idx := range remote {
		keys := make([]string, len(idx))
		for j, i := range idx {
			keys[j] = req.Keys[i]
		}
		b, _ := json.Marshal(batchRequest{Keys: keys, At: at.Format(time.RFC3339Nano)})
		rec := &recorder{h: http.Header{}}
		l.forward(rec, r.Context(), st, http.MethodPost, l.scheme+"://"+to+"/v1/features/"+url.PathEscape(st.name), b, to)
		if rec.status != http.StatusOK {
			for k, v := range rec.h {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.status)
			_, _ = w.Write(rec.body)
			return
		}
		var sub batchAnswer
		if err := json.Unmarshal(rec.body, &sub); err != nil || len(sub.Results) != len(idx) {
			l.fail(w, st.name, unavailable("the owner at %s answered %d results for %d keys (%v)",
				to, len(sub.Results), len(idx), err))
			return
		}
		for j, i := range idx {
			out.Results[i] = sub.Results[j]
		}
	}
	l.ok(w, st.name, l.advertised(), out)
}

// recorder keeps a forwarded answer for merging.
type recorder struct {
	h      http.Header
	status int
	body   []byte
}

func (r *recorder) Header() http.Header { return r.h }
func (r *recorder) WriteHeader(s int)   { r.status = s }
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.body = append(r.body, b...)
	return len(b), nil
}
