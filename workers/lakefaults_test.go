package workers

import (
	"io"
	"strings"
	"testing"

	"reckon/internal/config"
)

// TestLakeFaultsFromConfig: lake.faults.rate turns storage fault
// injection on for every lake the process opens (chaos only), with the
// seed; the default leaves it off.
func TestLakeFaultsFromConfig(t *testing.T) {
	cfg, err := config.Load("", nil, []string{"lake.root=" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if opts, err := lakeOptions(cfg.Lake, ""); err != nil || opts.Wrap != nil || lakeFaults(cfg.Lake) != nil {
		t.Fatalf("default config: faults %+v, %v; want none", lakeFaults(cfg.Lake), err)
	}
	cfg, err = config.Load("", []string{"RECKON_LAKE_FAULTS_RATE=1"}, []string{"lake.root=" + t.TempDir(), "lake.faults.seed=9"})
	if err != nil {
		t.Fatal(err)
	}
	opts, err := lakeOptions(cfg.Lake, "")
	if f := lakeFaults(cfg.Lake); err != nil || opts.Wrap == nil || f == nil || f.Seed != 9 {
		t.Fatalf("lake.faults set: %+v, %v", f, err)
	}
	l, err := openConfiguredLake(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	// At rate 1 nearly every call draws a transient fault; the lake's
	// bounded retries (docs/adr/0022-lake-fault-injection.md) get most
	// writes through, and a write they give up on names the fault.
	failed := 0
	for range 20 {
		_, err := l.WriteFile(t.Context(), "reports/x/y.json", func(w io.Writer) error { _, err := w.Write([]byte("{}")); return err })
		if err != nil {
			failed++
			if !strings.Contains(err.Error(), "lake: injected ") {
				t.Errorf("a failed write does not name the fault: %v", err)
			}
		}
	}
	if failed == 20 || l.FaultsInjected() < 20 {
		t.Errorf("rate 1: %d of 20 writes failed, %d faults injected; want faults on every write, most retried through", failed, l.FaultsInjected())
	}
	if _, err := config.Load("", nil, []string{"lake.root=/tmp/x", "lake.faults.rate=1.5"}); err == nil {
		t.Error("lake.faults.rate 1.5 accepted")
	}
}
