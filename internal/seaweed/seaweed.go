// Package seaweed runs a real S3-compatible server for `reckon dev` and the
// tests: SeaweedFS' `weed server -s3` (master, volume server, filer and S3
// gateway in one process, on loopback, data in one directory), built from
// the Go module proxy into ./bin/weed by `make weed` at a pinned version
// (docs/adr/0035-real-s3-server.md). It is for development and tests, not a
// way to run production storage: a user runs their own S3.
package seaweed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// ErrNoBinary is returned by Start when the weed binary is missing.
var ErrNoBinary = errors.New("seaweed: no weed binary")

// Options of Start.
type Options struct {
	// Bin is the weed binary. Default "./bin/weed".
	Bin string
	// Dir holds the server's data, its identities file and its log; it is
	// created if missing and kept (a restart over it keeps the objects).
	// Required.
	Dir string
	// Port is the S3 gateway's port; 0 picks a free one. The master,
	// volume server and filer (and each one's gRPC port) always take free
	// ports: nothing outside talks to them.
	Port int
	// Buckets are created once the server answers.
	Buckets []string
	// AccessKeyID and SecretAccessKey form the one identity the gateway
	// accepts (every request is signed and checked). Default "reckon" and
	// "reckon-dev-secret".
	AccessKeyID, SecretAccessKey string
	// Timeout bounds the wait for the server to take a write. Default 90s.
	Timeout time.Duration
}

// Setup is a weed server made ready to start: its command line, and where
// and to whom its S3 gateway answers. `reckon dev` supervises the command
// as one of its components; Start runs it for tests.
type Setup struct {
	// Bin and Args are the command line; it runs in Dir.
	Bin  string
	Args []string
	Dir  string
	// Endpoint is the S3 gateway's URL, http://127.0.0.1:<port>.
	Endpoint string
	// AccessKeyID and SecretAccessKey are the identity it accepts.
	AccessKeyID, SecretAccessKey string
	// Buckets are made by WaitReady.
	Buckets []string
	timeout time.Duration
}

// Prepare checks the binary, creates opts.Dir with the identities file
// and picks the ports.
func Prepare(opts Options) (*Setup, error) {
	if opts.Bin == "" {
		opts.Bin = "./bin/weed"
	}
	if opts.AccessKeyID == "" {
		opts.AccessKeyID, opts.SecretAccessKey = "reckon", "reckon-dev-secret"
	}
	if opts.Timeout == 0 {
		opts.Timeout = 90 * time.Second
	}
	if opts.Dir == "" {
		return nil, errors.New("seaweed: Options.Dir is required")
	}
	for _, b := range opts.Buckets {
		if err := s3utils.CheckValidBucketNameStrict(b); err != nil {
			return nil, fmt.Errorf("seaweed: bucket %q: %w", b, err)
		}
	}
	bin, err := filepath.Abs(opts.Bin)
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		return nil, fmt.Errorf("%w at %s (run `make weed`): %v", ErrNoBinary, opts.Bin, err)
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("seaweed: %w", err)
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, fmt.Errorf("seaweed: %w", err)
	}
	ident := filepath.Join(dir, "s3-identities.json")
	if err := writeIdentities(ident, opts.AccessKeyID, opts.SecretAccessKey); err != nil {
		return nil, err
	}
	ports, err := freePorts(8)
	if err != nil {
		return nil, err
	}
	if opts.Port != 0 {
		ports[0] = opts.Port
	}
	p := func(i int) string { return strconv.Itoa(ports[i]) }
	args := []string{"server",
		"-dir=" + data, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-master.port=" + p(1), "-master.port.grpc=" + p(2),
		"-master.volumeSizeLimitMB=64", "-master.telemetry=false",
		"-volume.port=" + p(3), "-volume.port.grpc=" + p(4), "-volume.max=100", "-volume.preStopSeconds=0",
		"-filer", "-filer.port=" + p(5), "-filer.port.grpc=" + p(6),
		"-s3", "-s3.port=" + p(0), "-s3.port.grpc=" + p(7),
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.config=" + ident,
		// As AWS S3: a PUT into a missing bucket fails (NoSuchBucket).
		"-s3.autoCreateBucket=false",
	}
	return &Setup{Bin: bin, Args: args, Dir: dir, Endpoint: "http://127.0.0.1:" + p(0),
		AccessKeyID: opts.AccessKeyID, SecretAccessKey: opts.SecretAccessKey,
		Buckets: opts.Buckets, timeout: opts.Timeout}, nil
}

// Server is a running weed server. Stop ends it.
type Server struct {
	*Setup
	// Log is the server's log file.
	Log string

	cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done is closed
	once sync.Once
}

