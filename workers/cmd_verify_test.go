package workers

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"reckon/internal/config"
	"reckon/internal/testing/testenv"
	"reckon/streaming"
)

// TestVerify runs generator traffic (late, beyond allowed lateness,
// duplicates, poison) through an in-process stream worker on kfake and
// checks `reckon verify`: conserved (exit 0); with --truth it fails, since
// the stream alone misses the events beyond lateness until the batch
// correction; records produced outside the manifest make it fail, unless
// their run's manifest is given too (a run side by side on keys of its own).
func TestVerify(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	_, brokers := testenv.Kafka(t, 1, "")
	sets := []string{"--set", "kafka.brokers=" + brokers[0], "--set", "metrics.addr=",
		"--set", "stream_worker.commit_interval=20ms", "--set", "stream_worker.session_timeout=1s",
		"--set", "stream_worker.instance=verify-test",
		// The dev stack's demo streams: payments_hop, hopping windows on
		// the same records, judges lateness for itself (docs/adr/0041).
		"--set", "dev.demo=true"}
	cmd := func(args ...string) []string { return append(args, sets...) }
	if code, out, errb := runReckon(t, append(cmd("topics"), "apply")...); code != 0 {
		t.Fatalf("topics apply: exit %d: %s %s", code, out, errb)
	}
	man := filepath.Join(t.TempDir(), "manifest.json")
	gen := func(seed, manifest string, extra ...string) {
		args := cmd(append([]string{"generate", "--scenario", "payments", "--count", "3000", "--seed", seed,
			"--start", "2026-11-07T08:00:00Z", "--rate", "2", "--late-fraction", "0.1", "--beyond-lateness-fraction", "0.5",
			"--duplicate-fraction", "0.05", "--poison-fraction", "0.02"}, extra...)...)
		if manifest != "" {
			args = append(args, "--manifest", manifest)
		}
		if code, out, errb := runReckon(t, args...); code != 0 {
			t.Fatalf("generate: exit %d: %s %s", code, out, errb)
		}
	}
	gen("7", man)

	var kv []string
	for i := 1; i < len(sets); i += 2 {
		kv = append(kv, sets[i])
	}
	cfg, err := config.Load("", nil, kv)
	if err != nil {
		t.Fatal(err)
	}
	run := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := streaming.RunUntilCaughtUp(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
			t.Fatal(err)
		}
	}
	run()

	code, out, errb := runReckon(t, cmd("verify", "--manifest", man)...)
	t.Log("\n" + out)
	if code != 0 {
		t.Fatalf("verify: exit %d: %s", code, errb)
	}
	for _, want := range []string{"produced        3000", "unaccounted     0", "verify payments: conserved"} {
		if !strings.Contains(out, want) {
			t.Errorf("ledger lacks %q", want)
		}
	}
	if strings.Contains(out, "dead-lettered   0\n") || strings.Contains(out, "duplicates      0\n") || strings.Contains(out, "late output     0\n") {
		t.Errorf("traffic too clean to test the ledger")
	}
	// The hopping stream on the same records: its own ledger balances with
	// its own late records, and its windows are the manifest's.
	code, out, errb = runReckon(t, cmd("verify", "--manifest", man, "--stream", "payments_hop")...)
	t.Log("\n" + out)
	if code != 0 || !strings.Contains(out, "unaccounted     0") || !strings.Contains(out, "verify payments_hop: conserved") {
		t.Fatalf("verify --stream payments_hop: exit %d: %s", code, errb)
	}

	// The stream alone is not the truth: events beyond allowed lateness
	// went to the late output, and no batch correction has run.
	code, out, errb = runReckon(t, cmd("verify", "--manifest", man, "--truth")...)
	if code != 1 || !strings.Contains(errb, "not truthful") || !strings.Contains(out, "differ") {
		t.Fatalf("verify --truth before any correction: exit %d: %s\n%s", code, errb, out)
	}

	// Records the manifest does not know about are counted twice from its
	// point of view: the ledger must not balance.
	side := filepath.Join(t.TempDir(), "side.json")
	gen("8", side, "--key-prefix", "side-")
	run()
	code, out, errb = runReckon(t, cmd("verify", "--manifest", man)...)
	if code != 1 || !strings.Contains(errb, "not conserved") {
		t.Fatalf("verify after foreign traffic: exit %d: %s\n%s", code, errb, out)
	}
	// With that run's manifest the topic's traffic is accounted again.
	code, out, errb = runReckon(t, cmd("verify", "--manifest", man, "--manifest", side)...)
	if code != 0 || !strings.Contains(out, "produced        6000") || !strings.Contains(out, "unaccounted     0") {
		t.Fatalf("verify with both manifests: exit %d: %s\n%s", code, errb, out)
	}
	if code, _, errb := runReckon(t, cmd("verify", "--manifest", man, "--manifest", man)...); code != 2 ||
		!strings.Contains(errb, "--key-prefix") {
		t.Fatalf("verify with one manifest twice: exit %d: %s", code, errb)
	}

	if code, _, errb := runReckon(t, "verify"); code != 2 || !strings.Contains(errb, "--manifest") {
		t.Fatalf("verify without --manifest: exit %d: %s", code, errb)
	}
}
