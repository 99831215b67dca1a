package temporalconn

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"reckon/internal/config"
	"reckon/internal/testing/testpki"
)

const apiKey = "tmprl-key-do-not-print-9f8e7d"

// Dial waits: long enough for a loaded machine when the dial should work
// (it returns as soon as it does), short when it should fail but looks
// transient (an untrusted certificate is retried like a network error).
const ok, fail = 30 * time.Second, time.Second

// frontend is a fake Temporal frontend that answers GetSystemInfo (what
// Dial calls) and records what each call presented: its bearer token and
// the client certificate's common name.
type frontend struct {
	workflowservice.UnimplementedWorkflowServiceServer
	wantKey string // when set, other tokens get Unauthenticated

	mu    sync.Mutex // protects following fields
	auth  []string
	certs []string
}

func (f *frontend) GetSystemInfo(ctx context.Context, _ *workflowservice.GetSystemInfoRequest) (*workflowservice.GetSystemInfoResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	auth := strings.Join(md.Get("authorization"), ",")
	cn := ""
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
			cn = ti.State.PeerCertificates[0].Subject.CommonName
		}
	}
	f.mu.Lock()
	f.auth = append(f.auth, auth)
	f.certs = append(f.certs, cn)
	f.mu.Unlock()
	if f.wantKey != "" && auth != "Bearer "+f.wantKey {
		return nil, status.Error(codes.Unauthenticated, "bad api key")
	}
	return &workflowservice.GetSystemInfoResponse{Capabilities: &workflowservice.GetSystemInfoResponse_Capabilities{}}, nil
}

func (f *frontend) last() (auth, cn string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.auth) == 0 {
		return "", ""
	}
	return f.auth[len(f.auth)-1], f.certs[len(f.certs)-1]
}

func serve(t *testing.T, f *frontend, tlsCfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var opts []grpc.ServerOption
	if tlsCfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsCfg)))
	}
	s := grpc.NewServer(opts...)
	workflowservice.RegisterWorkflowServiceServer(s, f)
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return ln.Addr().String()
}

// dial connects with cfg, retrying for at most wait.
func dial(t *testing.T, cfg config.Temporal, log *bytes.Buffer, wait time.Duration) error {
	t.Helper()
	var logger *slog.Logger
	if log != nil {
		logger = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	c, err := Dial(context.Background(), cfg, logger, wait)
	if err == nil {
		c.Close()
	}
	return err
}

func TestTLSAndAPIKey(t *testing.T) {
	pki := testpki.New(t, "temporal")
	f := &frontend{wantKey: apiKey}
	addr := serve(t, f, &tls.Config{Certificates: []tls.Certificate{pki.Server}, MinVersion: tls.VersionTLS12})
	keyFile := filepath.Join(t.TempDir(), "api-key")
	if err := os.WriteFile(keyFile, []byte(apiKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Temporal{Address: addr, Namespace: "default",
		TLS: config.TLSConfig{Enabled: true, CAFile: pki.CAFile}, APIKeyFile: keyFile}
	var log bytes.Buffer
	if err := dial(t, cfg, &log, ok); err != nil {
		t.Fatalf("TLS + API key from file: %v", err)
	}
	if auth, _ := f.last(); auth != "Bearer "+apiKey {
		t.Fatalf("server saw authorization %q", auth)
	}

	// A wrong key is refused by the server: permanent, Dial stops at once.
	cfg.APIKeyFile, cfg.APIKey = "", "wrong-key-1234"
	err := dial(t, cfg, &log, ok)
	if err == nil || !Permanent(err) {
		t.Fatalf("wrong key: %v", err)
	}
	if strings.Contains(err.Error(), "not reachable after") {
		t.Errorf("a refused key was retried until the deadline: %v", err)
	}
	for _, s := range []string{err.Error(), log.String()} {
		if strings.Contains(s, apiKey) || strings.Contains(s, "wrong-key-1234") {
			t.Fatalf("API key printed: %s", s)
		}
	}

	// Without the CA the server is not trusted.
	cfg.APIKey = apiKey
	cfg.TLS.CAFile = ""
	if err := dial(t, cfg, nil, fail); err == nil {
		t.Fatal("trusted a server signed by an unknown CA")
	}
}

func TestMutualTLS(t *testing.T) {
	pki := testpki.New(t, "temporal")
	f := &frontend{}
	addr := serve(t, f, &tls.Config{Certificates: []tls.Certificate{pki.Server}, ClientCAs: pki.Pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12})
	cfg := config.Temporal{Address: addr, Namespace: "default",
		TLS: config.TLSConfig{Enabled: true, CAFile: pki.CAFile, CertFile: pki.ClientCert, KeyFile: pki.ClientKey}}
	if err := dial(t, cfg, nil, ok); err != nil {
		t.Fatalf("mutual TLS: %v", err)
	}
	if _, cn := f.last(); cn != "reckon" {
		t.Fatalf("server saw client certificate %q, want reckon", cn)
	}
	cfg.TLS.CertFile, cfg.TLS.KeyFile = "", ""
	if err := dial(t, cfg, nil, fail); err == nil {
		t.Fatal("connected without the required client certificate")
	}
}

func TestAPIKeyPlaintextWhenAllowed(t *testing.T) {
	f := &frontend{wantKey: apiKey}
	addr := serve(t, f, nil)
	cfg := config.Temporal{Address: addr, Namespace: "default", APIKey: apiKey, AllowPlaintextCredentials: true}
	if err := dial(t, cfg, nil, ok); err != nil {
		t.Fatalf("API key over plaintext (allowed): %v", err)
	}
	if auth, _ := f.last(); auth != "Bearer "+apiKey {
		t.Fatalf("server saw authorization %q", auth)
	}
}

// TestUnreadableFiles: the TLS files and the API key file are loaded when
// the options are built, so Dial fails at once (not after its wait) with
// an error naming the config key and the file.
func TestUnreadableFiles(t *testing.T) {
	pki := testpki.New(t, "temporal")
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing-file")
	for _, tc := range []struct {
		name string
		cfg  config.Temporal
		want string // the config key
	}{
		{"api_key_file", config.Temporal{APIKeyFile: missing, TLS: config.TLSConfig{Enabled: true}}, "temporal.api_key_file"},
		{"ca_file", config.Temporal{TLS: config.TLSConfig{Enabled: true, CAFile: missing}}, "temporal.tls.ca_file"},
		{"cert_file", config.Temporal{TLS: config.TLSConfig{Enabled: true, CAFile: pki.CAFile, CertFile: missing, KeyFile: pki.ClientKey}}, "temporal.tls.cert_file"},
		{"key_file", config.Temporal{TLS: config.TLSConfig{Enabled: true, CAFile: pki.CAFile, CertFile: pki.ClientCert, KeyFile: missing}}, "temporal.tls.key_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Address, cfg.Namespace = "127.0.0.1:1", "default"
			_, err := ClientOptions(cfg, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), missing) {
				t.Fatalf("ClientOptions: %v; want it to name %s and %s", err, tc.want, missing)
			}
			// The error comes before any connection attempt, not after
			// the wait.
			err = dial(t, cfg, nil, fail)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), missing) || strings.Contains(err.Error(), "not reachable after") {
				t.Fatalf("Dial: %v; want it to name %s and %s at once", err, tc.want, missing)
			}
		})
	}
}
