package streaming

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
	"reckon/internal/kafkaconn"
	"reckon/internal/metrics"
	"reckon/streaming/operator"
	"reckon/streaming/progress"
)

// Feature lookups (docs/adr/0040-feature-lookups.md, requirements R-LOOK):
// GET /v1/features/<stream>/<key> and POST /v1/features/<stream> answer a
// key's rolling features as of now from the committed copy of the owning
// partition's rolling buffers (operator.Lookup). The run loop publishes
// into the copies after each commit and after a restore; the HTTP
// goroutines only read them. A key of a partition this worker does not own
// is forwarded to its owner, whose address every progress record carries.

const (
	// MaxLookupKeys bounds the keys of one POST.
	MaxLookupKeys = 100
	// maxLookupKeyBytes bounds a key where the gate sets no bound of its own.
	maxLookupKeyBytes = 1024
	// headerForwarded marks a lookup one worker forwarded to another: the
	// owner answers it itself or refuses it, never forwards it again.
	headerForwarded = "Reckon-Forwarded-By"
	// headerServedBy names the worker that answered.
	headerServedBy = "Reckon-Served-By"
)

// lookupStream is what a lookup needs to know of one stream.
type lookupStream struct {
	name, topic string
	keyField    string // "data.<field>", for messages
	maxLen      int    // 0: no bound but maxLookupKeyBytes
	re          *regexp.Regexp
	pattern     string
	rolling     bool
}

// partLookups are the committed copies of one raw partition's operators.
type partLookups struct {
	serving bool // false: assigned, its state being restored
	by      map[string]*operator.Lookup
}

// lookups is a worker's lookup registry and server. Every method is a
// no-op while it is off (stream_worker.serve_addr empty, or the listen
// failed).
type lookups struct {
	log     *slog.Logger
	now     func() time.Time
	streams map[string]*lookupStream
	counter *metrics.Vec

	mu    sync.RWMutex
	on    bool
	self  string // advertised address
	parts map[tp]*partLookups

	token  string
	scheme string
	client *http.Client // forwarding
	view   *progress.View
	adm    *kadm.Client
	kcl    *kgo.Client

	countsMu sync.Mutex
	counts   map[string]topicCount

	srv   *http.Server
	addr  string // bound address
	ready chan struct{}
}

type topicCount struct {
	n  int32
	at time.Time
}

func newLookups(cfg *config.Config, log *slog.Logger, reg *metrics.Registry) *lookups {
	if reg == nil {
		reg = metrics.NewRegistry()
	}
	l := &lookups{
		log: log, now: time.Now, streams: map[string]*lookupStream{}, parts: map[tp]*partLookups{},
		counts: map[string]topicCount{}, ready: make(chan struct{}),
		counter: reg.Counter("reckon_stream_lookups_total",
			"Feature lookups answered, by stream and HTTP status code (docs/adr/0040-feature-lookups.md).", "stream", "code"),
	}
	for _, s := range cfg.Streams {
		ls := &lookupStream{name: s.Name, topic: s.Topic, keyField: "data." + s.KeyField, rolling: s.Rolling > 0}
		// The key's bounds are the gate's: a key the gate would refuse
		// can never be in the state.
		for _, et := range s.EventTypes {
			fr, ok := cfg.Gate.Types[et].Fields[s.KeyField]
			if !ok {
				continue
			}
			if fr.MaxLen > 0 && (ls.maxLen == 0 || fr.MaxLen < ls.maxLen) {
				ls.maxLen = fr.MaxLen
			}
			if fr.Pattern != "" && ls.re == nil {
				if re, err := regexp.Compile(`^(?:` + fr.Pattern + `)$`); err == nil {
					ls.re, ls.pattern = re, fr.Pattern
				}
			}
		}
		l.streams[s.Name] = ls
	}
	return l
}

