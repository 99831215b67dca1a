package streaming

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
	"reckon/internal/metrics"
	"reckon/internal/testing/testpki"
	"reckon/streaming/operator"
	"reckon/streaming/progress"
)

// TestKeyPartitionIsKafkas: the lookup finds a key's partition as Kafka's
// default partitioner (franz-go's, Java's) placed the key's records.
func TestKeyPartitionIsKafkas(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 5000 {
		key := make([]byte, rng.IntN(70))
		for j := range key {
			key[j] = byte(rng.IntN(256))
		}
		n := 1 + rng.IntN(64)
		want := kgo.StickyKeyPartitioner(nil).ForTopic("t").Partition(&kgo.Record{Key: key}, n)
		if got := KeyPartition(key, int32(n)); int(got) != want {
			t.Fatalf("key %d %q of %d partitions: %d, kgo %d", i, key, n, got, want)
		}
	}
}

// lookupClient asks a worker's lookups.
type lookupClient struct {
	base  string
	hc    *http.Client
	token string
}

type lookupReply struct {
	status   int
	body     string
	ans      lookupAnswer
	batch    batchAnswer
	errMsg   string
	retry    string
	servedBy string
}

func (c lookupClient) do(t testing.TB, method, path string, body []byte) lookupReply {
	t.Helper()
	r, err := c.try(method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (c lookupClient) try(method, path string, body []byte) (lookupReply, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return lookupReply{}, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return lookupReply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return lookupReply{}, err
	}
	r := lookupReply{status: resp.StatusCode, body: string(b), retry: resp.Header.Get("Retry-After"),
		servedBy: resp.Header.Get(headerServedBy)}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		return r, fmt.Errorf("%s %s: content type %q, body %s", method, path, ct, b)
	}
	if r.status == http.StatusOK {
		if method == http.MethodPost {
			err = json.Unmarshal(b, &r.batch)
		} else {
			err = json.Unmarshal(b, &r.ans)
		}
	} else {
		var e struct{ Error string }
		err = json.Unmarshal(b, &e)
		r.errMsg = e.Error
		if err == nil && e.Error == "" {
			err = fmt.Errorf("%s %s: %d without an error message: %s", method, path, r.status, b)
		}
	}
	return r, err
}

func (c lookupClient) get(t testing.TB, stream, key string, at time.Time) lookupReply {
	t.Helper()
	return c.do(t, http.MethodGet, keyPath(stream, key, at), nil)
}

func keyPath(stream, key string, at time.Time) string {
	p := "/v1/features/" + url.PathEscape(stream) + "/" + url.PathEscape(key)
	if !at.IsZero() {
		p += "?at=" + url.QueryEscape(at.Format(time.RFC3339Nano))
	}
	return p
}

// startLookupWorker runs a worker in process with lookups on a free
// loopback port; it stops with the test.
func startLookupWorker(t *testing.T, cfg *config.Config, reg *metrics.Registry) (*Worker, string) {
	t.Helper()
	w, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	addr := w.LookupAddr(ctx)
	if addr == "" {
		t.Fatal("lookups did not start")
	}
	return w, addr
}

// accepted is every event the committed features say the stream counted
// for rolling features, per key, with its source offset.
type acceptedEvent struct {
	rec    operator.Record
	offset int64
}

func acceptedByKey(t *testing.T, cfg *config.Config, recs []*kgo.Record) map[string][]acceptedEvent {
	t.Helper()
	values := map[string]float64{}
	for _, r := range recs {
		var e struct {
			EventID string `json:"event_id"`
			Data    struct {
				Amount *float64 `json:"amount"`
			} `json:"data"`
		}
		if json.Unmarshal(r.Value, &e) == nil && e.Data.Amount != nil {
			values[e.EventID] = *e.Data.Amount
		}
	}
	out := map[string][]acceptedEvent{}
	read(t, cfg, cfg.Topics.Features, func(r *kgo.Record) {
		var f event.Feature
		if err := json.Unmarshal(r.Value, &f); err != nil {
			t.Fatal(err)
		}
		v, ok := values[f.EventID]
		if !ok {
			t.Fatalf("feature of event %s, not one produced", f.EventID)
		}
		out[f.Key] = append(out[f.Key], acceptedEvent{operator.Record{Key: f.Key, EventTime: f.EventTime, Value: v}, f.SourceOffset})
	})
	for k := range out {
		slices.SortFunc(out[k], func(a, b acceptedEvent) int { return int(a.offset - b.offset) })
	}
	return out
}

