// Package metrics is a small Prometheus text-format registry: counters and
// gauges with labels, served on /metrics. It exists so every reckon process
// exposes the figures operators alert on (consumer lag, watermark lag, DLQ
// growth, late rate, archive progress) without pulling a client library into
// the hot path; values are atomics, safe for concurrent use. Figures that
// are cheaper to read than to track (a lake listing, a count of workflows)
// are set by collectors the registry runs at each scrape (OnScrape).
package metrics

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Registry holds metric families.
type Registry struct {
	mu         sync.Mutex // protects fams and collectors
	fams       map[string]family
	collectors []func(context.Context)

	scrapeMu sync.Mutex // serializes collectors across concurrent scrapes
}

// family is a Vec or a HistVec.
type family interface {
	write(w *strings.Builder)
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{fams: map[string]family{}} }

// OnScrape adds a collector the handler runs before each scrape is
// written, with the request's context: it sets gauges from a source read
// at that moment. Collectors run one scrape at a time, in the order added.
func (r *Registry) OnScrape(fn func(ctx context.Context)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.collectors = append(r.collectors, fn)
}

// Collect runs the collectors (what the handler does before writing).
func (r *Registry) Collect(ctx context.Context) {
	r.scrapeMu.Lock()
	defer r.scrapeMu.Unlock()
	r.collect(ctx)
}

func (r *Registry) collect(ctx context.Context) {
	r.mu.Lock()
	cs := slices.Clone(r.collectors)
	r.mu.Unlock()
	for _, fn := range cs {
		fn(ctx)
	}
}

// Family describes one registered metric family.
type Family struct {
	Name string
	// Type is "counter", "gauge" or "histogram", as in the text format.
	Type   string
	Labels []string
}

// Families returns the registered families, sorted by name: what a scrape
// can show, whether or not a family has series yet.
func (r *Registry) Families() []Family {
	r.mu.Lock()
	defer r.mu.Unlock()
	fs := make([]Family, 0, len(r.fams))
	for _, f := range r.fams {
		switch f := f.(type) {
		case *Vec:
			fs = append(fs, Family{Name: f.name, Type: f.kind, Labels: slices.Clone(f.labels)})
		case *HistVec:
			fs = append(fs, Family{Name: f.name, Type: "histogram", Labels: slices.Clone(f.labels)})
		}
	}
	slices.SortFunc(fs, func(a, b Family) int { return strings.Compare(a.Name, b.Name) })
	return fs
}

// Vec is a metric family: one value per label combination.
type Vec struct {
	name, help, kind string
	labels           []string

	mu     sync.Mutex // protects values
	values map[string]*Value
}

// Value is one time series. Its methods are safe for concurrent use.
type Value struct {
	labels []string
	bits   atomic.Uint64
}

// Add adds d (counters must only grow).
func (v *Value) Add(d float64) {
	for {
		old := v.bits.Load()
		if v.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

// Set sets the value (gauges).
func (v *Value) Set(x float64) { v.bits.Store(math.Float64bits(x)) }

// Get returns the value.
func (v *Value) Get() float64 { return math.Float64frombits(v.bits.Load()) }

// Counter registers (or returns the existing) counter family.
func (r *Registry) Counter(name, help string, labels ...string) *Vec {
	return r.family(name, help, "counter", labels)
}

// Gauge registers (or returns the existing) gauge family.
func (r *Registry) Gauge(name, help string, labels ...string) *Vec {
	return r.family(name, help, "gauge", labels)
}

func (r *Registry) family(name, help, kind string, labels []string) *Vec {
	return register(r, name, func() *Vec {
		return &Vec{name: name, help: help, kind: kind, labels: labels, values: map[string]*Value{}}
	})
}

// register returns the family registered as name, registering mk's the
// first time.
func register[F family](r *Registry, name string, mk func() F) F {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.fams[name]; ok {
		return f.(F)
	}
	f := mk()
	r.fams[name] = f
	return f
}

// With returns the series for the label values (in the family's label order).
func (v *Vec) With(values ...string) *Value {
	return series(&v.mu, v.values, values, func() *Value { return &Value{labels: append([]string(nil), values...)} })
}

// series returns the series of m for the label values, adding mk's the
// first time; mu protects m.
func series[T any](mu *sync.Mutex, m map[string]*T, values []string, mk func() *T) *T {
	k := strings.Join(values, "\x00")
	mu.Lock()
	defer mu.Unlock()
	if x, ok := m[k]; ok {
		return x
	}
	x := mk()
	m[k] = x
	return x
}

// Each calls fn for every series, with its label values; fn must not
// call v's other methods.
func (v *Vec) Each(fn func(x *Value, labels []string)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, x := range v.values {
		fn(x, x.labels)
	}
}

// Reset drops every series.
func (v *Vec) Reset() {
	v.mu.Lock()
	defer v.mu.Unlock()
	clear(v.values)
}

// Delete drops the series for the label values (e.g. a revoked partition).
func (v *Vec) Delete(values ...string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.values, strings.Join(values, "\x00"))
}

// WriteText writes every family in the Prometheus text exposition format.
// It does not run the collectors (Collect does).
func (r *Registry) WriteText(w *strings.Builder) {
	r.mu.Lock()
	names := make([]string, 0, len(r.fams))
	for n := range r.fams {
		names = append(names, n)
	}
	r.mu.Unlock()
	sort.Strings(names)
	for _, n := range names {
		r.mu.Lock()
		f := r.fams[n]
		r.mu.Unlock()
		f.write(w)
	}
}

func (v *Vec) write(w *strings.Builder) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", v.name, v.help, v.name, v.kind)
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(v.values)) {
		x := v.values[k]
		w.WriteString(v.name)
		writeLabels(w, v.labels, x.labels, "", "")
		w.WriteByte(' ')
		w.WriteString(strconv.FormatFloat(x.Get(), 'g', -1, 64))
		w.WriteByte('\n')
	}
}

