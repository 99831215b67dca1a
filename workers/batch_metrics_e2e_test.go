package workers

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"reckon/activities"
	"reckon/internal/testing/promtool"
	"reckon/internal/testing/testlog"
)

// TestBatchMetricsEndToEnd: `reckon batch` serves its figures on /metrics
// and they move, on the real Temporal dev server and kfake with the stream
// worker in process. Records wait in a raw topic before any archive runs
// (archive lag in offsets, no archived_through yet); the archive catches
// up (lag 0, lag seconds appear); a second batch into the same ended hour
// and partition leaves that hour awaiting compaction; live traffic with
// too-late events makes targeted corrections (horizon checks,
// recomputes, corrections and time to truth, trigger correction); a
// reconciliation adds trigger reconcile. Z-report keys by status exist
// (their traffic is the walkthrough's).
//
//	go test ./workers -run TestBatchMetricsEndToEnd -v -args -e2e
func TestBatchMetricsEndToEnd(t *testing.T) {
	if !*e2e {
		t.Skip("run with -e2e")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	st := newTruthStack(t, ctx, stackOptions{externalBatch: true})
	st.runStream(t, ctx)
	pay, _ := st.cfg.StreamByName("payments")
	rp := newRaceProducer(t, st.cfg, pay.Topic)
	// An hour that has ended: its files await compaction.
	old := time.Now().UTC().Truncate(time.Hour).Add(-90 * time.Minute)
	batch := func(from, n int) []raceEvent {
		var evs []raceEvent
		for i := from; i < from+n; i++ {
			evs = append(evs, raceEvent{name: fmt.Sprintf("metrics-old-%d", i), user: "u1", amount: float64(i + 1), at: old.Add(time.Duration(i) * time.Second)})
		}
		return evs
	}
	rp.must(t, ctx, 0, batch(0, 5)...)

	// The worker without its long-running workflows: nothing archives yet.
	url := st.batchProcess(t, ctx, "--no-start")
	part0 := fmt.Sprintf(`{topic=%q,partition="0"}`, pay.Topic)
	m := scrapeMetrics(t, ctx, url)
	if got := m["reckon_batch_archive_lag_offsets"+part0]; got != 5 {
		t.Errorf("archive lag before any archive: %v, want 5 offsets", got)
	}
	if _, ok := m["reckon_batch_archive_lag_seconds"+part0]; ok {
		t.Errorf("archive lag seconds of a partition never archived")
	}
	for _, s := range []string{"waiting", "matched", "mismatched", "incomplete"} {
		if _, ok := m[fmt.Sprintf(`reckon_batch_zreport_keys{status=%q}`, s)]; !ok {
			t.Errorf("no Z-report keys of status %s", s)
		}
	}
	backlog := fmt.Sprintf(`reckon_batch_compaction_backlog_files{topic=%q}`, pay.Topic)
	if got, ok := m[backlog]; !ok || got != 0 {
		t.Errorf("compaction backlog before any archive: %v (%v), want 0", got, ok)
	}

	// The archive runs: the lag goes to 0, and the next batch into the
	// same hour is a second file there.
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := startArchives(ctx, st.cfg, st.tc, quiet); err != nil {
		t.Fatal(err)
	}
	if err := startTruth(ctx, st.cfg, st.tc, quiet); err != nil {
		t.Fatal(err)
	}
	st.waitLakeHolds(t, ctx, pay.Topic, 0, 5)
	rp.must(t, ctx, 0, batch(5, 5)...)
	st.waitLakeHolds(t, ctx, pay.Topic, 0, 10)
	waitFor(t, 2*time.Minute, "the metrics to show the archive caught up and the hour awaiting compaction", func() (bool, string) {
		m = scrapeMetrics(t, ctx, url)
		lag, secs := m["reckon_batch_archive_lag_offsets"+part0], m["reckon_batch_archive_lag_seconds"+part0]
		_, hasSecs := m["reckon_batch_archive_lag_seconds"+part0]
		return lag == 0 && hasSecs && secs < 60 && m[backlog] >= 2, fmt.Sprintf("lag %v offsets, %v s (%v); backlog %v files", lag, secs, hasSecs, m[backlog])
	})

	// Too-late events: targeted corrections.
	tr := st.liveTraffic(t, ctx, 11, 1200, 100)
	if tooLate, _ := st.tooLate(t, ctx, tr); len(tooLate) == 0 {
		t.Fatal("the traffic had no too-late event")
	}
	corr := fmt.Sprintf(`{stream="payments",trigger=%q}`, activities.TriggerCorrection)
	waitFor(t, 2*time.Minute, "targeted corrections in the metrics", func() (bool, string) {
		m = scrapeMetrics(t, ctx, url)
		n := m[fmt.Sprintf(`reckon_batch_recomputes_total{stream="payments",trigger=%q,dry_run="false"}`, activities.TriggerCorrection)]
		return n > 0 && m["reckon_batch_time_to_truth_seconds_count"+corr] == n && m[`reckon_batch_horizon_checks_total{stream="payments",result="final"}`] >= n,
			fmt.Sprintf("recomputes %v, time to truth %v; %s", n, m["reckon_batch_time_to_truth_seconds_count"+corr], seriesOf(m, "reckon_batch_horizon"))
	})
	if _, ok := m["reckon_batch_windows_checked_total"+corr]; !ok {
		t.Errorf("no windows checked by corrections")
	}

	// A reconciliation of the day of the traffic.
	day := time.Now().UTC().Format(time.DateOnly)
	args := []string{"reconcile", "--date", day, "--wait", "--set", "batch.horizon_wait=3m"}
	for _, s := range st.sets {
		args = append(args, "--set", s)
	}
	var out, errOut bytes.Buffer
	if code := Main(ctx, args, nil, &out, &errOut, nil); code != 0 {
		t.Fatalf("reckon reconcile: exit %d: %s\n%s", code, errOut.String(), out.String())
	}
	rec := fmt.Sprintf(`{stream="payments",trigger=%q}`, activities.TriggerReconcile)
	m = scrapeMetrics(t, ctx, url)
	if n := m[fmt.Sprintf(`reckon_batch_recomputes_total{stream="payments",trigger=%q,dry_run="false"}`, activities.TriggerReconcile)]; n != 1 || m["reckon_batch_time_to_truth_seconds_count"+rec] != 1 {
		t.Errorf("after one reconciliation: %v recomputes of payments, %v times to truth", n, m["reckon_batch_time_to_truth_seconds_count"+rec])
	}
	if _, ok := m["reckon_batch_corrections_total"+rec]; !ok {
		t.Errorf("no corrections series of the reconciliation")
	}
	t.Logf("batch figures at the end: %s", seriesOf(m, "reckon_batch_"))
	if promtool.Found() { // the real scrape, not only TestMetricsPassPromtool's populated registry
		if out, err := promtool.CheckMetrics(t, scrapeText(t, ctx, url)); err != nil {
			t.Errorf("the batch worker's /metrics: %v\n%s", err, out)
		}
	}
}

// batchProcess runs `reckon batch` in process with st's configuration (a
// file: the streams' second-scale windows are not --set keys) and its
// metrics on a free port, until tb's cleanup; it returns the /metrics URL.
func (st *truthStack) batchProcess(tb testing.TB, ctx context.Context, flags ...string) string {
	tb.Helper()
	b, err := yaml.Marshal(st.cfg)
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), "reckon.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	logs := &testlog.Buffer{}
	bctx, stop := context.WithCancel(ctx)
	done := make(chan int, 1)
	args := append([]string{"batch", "--config", path, "--set", "metrics.addr=127.0.0.1:0"}, flags...)
	go func() { done <- Main(bctx, args, nil, logs, logs, nil) }()
	tb.Cleanup(func() {
		stop()
		if code := <-done; code != 0 || tb.Failed() {
			tb.Errorf("reckon batch: exit %d:\n%s", code, logs.String())
		}
	})
	url := regexp.MustCompile(`msg=metrics url=(\S+)`)
	var found string
	waitFor(tb, 2*time.Minute, "reckon batch to serve /metrics", func() (bool, string) {
		if m := url.FindStringSubmatch(logs.String()); m != nil {
			found = m[1]
			return true, ""
		}
		return false, logs.String()
	})
	return found
}

// seriesOf lists m's series whose names start with prefix.
func seriesOf(m map[string]float64, prefix string) string {
	var out []string
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			out = append(out, fmt.Sprintf("%s %g", k, v))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// scrapeText is one scrape of url.
func scrapeText(tb testing.TB, ctx context.Context, url string) string {
	tb.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// scrapeMetrics is one scrape of url: value by series (name and labels as
// written).
func scrapeMetrics(tb testing.TB, ctx context.Context, url string) map[string]float64 {
	tb.Helper()
	return parseMetrics(tb, scrapeText(tb, ctx, url))
}

func parseMetrics(tb testing.TB, text string) map[string]float64 {
	tb.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			tb.Fatalf("bad metrics line %q", line)
		}
		out[line[:i]] = v
	}
	return out
}