func records(es []acceptedEvent) []operator.Record {
	out := make([]operator.Record, len(es))
	for i, e := range es {
		out[i] = e.rec
	}
	return out
}

// payments returns the test config's payments stream.
func payments(t testing.TB, cfg *config.Config) config.Stream {
	t.Helper()
	for _, s := range cfg.Streams {
		if s.Name == "payments" {
			return s
		}
	}
	t.Fatal("no payments stream")
	return config.Stream{}
}

// checkAllKeys looks every key up at instants around the end of the
// traffic and compares with RollingTruth over the accepted events; it
// returns how many answers were non-empty.
func checkAllKeys(t *testing.T, c lookupClient, s config.Stream, acc map[string][]acceptedEvent, wm time.Time) int {
	t.Helper()
	nonEmpty := 0
	keys := append(slices.Sorted(func(yield func(string) bool) {
		for k := range acc {
			if !yield(k) {
				return
			}
		}
	}), "nobody-at-all")
	for _, at := range []time.Time{wm.Add(-s.AllowedLateness), wm.Add(-s.AllowedLateness / 2), wm, wm.Add(30 * time.Second)} {
		for _, k := range keys {
			r := c.get(t, s.Name, k, at)
			if r.status != http.StatusOK {
				t.Fatalf("%s at %v: %d %s", k, at, r.status, r.body)
			}
			want := operator.RollingTruth(s.Rolling, at, records(acc[k]))
			got := r.ans.Features
			if fmt.Sprint(got["count"]) != fmt.Sprint(want.Count) || got["sum"] != want.Sum {
				t.Fatalf("%s at %v: lookup %v, RollingTruth over the accepted events %d/%g", k, at, got, want.Count, want.Sum)
			}
			// Known: the key has events in the live state (older ones are
			// pruned), so at least when the window counts any.
			if want.Count > 0 && !r.ans.Known || len(acc[k]) == 0 && r.ans.Known || r.ans.Stream != s.Name || r.ans.Key != k || !r.ans.AsOf.Equal(at) {
				t.Fatalf("%s at %v: answer %+v", k, at, r.ans)
			}
			if want.Count > 0 {
				nonEmpty++
			}
		}
	}
	return nonEmpty
}