// start listens on cfg's serve_addr and serves until ctx ends. A failure
// turns lookups off (logged), never the stream.
func (l *lookups) start(ctx context.Context, cfg *config.Config) {
	defer close(l.ready)
	sc := cfg.Stream
	if sc.ServeAddr == "" {
		return
	}
	off := func(what string, err error) {
		l.log.Error("feature lookups off: "+what+"; the stream runs without them", "serve_addr", sc.ServeAddr, "err", err)
	}
	tlsCfg, err := sc.ServeTLS.ServerConfig("stream_worker.serve_tls")
	if err != nil {
		off("TLS", err)
		return
	}
	tok, err := sc.ServeAuth.ResolveToken()
	if err != nil {
		off("token", err)
		return
	}
	client, err := forwardClient(sc.ServeTLS, tlsCfg)
	if err != nil {
		off("TLS for forwarding", err)
		return
	}
	kopts, err := kafkaconn.Options(cfg.Kafka, "stream-lookup")
	if err != nil {
		off("kafka", err)
		return
	}
	view, err := progress.NewView(progress.Options{Topic: cfg.Topics.StreamProgress, Kafka: kopts}, l.log)
	if err != nil {
		off("progress view", err)
		return
	}
	kcl, err := kgo.NewClient(kopts...)
	if err != nil {
		view.Close()
		off("kafka", err)
		return
	}
	ln, err := net.Listen("tcp", sc.ServeAddr)
	if err != nil {
		view.Close()
		kcl.Close()
		off("cannot listen", err)
		return
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	l.srv = &http.Server{
		Handler: l.handler(),
		// A slow or hanging client cannot hold a goroutine for long.
		ReadHeaderTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 10 * time.Second,
		IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10,
		ErrorLog: slog.NewLogLogger(l.log.Handler(), slog.LevelDebug),
	}
	self := sc.ServeAdvertise
	if self == "" {
		self = advertise(ln.Addr().String())
	}
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	l.mu.Lock()
	l.on, l.self, l.addr = true, self, ln.Addr().String()
	l.token, l.scheme, l.client, l.view, l.kcl, l.adm = tok.Reveal(), scheme, client, view, kcl, kadm.NewClient(kcl)
	l.mu.Unlock()
	l.log.Info("feature lookups", "url", scheme+"://"+ln.Addr().String()+"/v1/features/<stream>/<key>", "advertised", self,
		"auth", tok != "", "tls", tlsCfg != nil)
	go func() {
		if err := l.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			l.log.Error("feature lookups stopped", "err", err)
		}
	}()
}

// stop ends the server and its clients.
func (l *lookups) stop() {
	l.mu.Lock()
	on := l.on
	l.on = false
	l.mu.Unlock()
	if !on {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = l.srv.Shutdown(ctx)
	l.view.Close()
	l.kcl.Close()
}

// advertise turns a bound address into one other hosts can reach: an
// unspecified host becomes the host name.
func advertise(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	return net.JoinHostPort(host, port)
}

// forwardClient is the HTTP client a worker forwards lookups with: short
// timeouts; with TLS it trusts the chain of its own certificate (workers
// share a CA) and presents that certificate where clients must have one.
func forwardClient(t config.ServerTLS, server *tls.Config) (*http.Client, error) {
	tr := &http.Transport{
		MaxIdleConnsPerHost: 16, IdleConnTimeout: time.Minute, ResponseHeaderTimeout: 3 * time.Second,
		DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext, TLSHandshakeTimeout: 2 * time.Second,
	}
	if server != nil {
		pem, err := os.ReadFile(t.CertFile)
		if err != nil {
			return nil, fmt.Errorf("stream_worker.serve_tls.cert_file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		pool.AppendCertsFromPEM(pem)
		c := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
		if server.ClientAuth == tls.RequireAndVerifyClientCert {
			c.Certificates = server.Certificates
		}
		tr.TLSClientConfig = c
	}
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}, nil
}

// addrWait returns the bound address once start is done ("" when off).
func (l *lookups) addrWait(ctx context.Context) string {
	select {
	case <-l.ready:
	case <-ctx.Done():
		return ""
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.on {
		return ""
	}
	return l.addr
}

// advertised is the address progress records carry ("" when off).
func (l *lookups) advertised() string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.on {
		return ""
	}
	return l.self
}

// assigned notes partitions the group gave this worker: restoring until
// their first publish. revoked forgets them. Both run in the group's
// callbacks.
func (l *lookups) assigned(m map[string][]int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for t, ps := range m {
		for _, p := range ps {
			if l.parts[tp{t, p}] == nil {
				l.parts[tp{t, p}] = &partLookups{by: map[string]*operator.Lookup{}}
			}
		}
	}
}

func (l *lookups) revoked(m map[string][]int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for t, ps := range m {
		for _, p := range ps {
			delete(l.parts, tp{t, p})
		}
	}
}

// dropped marks a partition whose state the worker dropped (abort,
// rebalance) as restoring, if it is still assigned.
func (l *lookups) dropped(k tp) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if pl := l.parts[k]; pl != nil {
		pl.serving = false
	}
}

// reset forgets every partition (a lost session: the next one's
// assignment brings them back).
func (l *lookups) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.parts)
}

