// Package s3test gives tests a real S3 server: one SeaweedFS `weed server
// -s3` per test binary (internal/seaweed), started on first use on free
// loopback ports with a temporary data directory, and a key prefix or a
// bucket of their own on it. Without the weed binary (`make weed` builds
// ./bin/weed) a test is skipped, or fails when RECKON_TEST_REQUIRE_S3 is
// set (`make test` sets it). For tests only.
package s3test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"reckon/internal/seaweed"
)

// EnvBin names the weed binary (`make test` sets it to ./bin/weed);
// default ./bin/weed at the module root.
const EnvBin = "RECKON_TEST_WEED_BIN"

// EnvRequire makes a missing weed binary a failure instead of a skip.
const EnvRequire = "RECKON_TEST_REQUIRE_S3"

// Bucket is the shared server's bucket; each test works under its own
// Prefix in it.
const Bucket = "reckon-lake"

var (
	mu     sync.Mutex // protects following fields
	srv    *seaweed.Server
	srvDir string
	srvErr error
	seq    atomic.Int64
)

// Bin returns the weed binary, or skips (fails with EnvRequire) the test.
func Bin(t testing.TB) string {
	t.Helper()
	p := os.Getenv(EnvBin)
	if p == "" {
		_, file, _, _ := runtime.Caller(0)
		p = filepath.Join(filepath.Dir(file), "..", "..", "..", "bin", "weed")
	}
	if _, err := os.Stat(p); err != nil {
		msg := fmt.Sprintf("no SeaweedFS weed binary at %s (run `make weed`): the real-S3 variant is skipped", p)
		if os.Getenv(EnvRequire) != "" {
			t.Fatalf("%s (%s is set)", msg, EnvRequire)
		}
		t.Skip(msg)
	}
	return p
}

// Server returns the test binary's shared server, starting it on first
// use with Bucket created. A server that failed to start fails every test
// that asks for it.
func Server(t testing.TB) *seaweed.Server {
	t.Helper()
	bin := Bin(t)
	mu.Lock()
	defer mu.Unlock()
	if srv == nil && srvErr == nil {
		srvDir, srvErr = os.MkdirTemp("", "reckon-weed-")
		if srvErr == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			srv, srvErr = seaweed.Start(ctx, seaweed.Options{Bin: bin, Dir: srvDir, Buckets: []string{Bucket}})
			cancel()
		}
	}
	if srvErr != nil {
		t.Fatalf("start the SeaweedFS S3 server: %v", srvErr)
	}
	select {
	case <-srv.Done():
		t.Fatalf("the SeaweedFS S3 server exited; log %s", srv.Log)
	default:
	}
	return srv
}

// Stop ends the shared server and removes its data; call it from TestMain
// after m.Run (the server is also killed when the test binary exits).
func Stop() {
	mu.Lock()
	defer mu.Unlock()
	if srv != nil {
		srv.Stop()
	}
	if srvDir != "" {
		os.RemoveAll(srvDir)
	}
	srv, srvDir, srvErr = nil, "", nil
}

var unsafe = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// Prefix returns a key prefix in Bucket no other test uses, e.g.
// "t/TestX_s3-weed-12".
func Prefix(t testing.TB) string {
	name := unsafe.ReplaceAllString(t.Name(), "_")
	if len(name) > 80 {
		name = name[len(name)-80:]
	}
	return fmt.Sprintf("t/%s-%d", name, seq.Add(1))
}

// NewBucket creates a bucket of the test's own on the shared server (for
// a test that deletes it) and returns its name.
func NewBucket(t testing.TB) string {
	t.Helper()
	s := Server(t)
	c := Client(t)
	name := strings.ToLower(fmt.Sprintf("reckon-t%d-%d", os.Getpid(), seq.Add(1)))
	if err := c.MakeBucket(t.Context(), name, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("make bucket %s on %s: %v", name, s.Endpoint, err)
	}
	return name
}

// Client returns a minio-go client for the shared server.
func Client(t testing.TB) *minio.Client {
	t.Helper()
	c, err := Server(t).Client()
	if err != nil {
		t.Fatal(err)
	}
	return c
}
