package workers

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"reckon/internal/testing/testlog"
)

// TestDevCleanStopLeavesNoPidFiles runs `reckon dev` with only its broker
// (the children are this test binary, see TestMain), stops it as Ctrl-C
// does, and finds no pid file left in the run dir: neither the broker's
// nor a stale one an earlier, killed run left for a component this run
// skipped.
func TestDevCleanStopLeavesNoPidFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	t.Setenv(envChild, "1") // children inherit it and run as reckon
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(runDir, "gen-sensors.pid")
	if err := os.WriteFile(stale, []byte("999999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb testlog.Buffer // archive_kill_test.go
	code := make(chan int, 1)
	go func() {
		code <- Main(ctx, []string{"dev", "--without", "temporal,ofd,stream,batch,generate",
			"--set", "dev.dir=" + dir, "--set", "dev.kafka_port=" + strconv.Itoa(port)}, nil, &out, &errb, nil)
	}()
	if ok, _ := pollUntil(60*time.Second, func() (bool, string) { return strings.Contains(out.String(), "reckon dev: up."), "" }); !ok {
		cancel()
		t.Fatalf("dev never came up:\n%s\n%s", out.String(), errb.String())
	}
	// Every start-up wait says what it waits for before it waits.
	o := out.String()
	if w, r := strings.Index(o, "waiting for the broker on 127.0.0.1:"+strconv.Itoa(port)), strings.Index(o, "broker ready"); w < 0 || r < w {
		t.Errorf("the broker wait did not say what it waits for first:\n%s", o)
	}
	// lake.root left at its default follows the moved dev dir.
	if !strings.Contains(o, "lake            "+filepath.Join(dir, "lake")+"   (./bin/reckon lake ls --lake "+filepath.Join(dir, "lake")+")") {
		t.Errorf("the default lake did not follow dev.dir %s:\n%s", dir, o)
	}
	if !strings.Contains(o, "waiting for the broker to apply the topic map") {
		t.Errorf("the topic map's apply did not say it waits:\n%s", o)
	}
	if _, err := os.Stat(filepath.Join(runDir, "broker.pid")); err != nil {
		t.Fatalf("broker running without a pid file: %v", err)
	}
	cancel() // what Ctrl-C does
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("dev exited %d: %s", c, errb.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("dev did not stop")
	}
	left, err := filepath.Glob(filepath.Join(runDir, "*.pid"))
	if err != nil || len(left) > 0 {
		t.Fatalf("pid files left after a clean stop: %v %v\n%s", left, err, out.String())
	}
}

// TestDevStartsSQL: with reckon-sql at hand (here a stand-in on PATH),
// `reckon dev` supervises `reckon-sql serve` with the stack's flags and
// prints the SQL address; without it, it says so and runs the rest.
func TestDevStartsSQL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	t.Setenv(envChild, "1")
	bin := t.TempDir()
	args := filepath.Join(bin, "args")
	script := "#!/bin/sh\necho \"$*\" > " + args + "\nexec sleep 600\n"
	if err := os.WriteFile(filepath.Join(bin, "reckon-sql"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb testlog.Buffer
	code := make(chan int, 1)
	go func() {
		code <- Main(ctx, []string{"dev", "--without", "temporal,ofd,stream,batch,generate",
			"--set", "dev.dir=" + dir, "--set", "dev.kafka_port=" + strconv.Itoa(port), "--set", "sql.listen=127.0.0.1:32999"}, nil, &out, &errb, nil)
	}()
	// The supervisor writes the pid file once the process has started,
	// which may be after the stand-in wrote its arguments: wait for both.
	pidFile := filepath.Join(dir, "run", "sql.pid")
	ok, _ := pollUntil(60*time.Second, func() (bool, string) {
		b, _ := os.ReadFile(args)
		_, perr := os.Stat(pidFile)
		return strings.Contains(out.String(), "reckon dev: up.") && len(b) > 0 && perr == nil, ""
	})
	if !ok {
		cancel()
		_, perr := os.Stat(pidFile)
		t.Fatalf("dev never came up with sql (pid file: %v):\n%s\n%s", perr, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "SQL             grpc://127.0.0.1:32999") {
		t.Errorf("the SQL address is not printed:\n%s", out.String())
	}
	if b, _ := os.ReadFile(args); !strings.HasPrefix(string(b), "serve ") || !strings.Contains(string(b), "sql.listen=127.0.0.1:32999") {
		t.Errorf("reckon-sql started with %q", b)
	}
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("dev exited %d: %s", c, errb.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("dev did not stop")
	}
}

// TestDevOFDPortIsADevKey: with the default OFD port taken (another dev
// stack's simulator), `reckon dev` with its own dev.ofd_port starts its
// simulator there and says so.
func TestDevOFDPortIsADevKey(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	t.Setenv(envChild, "1")
	// The other stack's simulator on the default port: taken here, or
	// already taken by someone else.
	if other, err := net.Listen("tcp", "127.0.0.1:8280"); err == nil {
		defer other.Close()
	}
	free := func() int {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().(*net.TCPAddr).Port
	}
	kafkaPort, ofdPort := free(), free()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb testlog.Buffer
	code := make(chan int, 1)
	go func() {
		code <- Main(ctx, []string{"dev", "--without", "temporal,stream,batch,generate,sql",
			"--set", "dev.dir=" + dir, "--set", "dev.kafka_port=" + strconv.Itoa(kafkaPort),
			"--set", "dev.ofd_port=" + strconv.Itoa(ofdPort)}, nil, &out, &errb, nil)
	}()
	ofdURL := "http://127.0.0.1:" + strconv.Itoa(ofdPort)
	ok, last := pollUntil(60*time.Second, func() (bool, string) {
		if !strings.Contains(out.String(), "reckon dev: up.") {
			return false, "not up"
		}
		resp, err := http.Get(ofdURL + "/healthz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	if !ok {
		cancel()
		log, _ := os.ReadFile(filepath.Join(dir, "logs", "ofd.log"))
		t.Fatalf("no simulator on dev.ofd_port %d (%s):\n%s\n%s\nofd.log:\n%s", ofdPort, last, out.String(), errb.String(), log)
	}
	if !strings.Contains(out.String(), "OFD operator    "+ofdURL) {
		t.Errorf("the up message does not name the simulator at %s:\n%s", ofdURL, out.String())
	}
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("dev exited %d: %s", c, errb.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("dev did not stop")
	}
}
