package seaweed

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrepareRefusesEarly: a missing binary and a bad bucket name are
// errors before anything starts, not a wait that times out.
func TestPrepareRefusesEarly(t *testing.T) {
	dir := t.TempDir()
	if _, err := Prepare(Options{Bin: filepath.Join(dir, "no-weed"), Dir: dir}); !errors.Is(err, ErrNoBinary) {
		t.Errorf("missing binary: %v, want ErrNoBinary", err)
	}
	if _, err := Prepare(Options{Bin: "/bin/sh", Dir: dir, Buckets: []string{"b"}}); err == nil || !strings.Contains(err.Error(), `bucket "b"`) {
		t.Errorf("bucket name of one letter: %v", err)
	}
	if _, err := Prepare(Options{Bin: "/bin/sh"}); err == nil {
		t.Error("no Dir: no error")
	}
}

// TestPrepareCommandLine: loopback only, the S3 port asked for, eight
// distinct ports, buckets not created behind the client's back.
func TestPrepareCommandLine(t *testing.T) {
	su, err := Prepare(Options{Bin: "/bin/sh", Dir: t.TempDir(), Port: 18999, Buckets: []string{"reckon-lake"}})
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(su.Args, " ")
	for _, want := range []string{"-ip.bind=127.0.0.1", "-s3.port=18999", "-s3.autoCreateBucket=false", "-master.telemetry=false"} {
		if !strings.Contains(args, want) {
			t.Errorf("command line lacks %s: %s", want, args)
		}
	}
	if su.Endpoint != "http://127.0.0.1:18999" || su.AccessKeyID == "" || su.SecretAccessKey == "" {
		t.Errorf("setup %+v", su)
	}
	ports := map[string]bool{}
	for _, a := range su.Args {
		if k, v, ok := strings.Cut(a, "="); ok && strings.Contains(k, "port") && v != "0" { // 0: that server is off
			if ports[v] {
				t.Errorf("port %s used twice: %s", v, args)
			}
			ports[v] = true
		}
	}
	if len(ports) != 8 {
		t.Errorf("%d ports on the command line, want 8: %s", len(ports), args)
	}
}