// TestLookupBadInput (R-LOOK-4): every kind of bad request gets a 4xx
// with a JSON error naming the problem, counted on
// reckon_stream_lookups_total; a client that stops sending is cut off;
// the worker keeps answering.
func TestLookupBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	cfg, recs := newTestEnv(t, 300)
	cfg.Stream.ServeAddr = "127.0.0.1:0"
	produce(t, cfg, recs)
	reg := metrics.NewRegistry()
	_, addr := startLookupWorker(t, cfg, reg)
	waitDone(t, cfg, time.Minute)
	c := lookupClient{base: "http://" + addr, hc: &http.Client{Timeout: 10 * time.Second}}
	keys := func(n int) []byte {
		ks := make([]string, n)
		for i := range ks {
			ks[i] = fmt.Sprint("user", i)
		}
		b, _ := json.Marshal(map[string]any{"keys": ks})
		return b
	}
	type badCase struct {
		method, path string
		body         []byte
		status       int
		names        string
	}
	cases := []badCase{
		{"GET", "/v1/features/nosuch/Putri", nil, 404, `unknown stream "nosuch"`},
		{"GET", "/v1/features/suhu/sensor-01", nil, 404, "no rolling features"},
		{"GET", "/v1/features/payments/" + strings.Repeat("a", 65), nil, 400, "65 bytes, does not match the gate's pattern"},
		{"GET", "/v1/features/payments/" + strings.Repeat("a", 5000), nil, 400, "5000 bytes"},
		{"GET", "/v1/features/payments/bad%2Fkey", nil, 400, "does not match the gate's pattern"},
		{"GET", "/v1/features/payments/Putri?at=yesterday", nil, 400, `at: "yesterday" is not an RFC 3339 time`},
		{"GET", "/v1/features/payments/Putri?at=2000-01-01T00:00:00Z", nil, 422, "before what the live state holds"},
		{"DELETE", "/v1/features/payments/Putri", nil, 405, "looked up with GET"},
		{"GET", "/v1/features/payments", nil, 405, "POST"},
		{"GET", "/v2/nothing", nil, 404, "no such path"},
		{"POST", "/v1/features/payments", []byte(`{"keys": ["a",`), 400, "malformed JSON"},
		{"POST", "/v1/features/payments", []byte(`{"keys": "Putri"}`), 400, "malformed JSON"},
		{"POST", "/v1/features/payments", []byte(`{"kees": ["Putri"]}`), 400, "malformed JSON"},
		{"POST", "/v1/features/payments", []byte(`{"keys": []}`), 400, "keys: none given"},
		{"POST", "/v1/features/payments", keys(101), 400, "keys: 101, more than the 100"},
		{"POST", "/v1/features/payments", []byte(`{"keys": ["ok", "not ok"]}`), 400, "keys[1]: 6 bytes, does not match"},
		{"POST", "/v1/features/nosuch", keys(1), 404, "unknown stream"},
		{"POST", "/v1/features/payments", bytes.Repeat([]byte(" "), 2<<20), 413, "body"},
	}
	counted := map[string]int{}
	for _, tc := range cases {
		r := c.do(t, tc.method, tc.path, tc.body)
		stream := "-"
		for _, s := range cfg.Streams {
			if strings.HasPrefix(tc.path, "/v1/features/"+s.Name) {
				stream = s.Name
			}
		}
		counted[fmt.Sprintf(`reckon_stream_lookups_total{stream=%q,code="%d"}`, stream, tc.status)]++
		if r.status != tc.status || !strings.Contains(r.errMsg, tc.names) {
			t.Errorf("%s %.80s: %d %q, want %d naming %q", tc.method, tc.path, r.status, r.errMsg, tc.status, tc.names)
		}
	}
	// Good requests still answer: one key and 100.
	if r := c.get(t, "payments", "Putri", time.Time{}); r.status != 200 || r.ans.Features["count"] == nil {
		t.Errorf("a good lookup after the bad ones: %d %s", r.status, r.body)
	}
	if r := c.do(t, "POST", "/v1/features/payments", keys(100)); r.status != 200 || len(r.batch.Results) != 100 {
		t.Errorf("100 keys: %d %.200s", r.status, r.body)
	}
	// A client that sends half a request is cut off (ReadHeaderTimeout),
	// not served forever.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /v1/features/payments/Putri HTTP/1.1\r\nHost: x\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := io.ReadAll(conn); err != nil {
		t.Errorf("half a request: the server did not close the connection: %v", err)
	}
	var sb strings.Builder
	reg.WriteText(&sb)
	counted[`reckon_stream_lookups_total{stream="payments",code="200"}`] += 2
	for series, n := range counted {
		if want := fmt.Sprintf("%s %d\n", series, n); !strings.Contains(sb.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestLookupPortTaken (R-LOOK-4): a serve_addr the worker cannot listen
// on turns lookups off, not the stream.
func TestLookupPortTaken(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg, recs := newTestEnv(t, 300)
	cfg.Stream.ServeAddr = ln.Addr().String()
	produce(t, cfg, recs)
	runInProcess(t, cfg) // the stream finishes its input
}

// TestLookupTokenAndTLS (R-LOOK-4): with a bearer token and TLS, only a
// TLS client with the token gets an answer.
func TestLookupTokenAndTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	pki := testpki.New(t, "localhost")
	cfg, recs := newTestEnv(t, 300)
	cfg.Stream.ServeAddr = "127.0.0.1:0"
	cfg.Stream.ServeAuth.Token = "s3cret"
	cfg.Stream.ServeTLS = config.ServerTLS{Enabled: true, CertFile: pki.ServerCert, KeyFile: pki.ServerKey}
	produce(t, cfg, recs)
	_, addr := startLookupWorker(t, cfg, nil)
	waitDone(t, cfg, time.Minute)
	tlsClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.Pool}}}
	ok := lookupClient{base: "https://" + addr, hc: tlsClient, token: "s3cret"}
	if r := ok.get(t, "payments", "Putri", time.Time{}); r.status != 200 {
		t.Fatalf("TLS with the token: %d %s", r.status, r.body)
	}
	for name, c := range map[string]lookupClient{
		"no token":    {base: "https://" + addr, hc: tlsClient},
		"wrong token": {base: "https://" + addr, hc: tlsClient, token: "guess"},
	} {
		if r := c.get(t, "payments", "Putri", time.Time{}); r.status != 401 || !strings.Contains(r.errMsg, "bearer token") {
			t.Errorf("%s: %d %s", name, r.status, r.body)
		}
	}
	plain := lookupClient{base: "http://" + addr, hc: &http.Client{Timeout: 10 * time.Second}, token: "s3cret"}
	if r, err := plain.try("GET", "/v1/features/payments/Putri", nil); err == nil && r.status == 200 {
		t.Error("plain HTTP answered")
	}
	untrusted := lookupClient{base: "https://" + addr, hc: &http.Client{Timeout: 10 * time.Second}, token: "s3cret"}
	if _, err := untrusted.try("GET", "/v1/features/payments/Putri", nil); err == nil {
		t.Error("a client that does not trust the CA got an answer")
	}
}

