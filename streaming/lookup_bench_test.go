package streaming

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkLookupHTTP measures feature lookups over loopback HTTP with
// wrk (the Debian package; skipped without it): a worker in process that
// has processed 20,000 payment events (10,000 users), asked GET
// /v1/features/payments/<user>?at=<its watermark> by wrk for 5 s from 24
// connections, each waiting 2 ms after an answer (wrk cannot hold a
// constant rate: this offers at most 12,000 requests/s, about 10,000 at
// sub-millisecond answers). Reported: requests/s reached, wrk's p50 and
// p99 latency, CPU time of the worker's process per request, and the
// answers that were not 200 (the benchmark fails on any).
func BenchmarkLookupHTTP(b *testing.B) {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		b.Skip("wrk not installed (Debian package wrk): the loopback HTTP lookup benchmark needs it")
	}
	for range b.N {
		b.StopTimer()
		cfg, recs := benchEnv(b, 20_000)
		cfg.Stream.ServeAddr = "127.0.0.1:0"
		w, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		addr := w.LookupAddr(ctx)
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Minute)
		if err := waitCaughtUp(wctx, cfg, 10*time.Millisecond, nil); err != nil {
			b.Fatalf("stream worker did not finish: %v", err)
		}
		wcancel()
		s := payments(b, cfg)
		_, _, _, wm, err := CommittedStats(ctx, cfg, s)
		if err != nil {
			b.Fatal(err)
		}
		users := map[string]bool{}
		for _, r := range recs {
			users[string(r.Key)] = true
		}
		script := wrkScript(b, users, wm.UTC().Format(time.RFC3339Nano), 2)
		b.StartTimer()
		cpu0 := cpuTime()
		out, err := exec.Command(wrk, "-t2", "-c24", "-d5s", "--timeout", "2s", "-s", script,
			"http://"+addr+"/").CombinedOutput()
		cpu := cpuTime() - cpu0
		b.StopTimer()
		cancel()
		<-done
		if err != nil {
			b.Fatalf("wrk: %v: %s", err, out)
		}
		m := wrkFigures(b, string(out))
		if m["non2xx"] > 0 || m["errors"] > 0 {
			b.Fatalf("wrk: %v answers not 200, %v errors:\n%s", m["non2xx"], m["errors"], out)
		}
		b.ReportMetric(m["requests"]/(m["duration_us"]/1e6), "req/s")
		b.ReportMetric(m["p50_us"]/1e3, "p50-ms")
		b.ReportMetric(m["p99_us"]/1e3, "p99-ms")
		b.ReportMetric(float64(cpu)/1e3/m["requests"], "cpu-us/req")
	}
}

// wrkScript writes a wrk Lua script asking for the users' features as of
// at, each connection waiting delayMs after every answer, and printing a
// line of figures for wrkFigures.
func wrkScript(b *testing.B, users map[string]bool, at string, delayMs int) string {
	var sb strings.Builder
	sb.WriteString("local keys = {")
	for u := range users {
		fmt.Fprintf(&sb, "%q,", u)
	}
	fmt.Fprintf(&sb, `}
local i = math.random(#keys)
request = function()
  i = i %% #keys + 1
  return wrk.format("GET", "/v1/features/payments/" .. keys[i] .. "?at=%s")
end
delay = function() return %d end
done = function(s, latency, requests)
  io.write(string.format("RECKON requests=%%d duration_us=%%d p50_us=%%d p99_us=%%d non2xx=%%d errors=%%d\n",
    s.requests, s.duration, latency:percentile(50), latency:percentile(99), s.errors.status,
    s.errors.connect + s.errors.read + s.errors.write + s.errors.timeout))
end
`, at, delayMs)
	p := filepath.Join(b.TempDir(), "lookup.lua")
	if err := os.WriteFile(p, []byte(sb.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	return p
}

func wrkFigures(b *testing.B, out string) map[string]float64 {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "RECKON ")
		if !ok {
			continue
		}
		m := map[string]float64{}
		for _, kv := range strings.Fields(line) {
			k, v, _ := strings.Cut(kv, "=")
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("wrk figure %q: %v", kv, err)
			}
			m[k] = f
		}
		if m["requests"] == 0 {
			b.Fatalf("wrk made no request:\n%s", out)
		}
		return m
	}
	b.Fatalf("wrk printed no figures:\n%s", out)
	return nil
}