// writeLabels writes {name="value",...}, with extra (le) last when set.
func writeLabels(w *strings.Builder, names, values []string, extra, extraValue string) {
	if len(names) == 0 && extra == "" {
		return
	}
	w.WriteByte('{')
	for i, l := range names {
		if i > 0 {
			w.WriteByte(',')
		}
		val := ""
		if i < len(values) {
			val = values[i]
		}
		fmt.Fprintf(w, "%s=%s", l, strconv.Quote(val))
	}
	if extra != "" {
		if len(names) > 0 {
			w.WriteByte(',')
		}
		fmt.Fprintf(w, "%s=%s", extra, strconv.Quote(extraValue))
	}
	w.WriteByte('}')
}

// HistVec is a histogram family: one histogram per label combination,
// with the same upper bucket bounds.
type HistVec struct {
	name, help string
	labels     []string
	bounds     []float64 // ascending; +Inf is implicit

	mu     sync.Mutex // protects values
	values map[string]*Hist
}

// Hist is one histogram. Its methods are safe for concurrent use.
type Hist struct {
	labels []string
	bounds []float64

	mu     sync.Mutex // protects the following fields
	counts []uint64   // per bound, not cumulative; the last is +Inf
	sum    float64
	count  uint64
}

// Histogram registers (or returns the existing) histogram family with the
// given ascending upper bucket bounds (+Inf is added).
func (r *Registry) Histogram(name, help string, bounds []float64, labels ...string) *HistVec {
	return register(r, name, func() *HistVec {
		return &HistVec{name: name, help: help, labels: labels, bounds: slices.Clone(bounds), values: map[string]*Hist{}}
	})
}

// With returns the histogram for the label values (in the family's order).
func (v *HistVec) With(values ...string) *Hist {
	return series(&v.mu, v.values, values, func() *Hist {
		return &Hist{labels: slices.Clone(values), bounds: v.bounds, counts: make([]uint64, len(v.bounds)+1)}
	})
}

// Observe adds one observation.
func (h *Hist) Observe(x float64) {
	i, _ := slices.BinarySearch(h.bounds, x) // first bound >= x: le is inclusive
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[i]++
	h.sum += x
	h.count++
}

// Count returns how many observations were made.
func (h *Hist) Count() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count
}

func (v *HistVec) write(w *strings.Builder) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", v.name, v.help, v.name)
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(v.values)) {
		x := v.values[k]
		x.mu.Lock()
		var cum uint64
		for i, n := range x.counts {
			cum += n
			le := "+Inf"
			if i < len(x.bounds) {
				le = strconv.FormatFloat(x.bounds[i], 'g', -1, 64)
			}
			w.WriteString(v.name + "_bucket")
			writeLabels(w, v.labels, x.labels, "le", le)
			fmt.Fprintf(w, " %d\n", cum)
		}
		w.WriteString(v.name + "_sum")
		writeLabels(w, v.labels, x.labels, "", "")
		w.WriteString(" " + strconv.FormatFloat(x.sum, 'g', -1, 64) + "\n")
		w.WriteString(v.name + "_count")
		writeLabels(w, v.labels, x.labels, "", "")
		fmt.Fprintf(w, " %d\n", x.count)
		x.mu.Unlock()
	}
}

// Handler serves the registry on any path, running the collectors first.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// One scrape at a time from collecting to writing: a collector
		// may reset a family to set it anew.
		r.scrapeMu.Lock()
		r.collect(req.Context())
		var b strings.Builder
		r.WriteText(&b)
		r.scrapeMu.Unlock()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte(b.String()))
	})
}

// Serve serves /metrics on addr until ctx ends. An empty addr serves
// nothing. If addr's port is taken (several processes on one host), the
// next ports are tried, up to 20; the address used is returned on bound.
func Serve(ctx context.Context, addr string, r *Registry, bound func(string)) error {
	if addr == "" {
		return nil
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	port, _ := strconv.Atoi(portStr)
	var ln net.Listener
	for i := 0; i < 20; i++ {
		ln, err = net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port+i)))
		if err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	if bound != nil {
		bound(ln.Addr().String())
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", r.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}