// Start starts weed server with an S3 gateway on loopback and returns when
// a test object can be written, read and deleted in each of opts.Buckets
// (the volume server has joined the master). ctx bounds the start only;
// the server runs until Stop.
func Start(ctx context.Context, opts Options) (*Server, error) {
	// A port picked free may be taken before weed binds it: try again
	// with new ones when the server exits while starting.
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		su, err := Prepare(opts)
		if err != nil {
			return nil, err
		}
		s, err := start(ctx, su)
		if err == nil {
			return s, nil
		}
		last = err
		if ctx.Err() != nil || !errors.Is(err, errExited) {
			break
		}
	}
	return nil, last
}

var errExited = errors.New("seaweed: weed server exited while starting")

func start(ctx context.Context, su *Setup) (*Server, error) {
	logPath := filepath.Join(su.Dir, "weed.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("seaweed: %w", err)
	}
	cmd := exec.Command(su.Bin, su.Args...)
	cmd.Dir = su.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, and killed with the process that started it
	// (a test binary that dies leaves no server behind).
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("seaweed: start %s: %w", su.Bin, err)
	}
	s := &Server{Setup: su, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		s.err = cmd.Wait()
		logf.Close()
		close(s.done)
	}()
	if err := su.wait(ctx, s.done); err != nil {
		s.Stop()
		if errors.Is(err, errExited) {
			err = fmt.Errorf("%w (%v); log %s:\n%s", err, s.err, logPath, tail(logPath))
		} else {
			err = fmt.Errorf("%w; log %s:\n%s", err, logPath, tail(logPath))
		}
		return nil, err
	}
	return s, nil
}

// WaitReady waits until every bucket of the setup exists and takes a
// write, read and delete, for at most Options.Timeout.
func (su *Setup) WaitReady(ctx context.Context) error { return su.wait(ctx, nil) }

// wait is WaitReady that also gives up when exited is closed.
func (su *Setup) wait(ctx context.Context, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, su.timeout)
	defer cancel()
	c, err := su.Client()
	if err != nil {
		return err
	}
	buckets := su.Buckets
	if len(buckets) == 0 {
		buckets = []string{"reckon-probe"}
	}
	var why error
	for _, b := range buckets {
		for {
			if why = probe(ctx, c, b); why == nil {
				break
			}
			select {
			case <-exited:
				return fmt.Errorf("%w: %v", errExited, why)
			case <-ctx.Done():
				return fmt.Errorf("seaweed: S3 on %s not ready after %v: %v", su.Endpoint, su.timeout, why)
			case <-time.After(100 * time.Millisecond): // the poll interval of a condition, not a pause
			}
		}
	}
	return nil
}

func probe(ctx context.Context, c *minio.Client, bucket string) error {
	ok, err := c.BucketExists(ctx, bucket)
	if err != nil {
		return err
	}
	if !ok {
		if err := c.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
			return err
		}
	}
	const key = ".reckon-probe"
	if _, err := c.PutObject(ctx, bucket, key, strings.NewReader("probe"), 5, minio.PutObjectOptions{}); err != nil {
		return err
	}
	o, err := c.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return err
	}
	var b bytes.Buffer
	_, err = b.ReadFrom(o)
	o.Close()
	if err != nil {
		return err
	}
	if b.String() != "probe" {
		return fmt.Errorf("seaweed: probe read back %q", b.String())
	}
	return c.RemoveObject(ctx, bucket, key, minio.RemoveObjectOptions{})
}

// Client returns a minio-go client for the server.
func (su *Setup) Client() (*minio.Client, error) {
	host := strings.TrimPrefix(su.Endpoint, "http://")
	c, err := minio.New(host, &minio.Options{
		Creds: credentials.NewStaticV4(su.AccessKeyID, su.SecretAccessKey, ""), Region: "us-east-1",
	})
	if err != nil {
		return nil, fmt.Errorf("seaweed: client: %w", err)
	}
	return c, nil
}

// Done is closed when the server has exited.
func (s *Server) Done() <-chan struct{} { return s.done }

// Stop ends the server (SIGTERM, then SIGKILL after 3s: weed 4.53's
// `weed server` hangs in its filer's shutdown) and waits for it. It is
// safe to call more than once.
func (s *Server) Stop() error {
	s.once.Do(func() {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(3 * time.Second):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.done
		}
	})
	return nil
}

// writeIdentities writes the gateway's identities file: one identity with
// every action.
func writeIdentities(path, key, secret string) error {
	type cred struct {
		AccessKey string `json:"accessKey"`
		SecretKey string `json:"secretKey"`
	}
	type identity struct {
		Name        string   `json:"name"`
		Credentials []cred   `json:"credentials"`
		Actions     []string `json:"actions"`
	}
	b, err := json.Marshal(map[string][]identity{"identities": {{
		Name: "reckon", Credentials: []cred{{key, secret}},
		Actions: []string{"Admin", "Read", "Write", "List", "Tagging"},
	}}})
	if err != nil {
		return fmt.Errorf("seaweed: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("seaweed: %w", err)
	}
	return nil
}

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("seaweed: free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// tail returns the last lines of the log, for an error.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}
