package workers

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"reckon/internal/config"
	"reckon/internal/metrics"
	"reckon/lake"
	"reckon/lake/storage/errorfs"
)

// TestLakeRetriesReachTheBatchMetrics: a lake whose storage fails now and
// then (errorfs through lake.Options.Wrap) retries the failed calls, and the batch
// worker's /metrics shows those retries by operation.
func TestLakeRetriesReachTheBatchMetrics(t *testing.T) {
	l, err := lake.Open(lake.Options{Root: filepath.Join(t.TempDir(), "lake"), Wrap: errorfs.UniformFaults(7, 0.3).Wrap})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if _, err := l.WriteReport(t.Context(), "metrics-test", fmt.Sprint(i), []byte(`{}`)); err != nil {
			t.Logf("report %d: %v (retries gave up: counted too)", i, err)
		}
	}
	r := metrics.NewRegistry()
	m := newBatchMetrics(r, &config.Config{}, nil, l, nil, slog.New(slog.DiscardHandler))
	m.storageStats(t.Context())
	var b strings.Builder
	r.WriteText(&b)
	if !strings.Contains(b.String(), `reckon_lake_storage_retries_total{op="put"}`) {
		t.Fatalf("no put retries in the batch metrics after 40 writes at a 30%% fault rate:\n%s", b.String())
	}
}