// publish copies the partition's committed operator state into its
// lookups: call it right after a restore and after each commit, on the
// run loop's goroutine. A partition not (or no longer) assigned is left
// alone.
func (l *lookups) publish(part *partition) {
	l.mu.Lock()
	pl := l.parts[part.tp]
	if !l.on || pl == nil {
		l.mu.Unlock()
		return
	}
	lks := make([]*operator.Lookup, len(part.ops))
	for i, so := range part.ops {
		lk := pl.by[so.cfg.Name]
		if lk == nil {
			lk = operator.NewLookup()
			pl.by[so.cfg.Name] = lk
		}
		lks[i] = lk
	}
	l.mu.Unlock()
	for i, so := range part.ops {
		so.op.PublishTo(lks[i])
	}
	l.mu.Lock()
	if l.parts[part.tp] == pl {
		pl.serving = true
	}
	l.mu.Unlock()
}

// partitionOf is the raw partition of key: Kafka's default partitioner
// (murmur2 of the key, as Java's and franz-go's producers, and the
// generator, key records by the stream's key field).
func (l *lookups) partitionOf(ctx context.Context, topic, key string) (int32, *lookupError) {
	n, err := l.partitions(ctx, topic)
	if err != nil {
		return 0, unavailable("partitions of %s unknown: %v", topic, err)
	}
	return KeyPartition([]byte(key), n), nil
}

// partitions is topic's partition count, from metadata at most 30 s old
// (an older count serves while the broker does not answer).
func (l *lookups) partitions(ctx context.Context, topic string) (int32, error) {
	l.countsMu.Lock()
	c, ok := l.counts[topic]
	l.countsMu.Unlock()
	if ok && l.now().Sub(c.at) < 30*time.Second {
		return c.n, nil
	}
	mctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	td, err := l.adm.ListTopics(mctx, topic)
	if err == nil {
		err = td[topic].Err
	}
	if err != nil || len(td[topic].Partitions) == 0 {
		if ok {
			return c.n, nil
		}
		if err == nil {
			err = errors.New("no partitions")
		}
		return 0, err
	}
	n := int32(len(td[topic].Partitions))
	l.countsMu.Lock()
	l.counts[topic] = topicCount{n, l.now()}
	l.countsMu.Unlock()
	return n, nil
}

// KeyPartition is the partition Kafka's default partitioner puts a record
// keyed key in, of n: murmur2 (Java's Utils.murmur2), positive, modulo n.
func KeyPartition(key []byte, n int32) int32 {
	return int32((murmur2(key) & 0x7fffffff) % uint32(n))
}

func murmur2(b []byte) uint32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	h := seed ^ uint32(len(b))
	for len(b) >= 4 {
		k := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
		b = b[4:]
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch len(b) {
	case 3:
		h ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(b[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}

// LookupAddr waits until the worker's Run has started its feature lookups
// and returns the address they listen on ("" when off).
func (w *Worker) LookupAddr(ctx context.Context) string { return w.look.addrWait(ctx) }
