//go:build duckdb_arrow

package sqlserve

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"reckon/internal/config"
	"reckon/internal/testing/testpki"
)

// code is the gRPC code of a client error.
func code(err error) codes.Code {
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return se.GRPCStatus().Code()
	}
	return codes.Unknown
}

// TestLockDown: through arrow-go's Flight SQL client, a query cannot read
// other files, write, ATTACH, INSTALL or LOAD extensions, reach the
// network or change the settings; each refusal is a clear Flight error,
// and the server keeps serving with its views intact.
func TestLockDown(t *testing.T) {
	tl := buildLake(t)
	outside := t.TempDir()
	other := filepath.Join(outside, "secret.parquet")
	direct, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Exec("COPY (SELECT 42 AS secret) TO '" + other + "'"); err != nil {
		t.Fatal(err)
	}
	direct.Close()
	c := newClient(t, startServer(t, openEngine(t, tl.root), ServeOptions{}))
	ctx := context.Background()
	lakeFile := func(name string) string { return filepath.Join(tl.root, name) }

	for _, tc := range []struct {
		item, query string
		codes       []codes.Code // acceptable; PermissionDenied unless said
	}{
		{"read a file outside the lake", "SELECT * FROM read_csv('/etc/passwd')", nil},
		{"read a parquet file outside the lake", "SELECT * FROM read_parquet('" + other + "')", nil},
		{"escape the lake with ..", "SELECT * FROM read_parquet('" + tl.root + "/../" + filepath.Base(outside) + "/secret.parquet')", nil},
		{"list files outside the lake", "SELECT * FROM glob('/etc/*')", nil},
		{"read a file as text", "SELECT * FROM read_text('/etc/hostname')", nil},
		{"write with COPY", "COPY (SELECT 1) TO '" + lakeFile("x.csv") + "'", nil},
		{"write a view with COPY", "COPY windows TO '" + lakeFile("w.parquet") + "'", nil},
		{"export the database", "EXPORT DATABASE '" + lakeFile("export") + "'", nil},
		{"create a table", "CREATE TABLE t AS SELECT 1", nil},
		{"create a temporary table", "CREATE TEMP TABLE t AS SELECT 1", nil},
		{"insert", "INSERT INTO windows VALUES (1)", nil},
		{"drop a view", "DROP VIEW windows", nil},
		{"replace a view", "CREATE OR REPLACE VIEW windows AS SELECT 1 AS x", nil},
		{"hide a write behind a SELECT", "SELECT 1; DROP VIEW windows", nil},
		{"hide a write after a SELECT", "SELECT 1; COPY (SELECT 1) TO '" + lakeFile("y.csv") + "'", nil},
		{"run a statement through query()", "SELECT * FROM query('DROP VIEW windows')", []codes.Code{codes.PermissionDenied, codes.InvalidArgument}},
		{"attach an in-memory database", "ATTACH ':memory:' AS m", nil},
		{"attach a database file", "ATTACH '" + lakeFile("x.duckdb") + "' AS x", nil},
		{"detach", "DETACH memory", nil},
		{"install an extension", "INSTALL httpfs", nil},
		{"load an extension", "LOAD httpfs", nil},
		{"load an extension file", "LOAD '" + lakeFile("x.duckdb_extension") + "'", nil},
		{"reach the network over https", "SELECT * FROM read_parquet('https://example.com/x.parquet')", []codes.Code{codes.PermissionDenied, codes.InvalidArgument}},
		{"reach S3", "SELECT * FROM read_parquet('s3://bucket/x.parquet')", []codes.Code{codes.PermissionDenied, codes.InvalidArgument}},
		{"enable external access", "SET enable_external_access = true", nil},
		{"widen the allowed directories", "SET GLOBAL allowed_directories = ['/']", nil},
		{"unlock the configuration", "SET lock_configuration = false", nil},
		{"reset a setting", "RESET memory_limit", nil},
		{"raise the memory limit", "SET memory_limit = '100GB'", nil},
		{"a pragma", "PRAGMA enable_profiling", nil},
		{"call a procedure", "CALL pragma_version()", nil},
		{"checkpoint", "CHECKPOINT", nil},
		{"explain a write", "EXPLAIN COPY (SELECT 1) TO '" + lakeFile("e.csv") + "'", nil},
		{"explain analyze a write", "EXPLAIN ANALYZE COPY (SELECT 1) TO '" + lakeFile("e.csv") + "'", nil},
		{"hide a write behind an explain", "EXPLAIN SELECT 1; DROP VIEW windows", nil},
		{"explain twice", "EXPLAIN EXPLAIN SELECT 1", nil},
	} {
		want := tc.codes
		if want == nil {
			want = []codes.Code{codes.PermissionDenied}
		}
		tab, err := readAll(ctx, c, tc.query)
		if err == nil {
			t.Errorf("%s: %q succeeded (%d rows)", tc.item, tc.query, len(tab.rows))
			continue
		}
		got := code(err)
		ok := false
		for _, w := range want {
			ok = ok || got == w
		}
		if !ok {
			t.Errorf("%s: %q: code %v (%v), want one of %v", tc.item, tc.query, got, err, want)
		}
	}

	// Nothing was written, the settings hold, the views are intact.
	for _, f := range []string{"x.csv", "y.csv", "e.csv", "w.parquet", "export", "x.duckdb"} {
		if _, err := os.Stat(lakeFile(f)); err == nil {
			t.Errorf("%s was written into the lake", f)
		}
	}
	got := mustRead(t, c, `SELECT current_setting('enable_external_access'), current_setting('lock_configuration'),
		current_setting('allowed_directories')::VARCHAR, (SELECT count(*) FROM duckdb_databases() WHERE NOT internal),
		(SELECT count(*) FROM windows)`).rows[0]
	if got[0] != "false" || got[1] != "true" || !strings.Contains(got[2], tl.root) || got[3] != "1" || got[4] == "0" {
		t.Errorf("after the attempts: external access %s, locked %s, allowed %s, %s databases, %s windows", got[0], got[1], got[2], got[3], got[4])
	}
}

