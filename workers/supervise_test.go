package workers

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestProcHeldDown: a component that exits while its hold file exists is
// not restarted until the file is removed (tools/outages relies on it).
func TestProcHeldDown(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var out bytes.Buffer
	p := &proc{name: "x", path: "/bin/sh", args: []string{"-c", "exit 3"}, logDir: dir, runDir: dir, out: &out, outMu: &mu}
	if err := os.WriteFile(p.holdFile(), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.run(ctx) }()
	defer func() { cancel(); <-done }()

	said := func() string { mu.Lock(); defer mu.Unlock(); return out.String() }
	starts := func() int {
		b, _ := os.ReadFile(filepath.Join(dir, "x.log"))
		return strings.Count(string(b), "---- x start #")
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 10s; supervisor said:\n%s", what, said())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("held-down message", func() bool { return strings.Contains(said(), "held down while") })
	// Three looks at the hold file later, still the first start only.
	looked := p.holdChecks.Load()
	waitFor("three more looks at the hold file", func() bool { return p.holdChecks.Load() >= looked+3 })
	if n := starts(); n != 1 {
		t.Fatalf("held component started %d times, want 1", n)
	}
	if err := os.Remove(p.holdFile()); err != nil {
		t.Fatal(err)
	}
	waitFor("restart after the hold was released", func() bool { return starts() >= 2 })
	if !strings.Contains(said(), "hold released; restarting") {
		t.Errorf("supervisor did not say the hold was released:\n%s", said())
	}
}
