//go:build duckdb_arrow

package sqlserve

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"

	"reckon/internal/config"
	"reckon/internal/metrics"
)

// Main runs reckon-sql with args (without the program name) and returns
// the exit code: "serve" runs the Flight SQL server until ctx is done,
// "sql" runs one query and prints its result. `reckon serve sql` and
// `reckon sql` run it with their own flags.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, environ []string) int {
	if len(args) == 0 || (args[0] != "serve" && args[0] != "sql") {
		fmt.Fprint(stderr, usage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return 0
		}
		return 2
	}
	cmd := args[0]
	fs := flag.NewFlagSet("reckon "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "configuration file (default: embedded deploy/reckon.yaml; env RECKON_CONFIG)")
	var sets stringList
	fs.Var(&sets, "set", "override a config key, key=value (repeatable; see `reckon config keys`)")
	format := fs.String("format", "table", "sql: output format: "+strings.Join(Formats, ", "))
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	path := *configPath
	if path == "" {
		for _, kv := range environ {
			if v, ok := strings.CutPrefix(kv, config.EnvConfigPath+"="); ok {
				path = v
			}
		}
	}
	cfg, err := config.Load(path, environ, sets)
	if err == nil {
		if cmd == "serve" {
			err = serve(ctx, cfg, stdout, stderr)
		} else {
			err = oneShot(ctx, cfg, *format, strings.Join(fs.Args(), " "), stdin, stdout, stderr)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "reckon %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

const usage = `reckon-sql — the SQL endpoint of reckon (embedded DuckDB over the lake)

Usage:
  reckon-sql serve [--config FILE] [--set key=value ...]
        serve Arrow Flight SQL on sql.listen until SIGINT/SIGTERM
  reckon-sql sql [--format table|csv|json|arrow] [--config FILE] [--set key=value ...] "SELECT ..."
        run one query (from the arguments, or stdin when none) and print it

Both are what ` + "`reckon serve sql` and `reckon sql`" + ` run (docs/adr/0017-sql-endpoint.md).
`

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func serve(ctx context.Context, cfg *config.Config, stdout, stderr io.Writer) error {
	tlsCfg, err := cfg.SQL.TLS.ServerConfig("sql.tls")
	if err != nil {
		return err
	}
	var auth Auth
	if a := cfg.SQL.Auth; a.Enabled() {
		tok, err := a.ResolveToken()
		if err != nil {
			return err
		}
		pass, err := a.ResolvePassword()
		if err != nil {
			return err
		}
		auth = Auth{Token: tok.Reveal(), Username: a.Username, Password: pass.Reveal()}
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	opts := OptionsFrom(cfg)
	// The endpoint's figures on metrics.addr (or the next free port, as
	// every reckon process).
	opts.Log, opts.Metrics = log, metrics.NewRegistry()
	go func() {
		err := metrics.Serve(ctx, cfg.Metrics.Addr, opts.Metrics, func(addr string) {
			log.Info("metrics", "url", "http://"+addr+"/metrics")
		})
		if err != nil {
			log.Warn("metrics endpoint off", "err", err)
		}
	}()
	if cfg.Lake.IsS3() {
		// DuckDB reads a local mirror of the bucket, synced before the
		// server is ready and every sql.sync_interval after.
		m, err := OpenLakeMirror(cfg, log)
		if err != nil {
			return err
		}
		log.Info("sql: mirroring the lake's tables before serving", "lake", cfg.Lake.Root, "dir", m.Dir())
		if _, err := m.Sync(ctx); err != nil {
			return err
		}
		opts.Root = m.Dir()
		var wg sync.WaitGroup
		mctx, stop := context.WithCancel(ctx)
		defer wg.Wait()
		defer stop()
		wg.Go(func() { m.Run(mctx) })
	}
	eng, err := Open(ctx, opts)
	if err != nil {
		return err
	}
	defer eng.Close()
	scheme := "grpc"
	if tlsCfg != nil {
		scheme = "grpc+tls"
	}
	if !auth.enabled() {
		if host, _, _ := net.SplitHostPort(cfg.SQL.Listen); !isLoopbackHost(host) {
			log.Warn("the SQL endpoint listens beyond loopback without authentication; set sql.auth", "listen", cfg.SQL.Listen)
		}
	}
	return Serve(ctx, eng,
		ServeOptions{Listen: cfg.SQL.Listen, TLS: tlsCfg, Auth: auth, Log: log, Ready: func(a net.Addr) {
			lakeDesc := eng.Root()
			if cfg.Lake.IsS3() {
				lakeDesc = cfg.Lake.Root + " mirrored in " + eng.Root() + " every " + cfg.SQL.SyncInterval.String()
			}
			fmt.Fprintf(stdout, "reckon-sql: serving Arrow Flight SQL on %s://%s (lake %s, read-only; views: %s)\n",
				scheme, a, lakeDesc, strings.Join(ViewNames(), ", "))
		}})
}

func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// oneShot runs query on an engine of its own and prints the result.
func oneShot(ctx context.Context, cfg *config.Config, format, query string, stdin io.Reader, stdout,
	stderr io.Writer) error {
	if query == "" || query == "-" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return err
		}
		query = string(b)
	}
	if strings.TrimSpace(query) == "" {
		return errors.New("no query: pass one as the argument or on stdin")
	}
	opts := OptionsFrom(cfg)
	// A re-run after a vanished lake file is not worth a line here; a
	// query that gave up is.
	opts.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if cfg.Lake.IsS3() {
		// One pass brings the mirror (kept in sql.cache_dir between runs)
		// up to date; only failures are worth a line here.
		m, err := OpenLakeMirror(cfg, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
		if err != nil {
			return err
		}
		if _, err := m.Sync(ctx); err != nil {
			return err
		}
		opts.Root = m.Dir()
	}
	eng, err := Open(ctx, opts)
	if err != nil {
		return err
	}
	defer eng.Close()
	qctx, cancel := context.WithTimeout(ctx, eng.opts.QueryTimeout)
	defer cancel()
	rdr, err := eng.Query(qctx, query)
	if err != nil {
		return err
	}
	defer rdr.Release()
	_, err = WriteResult(stdout, format, rdr)
	return err
}