// TestLookupTwoWorkers (R-LOOK-3): two workers share the partitions; a
// key asked of the worker that does not own its partition is forwarded to
// the owner, and both answer every key exactly.
func TestLookupTwoWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	cfg, recs := newTestEnv(t, 1500)
	cfg.Stream.ServeAddr = "127.0.0.1:0"
	cfg.Stream.Instance = "a"
	cfgB := *cfg
	cfgB.Stream.Instance = "b"
	_, addrA := startLookupWorker(t, cfg, nil)
	_, addrB := startLookupWorker(t, &cfgB, nil)
	produce(t, cfg, recs)
	waitDone(t, cfg, 2*time.Minute)
	s := payments(t, cfg)
	view := progressView(t, cfg)
	n := partitionCount(t, cfg, s.Topic)
	waitFor(t, 2*time.Minute, "both workers to own and publish partitions", func() (bool, string) {
		owners := map[string]int{}
		for p := range n {
			pr, _ := view.Get(s.Name, s.Topic, p)
			owners[pr.Serve]++
		}
		return owners[addrA] > 0 && owners[addrB] > 0 && owners[addrA]+owners[addrB] == int(n), fmt.Sprint(owners)
	})
	acc := acceptedByKey(t, cfg, recs)
	wm := highestWatermark(t, view, s, n)
	hc := &http.Client{Timeout: 10 * time.Second}
	// Partitions that moved are restored by their new owner: until then
	// their keys answer 503.
	waitFor(t, 2*time.Minute, "every key to answer on both workers", func() (bool, string) {
		for _, addr := range []string{addrA, addrB} {
			c := lookupClient{base: "http://" + addr, hc: hc}
			for k := range acc {
				if r := c.get(t, s.Name, k, wm); r.status != 200 {
					if r.status != 503 || r.retry == "" {
						t.Fatalf("%s on %s: %d %s", k, addr, r.status, r.body)
					}
					return false, fmt.Sprintf("%s on %s: %s", k, addr, r.body)
				}
			}
		}
		return true, ""
	})
	for _, addr := range []string{addrA, addrB} {
		c := lookupClient{base: "http://" + addr, hc: hc}
		if n := checkAllKeys(t, c, s, acc, wm); n == 0 {
			t.Fatal("every answer empty: nothing compared")
		}
		forwarded := 0
		keys := make([]string, 0, len(acc))
		for k := range acc {
			if r := c.get(t, s.Name, k, wm); r.servedBy != addr {
				forwarded++
			}
			keys = append(keys, k)
		}
		if forwarded == 0 || forwarded == len(acc) {
			t.Errorf("worker %s forwarded %d of %d keys: both workers should own some", addr, forwarded, len(acc))
		}
		// The batch form: keys of both workers in one request.
		body, _ := json.Marshal(batchRequest{Keys: keys[:min(100, len(keys))], At: wm.Format(time.RFC3339Nano)})
		r := c.do(t, http.MethodPost, "/v1/features/"+s.Name, body)
		if r.status != 200 {
			t.Fatalf("batch: %d %s", r.status, r.body)
		}
		for i, a := range r.batch.Results {
			want := operator.RollingTruth(s.Rolling, wm, records(acc[keys[i]]))
			if a.Key != keys[i] || fmt.Sprint(a.Features["count"]) != fmt.Sprint(want.Count) || a.Features["sum"] != want.Sum {
				t.Fatalf("batch result %d: %+v, want %s %d/%g", i, a, keys[i], want.Count, want.Sum)
			}
		}
		t.Logf("worker %s: %d of %d keys forwarded", addr, forwarded, len(acc))
	}
}

