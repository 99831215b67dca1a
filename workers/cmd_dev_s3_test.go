package workers

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"reckon/internal/config"
	"reckon/internal/testing/s3test"
	"reckon/internal/testing/testlog"
)

// TestDevS3: `reckon dev --set dev.s3=true` supervises a SeaweedFS server
// (ADR 0035), waits for it to take a write before it says it is up, and a
// command given the same --set finds the lake on it; Ctrl-C stops it and
// leaves no pid file.
func TestDevS3(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	weed := s3test.Bin(t)
	t.Setenv(envChild, "1") // children inherit it and run as reckon
	dir := t.TempDir()
	var ports []int
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
	}
	sets := []string{"dev.dir=" + dir, "dev.kafka_port=" + strconv.Itoa(ports[0]), "dev.s3=true",
		"dev.s3_port=" + strconv.Itoa(ports[1]), "dev.weed_bin=" + weed}
	args := []string{"dev", "--without", "temporal,ofd,stream,batch,generate,sql"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb testlog.Buffer // archive_kill_test.go
	code := make(chan int, 1)
	go func() { code <- Main(ctx, args, nil, &out, &errb, nil) }()
	if ok, _ := pollUntil(3*time.Minute, func() (bool, string) { return strings.Contains(out.String(), "reckon dev: up."), "" }); !ok {
		cancel()
		t.Fatalf("dev never came up:\n%s\n%s", out.String(), errb.String())
	}
	o := out.String()
	endpoint := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	if w, r := strings.Index(o, "waiting for the S3 server on "+endpoint), strings.Index(o, "s3 ready on "+endpoint); w < 0 || r < w {
		t.Errorf("the S3 wait did not say what it waits for first:\n%s", o)
	}
	if !strings.Contains(o, "lake            "+config.DevS3Root) {
		t.Errorf("the lake is not on the dev S3 server:\n%s", o)
	}
	// Another command with the same --set reads and writes that lake.
	cfg, err := config.Load("", nil, sets)
	if err != nil {
		t.Fatal(err)
	}
	l, err := openConfiguredLake(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.WriteReport(t.Context(), "devs3", "probe", []byte(`{"ok":true}`)); err != nil {
		t.Fatalf("write to the dev S3 lake: %v", err)
	}
	if b, err := l.ReadReport(t.Context(), "devs3", "probe"); err != nil || string(b) != `{"ok":true}` {
		t.Fatalf("read back %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "run", "s3.pid")); err != nil {
		t.Errorf("s3 running without a pid file: %v", err)
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
	if left, _ := filepath.Glob(filepath.Join(dir, "run", "*.pid")); len(left) > 0 {
		t.Errorf("pid files left after a clean stop: %v", left)
	}
}
