// Package metrics is a small Prometheus text-format registry: counters and
// gauges with labels, served on /metrics. It exists so every reckon process
// exposes the figures operators alert on (consumer lag, watermark lag, DLQ
// growth, late rate, archive progress) without pulling a client library into
// the hot path; values are atomics, safe for concurrent use.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Registry holds metric families.
type Registry struct {
	mu   sync.Mutex // protects fams
	fams map[string]*Vec
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{fams: map[string]*Vec{}} }

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
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.fams[name]; ok {
		return v
	}
	v := &Vec{name: name, help: help, kind: kind, labels: labels, values: map[string]*Value{}}
	r.fams[name] = v
	return v
}

// With returns the series for the label values (in the family's label order).
func (v *Vec) With(values ...string) *Value {
	k := strings.Join(values, "\x00")
	v.mu.Lock()
	defer v.mu.Unlock()
	if x, ok := v.values[k]; ok {
		return x
	}
	x := &Value{labels: append([]string(nil), values...)}
	v.values[k] = x
	return x
}

// Delete drops the series for the label values (e.g. a revoked partition).
func (v *Vec) Delete(values ...string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.values, strings.Join(values, "\x00"))
}

// WriteText writes every family in the Prometheus text exposition format.
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
		v := r.fams[n]
		r.mu.Unlock()
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", v.name, v.help, v.name, v.kind)
		v.mu.Lock()
		keys := make([]string, 0, len(v.values))
		for k := range v.values {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			x := v.values[k]
			w.WriteString(v.name)
			if len(v.labels) > 0 {
				w.WriteByte('{')
				for i, l := range v.labels {
					if i > 0 {
						w.WriteByte(',')
					}
					val := ""
					if i < len(x.labels) {
						val = x.labels[i]
					}
					fmt.Fprintf(w, "%s=%s", l, strconv.Quote(val))
				}
				w.WriteByte('}')
			}
			w.WriteByte(' ')
			w.WriteString(strconv.FormatFloat(x.Get(), 'g', -1, 64))
			w.WriteByte('\n')
		}
		v.mu.Unlock()
	}
}

// Handler serves the registry on any path.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		var b strings.Builder
		r.WriteText(&b)
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