// highestWatermark is the highest committed watermark of s's partitions:
// instants from it minus the allowed lateness on are live on every one.
func highestWatermark(t *testing.T, view *progress.View, s config.Stream, n int32) time.Time {
	t.Helper()
	if err := view.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	var hi time.Time
	for p := range n {
		if pr, ok := view.Get(s.Name, s.Topic, p); ok && pr.Watermark.After(hi) {
			hi = pr.Watermark
		}
	}
	if hi.IsZero() {
		t.Fatal("no watermark committed")
	}
	return hi
}

func progressView(t *testing.T, cfg *config.Config) *progress.View {
	t.Helper()
	kopts, err := kafkaconn.Options(cfg.Kafka, "test")
	if err != nil {
		t.Fatal(err)
	}
	v, err := progress.NewView(progress.Options{Topic: cfg.Topics.StreamProgress, Kafka: kopts}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	return v
}

func partitionCount(t *testing.T, cfg *config.Config, topic string) int32 {
	t.Helper()
	adm, closeAdm, err := kafkaconn.NewAdmin(cfg.Kafka, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer closeAdm()
	td, err := adm.ListTopics(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	return int32(len(td[topic].Partitions))
}

// TestLookupExactAcrossKill (R-LOOK-2, R-LOOK-3): lookups run against real
// worker processes while traffic (late, duplicate, out-of-order and poison
// events) arrives, the first worker is killed with SIGKILL and a second
// one restores its partitions. Every answer is a 503 with a reason and
// Retry-After, a 422 (an instant the live state no longer holds), or a
// 200 that equals RollingTruth over a prefix (by offset) of the key's
// accepted events: the state as of some commit, never an event an abort
// took back. Lookups during the restore answer 503; after it, every key
// equals RollingTruth over all its accepted events.
func TestLookupExactAcrossKill(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	cfg, recs := newTestEnv(t, 3000)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	// Dynamic membership: the second worker waits out the killed one's
	// session (1 s) before it gets the partitions; meanwhile its lookups
	// are up and must say the partitions are moving.
	env := append(os.Environ(), envChild+"=1",
		"RECKON_KAFKA_BROKERS="+cfg.Kafka.Brokers[0], "RECKON_STREAM_WORKER_INSTANCE=test",
		"RECKON_STREAM_WORKER_COMMIT_INTERVAL=20ms", "RECKON_METRICS_ADDR=", "RECKON_STREAM_WORKER_SESSION_TIMEOUT=1s",
		"RECKON_STREAM_WORKER_CHECKPOINT_RECORDS="+testCheckpointRecords, "RECKON_STREAM_WORKER_MEMBERSHIP=dynamic",
		"RECKON_STREAM_WORKER_SERVE_ADDR="+addr)
	start := func() (*exec.Cmd, chan error, *strings.Builder) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		return cmd, exited, &stderr
	}
	s := payments(t, cfg)
	type asked struct {
		key    string
		at     time.Time
		status int
		ans    lookupAnswer
		phase  int
	}
	var (
		mu       sync.Mutex
		answers  []asked
		produced atomic.Int64
		phase    atomic.Int64
	)
	events := make([]struct {
		key string
		et  time.Time
	}, len(recs))
	for i, r := range recs {
		var e struct {
			OccurredAt time.Time `json:"occurred_at"`
			Data       struct {
				UserID string `json:"user_id"`
			} `json:"data"`
		}
		_ = json.Unmarshal(r.Value, &e)
		events[i].key, events[i].et = e.Data.UserID, e.OccurredAt
	}
	stop := make(chan struct{})
	polled := make(chan struct{})
	c := lookupClient{base: "http://" + addr, hc: &http.Client{Timeout: 10 * time.Second}}
	go func() {
		defer close(polled)
		rng := rand.New(rand.NewPCG(5, 6))
		for {
			select {
			case <-stop:
				return
			default:
			}
			n := int(produced.Load())
			if n == 0 {
				runtime.Gosched()
				continue
			}
			e := events[n-1-rng.IntN(min(n, 200))]
			if e.key == "" || (&lookupStream{re: regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)}).checkKey(e.key) != nil {
				continue
			}
			at := e.et.Add(time.Duration(rng.IntN(60_000)) * time.Millisecond).UTC()
			r, err := c.try(http.MethodGet, keyPath(s.Name, e.key, at), nil)
			if err != nil {
				continue // not listening (between the processes), or a malformed reply: counted below
			}
			if r.status == 503 && (r.retry == "" || r.errMsg == "") {
				r.status = 599 // fails the test below
			}
			mu.Lock()
			answers = append(answers, asked{e.key, at, r.status, r.ans, int(phase.Load())})
			mu.Unlock()
		}
	}()
	produceFrom := func(recs []*kgo.Record) chan error {
		done := make(chan error, 1)
		base := produced.Load()
		go func() {
			for i := 0; i < len(recs); i += 10 {
				k := min(i+10, len(recs))
				if err := produceRecords(cfg, recs[i:k]); err != nil {
					done <- err
					return
				}
				produced.Store(base + int64(k))
			}
			done <- nil
		}()
		return done
	}

	// The first worker: killed once it has committed some of the traffic.
	half := len(recs) / 2
	p1 := produceFrom(recs[:half])
	cmd, exited, stderr := start()
	waitFor(t, time.Minute, "the first worker to commit", func() (bool, string) {
		select {
		case err := <-exited:
			t.Fatalf("worker exited (%v): %s", err, stderr.String())
		default:
		}
		return committedTotal(t, cfg) > 0, "nothing committed"
	})
	waitFor(t, time.Minute, "a lookup answered by the first worker", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		for _, a := range answers {
			if a.status == 200 {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d answers, none 200", len(answers))
	})
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	if err := <-p1; err != nil {
		t.Fatal(err)
	}
	phase.Store(1)
	// The second worker: restores the partitions, then takes the rest.
	cmd2, exited2, stderr2 := start()
	defer func() {
		_ = cmd2.Process.Signal(syscall.SIGTERM)
		<-exited2
		if t.Failed() {
			t.Logf("second worker:\n%s", stderr2.String())
		}
	}()
	p2 := produceFrom(recs[half:])
	if err := <-p2; err != nil {
		t.Fatal(err)
	}
	waitDone(t, cfg, 2*time.Minute)
	view := progressView(t, cfg)
	n := partitionCount(t, cfg, s.Topic)
	waitFor(t, time.Minute, "every partition served by the second worker", func() (bool, string) {
		for p := range n {
			if pr, _ := view.Get(s.Name, s.Topic, p); pr.Serve != addr {
				return false, fmt.Sprintf("partition %d: %q", p, pr.Serve)
			}
		}
		r, err := c.try(http.MethodGet, keyPath(s.Name, "Putri", time.Time{}), nil)
		return err == nil && r.status == 200, fmt.Sprint(r.status, err)
	})
	close(stop)
	<-polled

	acc := acceptedByKey(t, cfg, recs)
	counts := map[string]int{}
	for _, a := range answers {
		counts[fmt.Sprint(a.phase, "/", a.status)]++
		switch a.status {
		case 503, 422:
			continue
		case 200:
		default:
			t.Fatalf("lookup %s at %v: status %d", a.key, a.at, a.status)
		}
		match, es := false, acc[a.key]
		got := a.ans.Features
		for j := 0; j <= len(es) && !match; j++ {
			want := operator.RollingTruth(s.Rolling, a.at, records(es[:j]))
			match = fmt.Sprint(got["count"]) == fmt.Sprint(want.Count) && got["sum"] == want.Sum
		}
		if !match {
			t.Fatalf("lookup %s at %v answered %v: not RollingTruth over any committed prefix of its %d accepted events",
				a.key, a.at, got, len(es))
		}
	}
	t.Logf("answers by phase/status: %v", counts)
	if counts["0/200"] == 0 || counts["1/200"] == 0 {
		t.Fatalf("too few answers compared: %v", counts)
	}
	if counts["1/503"] == 0 {
		t.Fatalf("no lookup answered 503 while the second worker waited for and restored the partitions: %v", counts)
	}
	wm := highestWatermark(t, view, s, n)
	if ne := checkAllKeys(t, c, s, acc, wm); ne == 0 {
		t.Fatal("every final answer empty: nothing compared")
	} else {
		t.Logf("after the restore: %d non-empty answers equal RollingTruth", ne)
	}
}