// TestBadQuery: a wrong query gets a clear error and the next query works.
func TestBadQuery(t *testing.T) {
	tl := buildLake(t)
	c := newClient(t, startServer(t, openEngine(t, tl.root), ServeOptions{}))
	for q, want := range map[string]string{
		"SELEC * FROM windows":           "syntax error",
		"SELECT * FROM nowhere":          "nowhere",
		"SELECT nosuchcolumn FROM raw":   "nosuchcolumn",
		"SELECT 1/0::INTEGER + 'x'::INT": "x",
	} {
		_, err := readAll(context.Background(), c, q)
		if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v (code %v), want InvalidArgument mentioning %q", q, err, code(err), want)
		}
		if n := mustRead(t, c, "SELECT count(*) FROM events").rows[0][0]; n == "0" {
			t.Errorf("after %q: events is empty", q)
		}
	}
}

// TestQueryLimits: a query past sql.query_timeout or sql.memory_limit is
// stopped with DeadlineExceeded or ResourceExhausted, and the server
// serves the next one.
func TestQueryLimits(t *testing.T) {
	tl := buildLake(t)
	c := newClient(t, startServer(t, openEngine(t, tl.root, func(o *Options) { o.QueryTimeout = 500 * time.Millisecond }), ServeOptions{}))
	small := newClient(t, startServer(t, openEngine(t, tl.root, func(o *Options) { o.MemoryLimit = "64MB" }), ServeOptions{}))
	ctx := context.Background()

	began := time.Now()
	_, err := readAll(ctx, c, "SELECT sum(i) FROM range(1000000000000) t(i)")
	if code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "query_timeout") {
		t.Errorf("endless query: %v (code %v), want DeadlineExceeded naming sql.query_timeout", err, code(err))
	}
	// A hang guard, not a speed limit: the query would run for hours; a
	// loaded machine takes its time to interrupt it.
	if d := time.Since(began); d > time.Minute {
		t.Errorf("the endless query ran %v, limit 500ms", d)
	}
	// A list aggregate cannot spill: past the limit it fails.
	_, err = readAll(ctx, small, "SELECT list(i::VARCHAR || 'padding-padding-padding') FROM range(20000000) t(i)")
	if code(err) != codes.ResourceExhausted {
		t.Errorf("query past the memory limit: %v (code %v), want ResourceExhausted", err, code(err))
	}
	if n := mustRead(t, small, "SELECT count(*) FROM windows").rows[0][0]; n == "0" {
		t.Error("after the memory limit: windows is empty")
	}
	if n := mustRead(t, c, "SELECT count(*) FROM windows").rows[0][0]; n == "0" {
		t.Error("after the limits: windows is empty")
	}
}

