package streaming

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
	"reckon/streaming/operator"
)

// TestLateFoldBack (R-LOOK-5) on worker processes: a payments stream whose
// rolling size (10 min) is longer than its allowed lateness (30 s) sends
// its too-late events to the late topic; the test, as the late watch does
// once the lake holds them, publishes a refresh record for each (some
// twice) while the worker runs, the worker is killed with SIGKILL and a
// second one restores. Then every key's lookup equals RollingTruth over
// the accepted events plus the too-late ones still inside the rolling
// horizon, each counted once.
func TestLateFoldBack(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	cfg, recs := newTestEnv(t, 3000)
	yml, err := os.ReadFile("../deploy/reckon.yaml")
	if err != nil {
		t.Fatal(err)
	}
	block := "    allowed_lateness: 5m\n    idle_timeout: 1m\n    emit_interval: 10s\n    rolling: 60s\n"
	if !strings.Contains(string(yml), block) {
		t.Fatal("deploy/reckon.yaml: the payments stream's settings moved; update this test")
	}
	yml = []byte(strings.Replace(string(yml), block,
		"    allowed_lateness: 30s\n    idle_timeout: 1m\n    emit_interval: 10s\n    rolling: 10m\n", 1))
	path := filepath.Join(t.TempDir(), "reckon.yaml")
	if err := os.WriteFile(path, yml, 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Streams {
		if cfg.Streams[i].Name == "payments" {
			cfg.Streams[i].AllowedLateness, cfg.Streams[i].Rolling = 30*time.Second, 10*time.Minute
		}
	}
	s := payments(t, cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	env := append(os.Environ(), envChild+"=1", "STREAMING_TEST_CONFIG="+path,
		"RECKON_KAFKA_BROKERS="+cfg.Kafka.Brokers[0], "RECKON_STREAM_WORKER_INSTANCE=test",
		"RECKON_STREAM_WORKER_COMMIT_INTERVAL=20ms", "RECKON_METRICS_ADDR=", "RECKON_STREAM_WORKER_SESSION_TIMEOUT=1s",
		"RECKON_STREAM_WORKER_CHECKPOINT_RECORDS="+testCheckpointRecords, "RECKON_STREAM_WORKER_SERVE_ADDR="+addr)
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
	produce(t, cfg, recs)
	cmd, exited, stderr := start()
	waitDone(t, cfg, 2*time.Minute)

	// The late watch's part: a refresh record per too-late payment.
	refreshes, lateEvents := lateRefreshes(t, cfg, recs, s.Name)
	if len(refreshes) < 10 {
		t.Fatalf("only %d too-late payments: too few to fold back", len(refreshes))
	}
	// Half, then the worker is killed, then the rest and the first
	// tenth again (the same event ids: counted once).
	half := len(refreshes) / 2
	produce(t, cfg, refreshes[:half])
	view := progressView(t, cfg)
	n := partitionCount(t, cfg, s.Topic)
	waitFor(t, 2*time.Minute, "the first refreshes to be committed", func() (bool, string) {
		if err := view.Sync(context.Background()); err != nil {
			return false, err.Error()
		}
		for k, n := range committedRefresh(t, cfg) {
			if strings.HasPrefix(k, s.Topic+"|") && n > 0 {
				return true, ""
			}
		}
		return false, "no state record of the payments partitions carries a refresh offset yet"
	})
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	produce(t, cfg, append(refreshes[half:], refreshes[:half/5+1]...))
	cmd2, exited2, stderr2 := start()
	defer func() {
		_ = cmd2.Process.Signal(syscall.SIGTERM)
		<-exited2
		if t.Failed() {
			t.Logf("first worker:\n%s\nsecond worker:\n%s", lastLines20(stderr.String()), lastLines20(stderr2.String()))
		}
	}()
	total := int64(len(refreshes) + half/5 + 1)
	waitFor(t, 2*time.Minute, "every refresh considered by every payments partition", func() (bool, string) {
		got := committedRefresh(t, cfg)
		for p := range n {
			if got[fmt.Sprintf("%s|%d", s.Topic, p)] < total {
				return false, fmt.Sprintf("refresh offsets committed %v, %d records", got, total)
			}
		}
		return true, ""
	})

	// Expected: accepted events plus the too-late ones after their
	// partition's rolling horizon (watermark − lateness − rolling).
	acc := acceptedByKey(t, cfg, recs)
	horizon := map[int32]time.Time{}
	for p := range n {
		pr, _ := view.Get(s.Name, s.Topic, p)
		horizon[p] = pr.Watermark.Add(-s.AllowedLateness - s.Rolling)
	}
	folded := 0
	for _, e := range lateEvents {
		if e.EventTime.After(horizon[e.Partition]) {
			acc[e.Key] = append(acc[e.Key], acceptedEvent{operator.Record{Key: e.Key, EventTime: e.EventTime, Value: e.Value}, e.Offset})
			folded++
		}
	}
	if folded == 0 {
		t.Fatalf("none of %d too-late events is inside a rolling horizon: nothing folded back to check", len(lateEvents))
	}
	c := lookupClient{base: "http://" + addr, hc: &http.Client{Timeout: 10 * time.Second}}
	wm := highestWatermark(t, view, s, n)
	waitFor(t, time.Minute, "lookups answered", func() (bool, string) {
		r, err := c.try(http.MethodGet, keyPath(s.Name, "Budi", wm), nil)
		return err == nil && r.status == 200, fmt.Sprint(r.status, err)
	})
	if ne := checkAllKeys(t, c, s, acc, wm); ne == 0 {
		t.Fatal("every answer empty")
	}
	t.Logf("%d too-late events, %d inside the rolling horizon folded back once (%d refresh records, %d repeated)",
		len(lateEvents), folded, total, half/5+1)
}

// committedRefresh is the highest refresh offset the committed state
// records carry, per raw partition ("topic|partition").
func committedRefresh(t *testing.T, cfg *config.Config) map[string]int64 {
	t.Helper()
	latest := map[string]int64{}
	read(t, cfg, cfg.Topics.StreamState, func(r *kgo.Record) {
		for _, h := range r.Headers {
			if h.Key != headerRefresh {
				continue
			}
			n, _ := strconv.ParseInt(string(h.Value), 10, 64)
			k := string(r.Key)
			if i := strings.LastIndexByte(k, '#'); i > 0 {
				k = k[:i] // a checkpoint chunk
			}
			parts := strings.Split(k, "|")
			if len(parts) < 3 {
				continue
			}
			pk := parts[len(parts)-2] + "|" + parts[len(parts)-1]
			latest[pk] = max(latest[pk], n)
		}
	})
	return latest
}

func lastLines20(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// lateRefreshes builds, as the late watch does, a refresh record for each
// too-late event of stream on the late topic.
func lateRefreshes(tb testing.TB, cfg *config.Config, recs []*kgo.Record, stream string) ([]*kgo.Record, []event.StreamRefresh) {
	tb.Helper()
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
	var refreshes []*kgo.Record
	var lateEvents []event.StreamRefresh
	err := kafkaconn.ReadTopic(context.Background(), cfg.Kafka, "test", cfg.Topics.Late, func(r *kgo.Record) error {
		rr := event.StreamRefresh{Format: event.RefreshFormat, Offset: -1, Partition: -1}
		for _, h := range r.Headers {
			switch h.Key {
			case "reckon.stream":
				rr.Stream = string(h.Value)
			case event.HeaderSourceTopic:
				rr.Topic = string(h.Value)
			case event.HeaderSourcePartition:
				p, _ := strconv.ParseInt(string(h.Value), 10, 32)
				rr.Partition = int32(p)
			case event.HeaderSourceOffset:
				rr.Offset, _ = strconv.ParseInt(string(h.Value), 10, 64)
			}
		}
		var e struct {
			EventID    string    `json:"event_id"`
			OccurredAt time.Time `json:"occurred_at"`
			Data       struct {
				UserID string `json:"user_id"`
			} `json:"data"`
		}
		if rr.Stream != stream || json.Unmarshal(r.Value, &e) != nil {
			return nil
		}
		rr.EventID, rr.Key, rr.EventTime, rr.Value, rr.LateAt = e.EventID, e.Data.UserID, e.OccurredAt, values[e.EventID], r.Timestamp
		v, _ := json.Marshal(rr)
		refreshes = append(refreshes, &kgo.Record{Topic: cfg.Topics.StreamRefresh,
			Key: []byte(event.RefreshKey(rr.Stream, rr.Topic, rr.Partition)), Value: v})
		lateEvents = append(lateEvents, rr)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return refreshes, lateEvents
}

// BenchmarkRefreshToLookup measures the stream worker's part of folding a
// too-late event back (R-LOOK-5): from a refresh record produced to a
// lookup of its key counting the event. A worker in process (payments with
// rolling 10 min, allowed lateness 30 s, commit interval 100 ms) has
// processed 3,000 events; then, one at a time, a refresh record for each
// too-late event still inside the lookup's window (up to 50) is produced
// and the key looked up every millisecond until its count rises. Not in
// the figure: the late watch's wait for the archive before it publishes.
func BenchmarkRefreshToLookup(b *testing.B) {
	for range b.N {
		b.StopTimer()
		cfg, recs := newTestEnv(b, 3000)
		for i := range cfg.Streams {
			if cfg.Streams[i].Name == "payments" {
				cfg.Streams[i].AllowedLateness, cfg.Streams[i].Rolling = 30*time.Second, 10*time.Minute
			}
		}
		cfg.Stream.ServeAddr = "127.0.0.1:0"
		cfg.Stream.CommitInterval = 100 * time.Millisecond
		produce(b, cfg, recs)
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
			b.Fatal(err)
		}
		wcancel()
		s := payments(b, cfg)
		_, _, _, wm, err := CommittedStats(ctx, cfg, s)
		if err != nil {
			b.Fatal(err)
		}
		at := wm // every partition's live state holds (at − rolling, at]
		refreshes, lateEvents := lateRefreshes(b, cfg, recs, s.Name)
		c := lookupClient{base: "http://" + addr, hc: &http.Client{Timeout: 10 * time.Second}}
		count := func(key string) int64 {
			r := c.do(b, http.MethodGet, keyPath(s.Name, key, at), nil)
			if r.status != http.StatusOK {
				b.Fatalf("lookup %s: %d %s", key, r.status, r.body)
			}
			n, _ := strconv.ParseInt(fmt.Sprint(r.ans.Features["count"]), 10, 64)
			return n
		}
		var lat []float64
		seen := map[string]bool{}
		for i, e := range lateEvents {
			if len(lat) == 50 || seen[e.EventID] || !e.EventTime.After(at.Add(-s.Rolling)) || e.EventTime.After(at) {
				continue
			}
			seen[e.EventID] = true
			before := count(e.Key)
			b.StartTimer()
			t := time.Now()
			produce(b, cfg, refreshes[i:i+1])
			for deadline := t.Add(time.Minute); count(e.Key) == before; {
				if time.Now().After(deadline) {
					b.Fatalf("refresh of %s not counted within a minute", e.EventID)
				}
				time.Sleep(time.Millisecond) // the poll interval, not a synchronisation
			}
			lat = append(lat, float64(time.Since(t))/1e6)
			b.StopTimer()
		}
		cancel()
		<-done
		if len(lat) == 0 {
			b.Fatalf("none of %d too-late events inside the lookup's window", len(lateEvents))
		}
		slices.Sort(lat)
		b.ReportMetric(lat[len(lat)/2], "p50-ms")
		b.ReportMetric(lat[len(lat)*99/100], "p99-ms")
		b.ReportMetric(float64(len(lat)), "events")
	}
}
