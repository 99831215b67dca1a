// Package testenv starts the real components reckon's integration tests talk
// to over the wire: an in-process kfake broker and the Temporal dev server
// from the pinned CLI in ./bin (installed by `make`).
package testenv

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"reckon/workflows"
)

// EnvTemporalBin names the variable `make test` sets to ./bin/temporal.
const EnvTemporalBin = "RECKON_TEST_TEMPORAL_BIN"

// EnvTemporalArgs adds flags to the test dev server's command line.
const EnvTemporalArgs = "RECKON_TEST_TEMPORAL_ARGS"

// TemporalBin returns the pinned temporal CLI. When `make test` set
// RECKON_TEST_TEMPORAL_BIN, a missing binary fails the test; a plain
// `go test` without ./bin/temporal skips tests that need it.
func TemporalBin(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(EnvTemporalBin); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s: %v", EnvTemporalBin, p, err)
		}
		return p
	}
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "..", "bin", "temporal")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("no temporal CLI at %s: run `make temporal` or `make test`", p)
	}
	return p
}

// Temporal starts a dev server (in-memory, headless, reckon's search
// attributes registered) for the test and returns a connected client.
func Temporal(t testing.TB) (client.Client, string) {
	t.Helper()
	bin := TemporalBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var extra []string
	for _, sa := range workflows.SearchAttributes() {
		extra = append(extra, "--search-attribute", sa)
	}
	// Extra dev-server flags for experiments, e.g.
	// RECKON_TEST_TEMPORAL_ARGS='--dynamic-config-value matching.numTaskqueueReadPartitions=1'.
	extra = append(extra, strings.Fields(os.Getenv(EnvTemporalArgs))...)
	srv, err := testsuite.StartDevServer(ctx, testsuite.DevServerOptions{
		ExistingPath: bin,
		ClientOptions: &client.Options{
			Logger: tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		},
		LogLevel:  "error",
		ExtraArgs: extra,
		Stdout:    testWriter{t},
		Stderr:    testWriter{t},
	})
	if err != nil {
		t.Fatalf("start temporal dev server: %v", err)
	}
	t.Cleanup(func() {
		srv.Client().Close()
		_ = srv.Stop()
	})
	return srv.Client(), srv.FrontendHostPort()
}

// Kafka starts an in-process kfake cluster with the given topics and returns
// its addresses. dataDir, when not empty, persists it.
func Kafka(t testing.TB, partitions int32, dataDir string, topics ...string) (*kfake.Cluster, []string) {
	t.Helper()
	// Short group session timeouts let tests move a killed member's
	// partitions quickly.
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...), kfake.GroupMinSessionTimeout(500 * time.Millisecond)}
	if dataDir != "" {
		opts = append(opts, kfake.DataDir(dataDir))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c, c.ListenAddrs()
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	if s := strings.TrimSpace(string(p)); s != "" {
		w.t.Log(s)
	}
	return len(p), nil
}