// BenchmarkStreamEndToEndLookups is BenchmarkStreamEndToEnd with lookups
// running: the worker serves them, and a client asks 1,000 lookups/s of
// random users (as of now) over loopback HTTP for the whole run. Its
// events/s beside BenchmarkStreamEndToEnd's of the same run is the price
// of lookups for the stream (goal: within 10 %).
func BenchmarkStreamEndToEndLookups(b *testing.B) {
	for range b.N {
		b.StopTimer()
		cfg, recs := benchEnv(b, 200_000)
		cfg.Stream.ServeAddr = "127.0.0.1:0"
		w, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		addr := w.LookupAddr(ctx)
		users := make([]string, 0, 10_000)
		seen := map[string]bool{}
		for _, r := range recs {
			if k := string(r.Key); !seen[k] {
				seen[k] = true
				users = append(users, k)
			}
		}
		var asked, answered atomic.Int64
		var latMu sync.Mutex
		var lat []float64
		lctx, lcancel := context.WithCancel(ctx)
		lookersDone := make(chan struct{})
		go func() {
			defer close(lookersDone)
			askLookups(lctx, addr, users, 1000, &asked, &answered, func(d time.Duration) {
				latMu.Lock()
				lat = append(lat, float64(d)/1e6)
				latMu.Unlock()
			})
		}()
		b.StartTimer()
		start, cpu0 := time.Now(), cpuTime()
		wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Minute)
		if err := waitCaughtUp(wctx, cfg, 2*time.Millisecond, nil); err != nil {
			b.Fatalf("stream worker did not finish: %v", err)
		}
		wcancel()
		el, cpu := time.Since(start), cpuTime()-cpu0
		b.StopTimer()
		lcancel()
		<-lookersDone
		cancel()
		<-done
		if answered.Load() == 0 {
			b.Fatalf("no lookup answered (%d asked)", asked.Load())
		}
		b.ReportMetric(float64(len(recs))/el.Seconds(), "events/s")
		b.ReportMetric(float64(cpu)/float64(len(recs)), "cpu-ns/event")
		b.ReportMetric(float64(answered.Load())/el.Seconds(), "lookups/s")
		latMu.Lock()
		slices.Sort(lat)
		if len(lat) > 0 {
			b.ReportMetric(lat[len(lat)*99/100], "lookup-p99-ms")
		}
		latMu.Unlock()
	}
}

// askLookups offers rate lookups/s of users (as of now) until ctx ends,
// open loop: each in a goroutine of its own (at most 512 in flight), so
// slow answers do not lower the rate offered. It counts those asked and
// those answered 200 or 503 (a partition restoring at the start), and
// hands each answer's latency to took.
func askLookups(ctx context.Context, addr string, users []string, rate int, asked, answered *atomic.Int64,
	took func(time.Duration)) {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 512}}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	sem := make(chan struct{}, 512)
	var wg sync.WaitGroup
	defer wg.Wait()
	start, i := time.Now(), 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// A tick a starved goroutine missed is made up: the rate offered
		// is rate/s of wall time, however late this loop runs.
		for due := int(time.Since(start).Seconds() * float64(rate)); i < due; i++ {
			select {
			case sem <- struct{}{}:
			default:
				continue // 512 in flight: the worker is not answering; offered but dropped
			}
			asked.Add(1)
			ask(ctx, hc, addr, users[(i*7919)%len(users)], sem, &wg, answered, took)
		}
	}
}

func ask(ctx context.Context, hc *http.Client, addr, u string, sem chan struct{}, wg *sync.WaitGroup,
	answered *atomic.Int64, took func(time.Duration)) {
	wg.Add(1)
	go func() {
		defer func() { <-sem; wg.Done() }()
		t := time.Now()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/features/payments/"+u, nil)
		resp, err := hc.Do(req)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusServiceUnavailable {
			answered.Add(1)
			took(time.Since(t))
		}
	}()
}