// TestAuth: with a token and basic auth configured, a call without or
// with wrong credentials is refused; the token, basic auth on every call
// (arrow-go's driver) and the Handshake's session token (the JDBC
// driver's way) are accepted.
func TestAuth(t *testing.T) {
	tl := buildLake(t)
	addr := startServer(t, openEngine(t, tl.root), ServeOptions{Auth: Auth{Token: "s3cret-token", Username: "analyst", Password: "pa:ss"}})
	ctx := context.Background()
	c := newClient(t, addr)
	if _, err := readAll(ctx, c, "SELECT 1"); code(err) != codes.Unauthenticated {
		t.Errorf("no credentials: %v, want Unauthenticated", err)
	}
	for _, dsn := range []string{"flightsql://" + addr, "flightsql://" + addr + "?token=wrong", "flightsql://analyst:wrong@" + addr, "flightsql://nobody:pa%3Ass@" + addr} {
		db, _ := sql.Open("flightsql", dsn)
		var n int
		if err := db.QueryRow("SELECT 1").Scan(&n); code(err) != codes.Unauthenticated {
			t.Errorf("dsn %q: %v, want Unauthenticated", dsn, err)
		}
		db.Close()
	}
	for _, dsn := range []string{"flightsql://" + addr + "?token=s3cret-token", "flightsql://analyst:pa%3Ass@" + addr} {
		db, _ := sql.Open("flightsql", dsn)
		var n int
		if err := db.QueryRow("SELECT count(*) FROM windows").Scan(&n); err != nil || n == 0 {
			t.Errorf("%s: %d, %v", strings.Replace(dsn, "s3cret-token", "TOKEN", 1), n, err)
		}
		db.Close()
	}
	hctx, err := c.Client.AuthenticateBasicToken(ctx, "analyst", "pa:ss")
	if err != nil {
		t.Fatalf("Handshake with basic auth: %v", err)
	}
	if tab, err := readAll(hctx, c, "SELECT count(*) FROM events"); err != nil || tab.rows[0][0] == "0" {
		t.Errorf("with the session token: %v %v", tab, err)
	}
	if _, err := c.Client.AuthenticateBasicToken(ctx, "analyst", "wrong"); code(err) != codes.Unauthenticated {
		t.Errorf("Handshake with a wrong password: %v", err)
	}
}

// TestTLS: a TLS endpoint answers a client trusting its CA and not a
// plaintext one; with client_ca_file a client without a certificate is
// refused and one with a certificate served (mutual TLS). The server side
// is config.ServerTLS (sql.tls.*); the client side config.TLSConfig, as for
// the other endpoints.
func TestTLS(t *testing.T) {
	tl := buildLake(t)
	eng := openEngine(t, tl.root)
	pki := testpki.New(t, "localhost")
	ctx := context.Background()
	dial := func(addr string, cfg config.TLSConfig) error {
		var cred grpc.DialOption
		if cfg.Enabled {
			tc, err := cfg.ClientConfig("test")
			if err != nil {
				t.Fatal(err)
			}
			cred = grpc.WithTransportCredentials(credentials.NewTLS(tc))
		} else {
			cred = grpc.WithTransportCredentials(insecure.NewCredentials())
		}
		c := newClient(t, addr, cred)
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		_, err := readAll(cctx, c, "SELECT count(*) FROM windows")
		return err
	}
	plain := config.TLSConfig{}
	trusting := config.TLSConfig{Enabled: true, CAFile: pki.CAFile}
	withCert := config.TLSConfig{Enabled: true, CAFile: pki.CAFile, CertFile: pki.ClientCert, KeyFile: pki.ClientKey}

	serverTLS := func(st config.ServerTLS) *tls.Config {
		c, err := st.ServerConfig("sql.tls")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	tlsAddr := startServer(t, eng, ServeOptions{TLS: serverTLS(config.ServerTLS{Enabled: true, CertFile: pki.ServerCert, KeyFile: pki.ServerKey})})
	if err := dial(tlsAddr, trusting); err != nil {
		t.Errorf("TLS: %v", err)
	}
	if err := dial(tlsAddr, plain); err == nil {
		t.Error("TLS endpoint answered a plaintext client")
	}
	if err := dial(tlsAddr, config.TLSConfig{Enabled: true}); err == nil {
		t.Error("TLS endpoint trusted without its CA")
	}

	mtlsAddr := startServer(t, eng, ServeOptions{TLS: serverTLS(config.ServerTLS{Enabled: true, CertFile: pki.ServerCert, KeyFile: pki.ServerKey, ClientCAFile: pki.CAFile})})
	if err := dial(mtlsAddr, withCert); err != nil {
		t.Errorf("mTLS with a client certificate: %v", err)
	}
	if err := dial(mtlsAddr, trusting); err == nil {
		t.Error("mTLS endpoint answered a client without a certificate")
	}
}
