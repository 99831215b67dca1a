package workers

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.temporal.io/sdk/client"

	"reckon/internal/config"
	"reckon/internal/kafkaconn"
	"reckon/internal/seaweed"
	"reckon/internal/topics"
	"reckon/workflows"
)

// devComponents are the long-running parts `reckon dev` supervises, in start
// order. Each is its own process so any one can be killed and restarts alone.
// "s3" runs only with dev.s3.
var devComponents = []string{"broker", "temporal", "s3", "ofd", "stream", "batch", "generate", "sql"}

func runDev(ctx context.Context, cx *cmdContext) error {
	if len(cx.args) > 0 && cx.args[0] == "broker" {
		cx.args = cx.args[1:]
		return runDevBroker(ctx, cx)
	}
	var f devFlags
	f.register(cx.fs)
	cx.fs.Usage = func() {
		fmt.Fprintln(cx.stderr, "usage: reckon dev [flags]          run the whole embedded stack\n"+
			"       reckon dev broker [flags]   run only the embedded broker (kfake with a data dir)")
		cx.fs.PrintDefaults()
	}
	if err := cx.parse(); err != nil {
		return err
	}
	o, err := f.options(cx)
	if err != nil {
		return err
	}
	cfg, skip, dir, logDir, runDir := cx.cfg, o.skip, o.dir, o.logDir, o.runDir
	self, temporalBin, kafkaAddr, temporalAddr, ofdAddr := o.self, o.temporalBin, o.kafkaAddr, o.temporalAddr, o.ofdAddr
	common, s3, lookupSet, lookupAddr := o.common, o.s3, o.lookupSet, o.lookupAddr

	var outMu sync.Mutex
	mk := func(name, path string, args ...string) *proc {
		return &proc{name: name, path: path, args: args, logDir: logDir, runDir: runDir, out: cx.stdout, outMu: &outMu}
	}
	var saArgs []string
	for _, sa := range workflows.SearchAttributes() {
		saArgs = append(saArgs, "--search-attribute", sa)
	}
	procs := map[string]*proc{
		"broker": mk("broker", self, "dev", "broker", "--dir", filepath.Join(dir, "kafka"), "--port",
			strconv.Itoa(cfg.Dev.KafkaPort)),
		"temporal": func() *proc {
			p := mk("temporal", temporalBin, append([]string{"server", "start-dev",
				"--ip", "127.0.0.1", "--port", strconv.Itoa(cfg.Dev.TemporalPort),
				"--ui-port", strconv.Itoa(cfg.Dev.UIPort),
				"--db-filename", filepath.Join(dir, "temporal.db"),
				// WAL with synchronous=normal: durable across a crash of the
				// server process (make chaos kills it), not of the machine;
				// several times the write rate of the rollback journal.
				"--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal",
				"--namespace", cfg.Temporal.Namespace,
				"--log-level", "warn"}, saArgs...)...)
			p.quiet = true
			return p
		}(),
		"stream": mk("stream", self, append(append([]string{"stream"}, common...), lookupSet...)...),
		"batch":  mk("batch", self, append([]string{"batch"}, common...)...),
	}
	var genNames []string
	for _, g := range devGenerators(cfg) {
		genNames = append(genNames, g.name)
		procs[g.name] = mk(g.name, self, append(g.args, common...)...)
	}
	procs["ofd"] = mk("ofd", self, append([]string{"zreport", "ofd-sim"}, common...)...)
	if s3 != nil {
		p := mk("s3", s3.Bin, s3.Args...)
		// weed 4.53's `weed server` hangs in its filer's shutdown (a log
		// buffer waits for the volume server it already stopped): after a
		// short grace it is killed, as a crash would; every PUT it
		// answered is on disk by then.
		p.dir, p.quiet, p.grace = s3.Dir, true, 3*time.Second
		procs["s3"] = p
	}
	if cfg.Dev.GenerateRate == 0 {
		skip["generate"] = true
	}
	// The SQL endpoint runs when its binary was built (make build); on an
	// s3:// lake it serves a mirror in sql.cache_dir.
	if sqlBin, err := findSQLBinary(); err == nil {
		procs["sql"] = mk("sql", sqlBin, append([]string{"serve"}, common...)...)
	} else if !skip["sql"] {
		skip["sql"] = true
		fmt.Fprintf(cx.stdout, "reckon dev: no SQL endpoint: %s is not next to reckon nor on PATH (make build; docs/adr/0017-sql-endpoint.md)\n", sqlBinary)
	}

	say := func(format string, a ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(cx.stdout, "reckon dev: "+format+"\n", a...)
	}
	type running struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	var started []running
	start := func(name string) {
		pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		r := running{cancel, make(chan struct{})}
		started = append(started, r)
		go func() { defer close(r.done); procs[name].run(pctx) }()
	}
	// stopAll stops components in reverse start order, each fully before
	// the next: workers finish their transactions and activities while the
	// broker and Temporal are still up. Then no component of this stack
	// runs, so it removes every component's pid file: the supervisor
	// removes a child's when it exits, and this also clears those an
	// earlier, killed supervisor left for components this run skipped.
	stopAll := func() {
		for i := len(started) - 1; i >= 0; i-- {
			started[i].cancel()
			<-started[i].done
		}
		started = nil
		for name := range procs {
			if err := os.Remove(filepath.Join(runDir, name+".pid")); err != nil && !errors.Is(err, fs.ErrNotExist) {
				say("pid file: %v", err)
			}
		}
	}
	defer stopAll()

	if !skip["broker"] {
		start("broker")
		err := waitSaying(ctx, say,
			fmt.Sprintf("the broker on %s to answer (kfake, loading %s)", kafkaAddr,
				filepath.Join(dir, "kafka")), 30*time.Second,
			func(ctx context.Context) error { return kafkaconn.WaitReady(ctx, cfg.Kafka) })
		if err != nil {
			return err
		}
		say("broker ready on %s", kafkaAddr)
	}
	if !skip["temporal"] {
		start("temporal")
		err := waitSaying(ctx, say,
			fmt.Sprintf("Temporal on %s to answer (the dev server opens %s; its log: %s)", temporalAddr,
				filepath.Join(dir, "temporal.db"), filepath.Join(logDir, "temporal.log")), 60*time.Second,
			func(ctx context.Context) error {
				return waitTemporal(ctx, temporalAddr, cfg.Temporal.Namespace, 60*time.Second)
			})
		if err != nil {
			return err
		}
		say("temporal ready on %s, UI http://127.0.0.1:%d", temporalAddr, cfg.Dev.UIPort)
	}
	if !skip["broker"] {
		m, err := topics.Load(cfg.Topics.Map)
		if err != nil {
			return err
		}
		adm, closeAdm, err := kafkaconn.NewAdmin(cfg.Kafka, "dev")
		if err != nil {
			return err
		}
		var acts []topics.Action
		err = waitSaying(ctx, say, "the broker to apply the topic map", time.Minute, func(ctx context.Context) (err error) {
			acts, err = topics.Apply(ctx, adm, m)
			return err
		})
		closeAdm()
		for _, a := range acts {
			say("topics: %s", a)
		}
		if err != nil {
			return err
		}
	}
	if !skip["s3"] {
		start("s3")
		err := waitSaying(ctx, say, fmt.Sprintf("the S3 server on %s to take a write (SeaweedFS, data in %s; its log: %s)",
			s3.Endpoint, s3.Dir, filepath.Join(logDir, "s3.log")), 2*time.Minute, s3.WaitReady)
		if err != nil {
			return err
		}
		say("s3 ready on %s, lake %s", s3.Endpoint, cfg.Lake.Root)
	}
	for _, name := range devComponents[3:] {
		switch {
		case skip[name]:
		case name == "generate":
			for _, g := range genNames {
				start(g)
			}
		default:
			start(name)
		}
	}
	lake := cfg.Lake.Root
	if !cfg.Lake.IsS3() {
		lake, _ = filepath.Abs(lake)
	}
	say(`up. Where to look:
  Temporal UI     http://127.0.0.1:%d
  Kafka           %s   (./bin/reckon topics describe; ./bin/reckon topics tail %s)
  metrics         http://%s/metrics and the next ports (stream, batch: each logs its own url)
  lake            %s   (./bin/reckon lake ls%s)%s%s%s
  logs, pids      %s, %s
Ctrl-C stops everything; the next `+"`reckon dev`"+` resumes from %s.`,
		cfg.Dev.UIPort, kafkaAddr, cfg.Topics.DLQ, cfg.Metrics.Addr, lake, devLakeHint(cfg.Lake.Root, s3),
		devSQLLine(cfg.SQL.Listen, skip["sql"]), devOFDLine(ofdAddr, skip["ofd"]),
		devLookupLine(lookupAddr, cfg.Stream.ServeTLS.Enabled, skip["stream"]), logDir, runDir, dir)
	<-ctx.Done()
	say("stopping (components in reverse order)...")
	stopAll()
	say("stopped")
	return nil
}

// devSQLLine is the SQL endpoint's line of the "up" message, or "".
func devSQLLine(listen string, skipped bool) string {
	if skipped {
		return ""
	}
	return fmt.Sprintf("\n  SQL             grpc://%s   (Arrow Flight SQL; ./bin/reckon sql \"SELECT * FROM windows\")",
		listen)
}

// devLookupAddr is 127.0.0.1:port, or a free loopback port when port is
// devFlags are the flags of `reckon dev`; options turns them and the
// configuration into the plan of the stack.
type devFlags struct {
	without string // components not to start, comma-separated
}

func (f *devFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.without, "without", "",
		"comma-separated components not to start: "+strings.Join(devComponents, ","))
}

// devOptions are what `reckon dev` starts and where: the components to
// skip, the directories, the binaries, the loopback addresses, the flags
// every child gets, the S3 server and the feature lookup address.
type devOptions struct {
	skip                             map[string]bool
	dir, logDir, runDir              string
	self, temporalBin                string
	kafkaAddr, temporalAddr, ofdAddr string
	common, lookupSet                []string
	lookupAddr                       string
	s3                               *seaweed.Setup
}

// options checks the flags and the machine (directories made, the
// Temporal CLI there, the ports free) and points cx.cfg and the children's
// flags at the embedded stack.
func (f *devFlags) options(cx *cmdContext) (o devOptions, err error) {
	cfg := cx.cfg
	skip := map[string]bool{}
	for _, c := range strings.Split(f.without, ",") {
		if c = strings.TrimSpace(c); c != "" {
			if !slices.Contains(devComponents, c) {
				return o, fmt.Errorf("%w: --without %q: unknown component", errUsage, c)
			}
			skip[c] = true
		}
	}
	dir, err := filepath.Abs(cfg.Dev.Dir)
	if err != nil {
		return o, err
	}
	logDir, runDir := filepath.Join(dir, "logs"), filepath.Join(dir, "run")
	for _, d := range []string{dir, logDir, runDir, filepath.Join(dir, "kafka")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return o, err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return o, err
	}
	temporalBin, err := filepath.Abs(cfg.Dev.TemporalBin)
	if err != nil {
		return o, err
	}
	if _, err := os.Stat(temporalBin); err != nil && !skip["temporal"] {
		return o, fmt.Errorf("temporal CLI not found at %s (dev.temporal_bin): run `make dev`, which installs the pinned "+
			"version", temporalBin)
	}
	kafkaAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Dev.KafkaPort))
	temporalAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Dev.TemporalPort))
	ofdAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Dev.OFDPort))
	for name, addr := range map[string]string{"broker": kafkaAddr, "temporal": temporalAddr, "ofd": ofdAddr} {
		if skip[name] {
			continue
		}
		if c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond); err == nil {
			c.Close()
			return o, fmt.Errorf("%s port %s is already in use: is another `reckon dev` running? "+
				"(stop it, or change dev.kafka_port/dev.temporal_port/dev.ofd_port)", name, addr)
		}
	}

	// Children see the same configuration, pointed at the embedded stack.
	common := []string{}
	if cx.configPath != "" {
		abs, _ := filepath.Abs(cx.configPath)
		common = append(common, "--config", abs)
	}
	for _, s := range cx.sets {
		common = append(common, "--set", s)
	}
	common = append(common, "--set", "kafka.brokers="+kafkaAddr, "--set", "temporal.address="+temporalAddr)
	if !skip["ofd"] {
		// The batch workers ask the stack's own simulator, on dev.ofd_port;
		// --without ofd keeps zreport.ofd_url (an operator of your own).
		common = append(common, "--set", "zreport.ofd_url=http://"+ofdAddr, "--set", "zreport.ofd_sim_addr="+ofdAddr)
		cfg.ZReport.OFDURL, cfg.ZReport.OFDSimAddr = "http://"+ofdAddr, ofdAddr
	}
	// Z-reports on a dev clock: the OFD document is requested minutes, not
	// six days, after shift close (override with your own --set).
	for _, kv := range []string{"zreport.ofd_request_after=3m", "zreport.retention=15m", "zreport.ofd_retry=1m",
		"zreport.linger=5m"} {
		if !hasSet(cx.sets, kv[:strings.Index(kv, "=")]) {
			common = append(common, "--set", kv)
		}
	}
	cfg.Kafka.Brokers = []string{kafkaAddr}
	cfg.Temporal.Address = temporalAddr
	var s3 *seaweed.Setup
	if cfg.Dev.S3 && !skip["s3"] {
		// The children see dev.s3 too: their configuration points the
		// lake at this server (config.DevS3Root, lake.s3 on dev.s3_port).
		if s3, err = devS3(cfg, dir); err != nil {
			return o, err
		}
	} else {
		skip["s3"] = true
	}
	// The default lake lives in the dev dir: with dev.dir moved and
	// lake.root left at its default, the lake moves along. Otherwise a
	// fresh dev dir (a new broker, offsets from 0) would meet the old
	// lake's archive progress, and the archive would stop on "cursor
	// beyond the end" as it must for a recreated topic.
	if cfg.Lake.Root == defaultLakeRoot && filepath.Clean(cfg.Dev.Dir) != filepath.Clean(defaultDevDir) {
		cfg.Lake.Root = filepath.Join(dir, "lake")
		common = append(common, "--set", "lake.root="+cfg.Lake.Root)
	}

	// The stream worker serves feature lookups on dev.lookup_port (a free
	// port when that one is taken), unless stream_worker.serve_addr is set.
	var lookupSet []string
	lookupAddr := cfg.Stream.ServeAddr
	if !hasSet(cx.sets, "stream_worker.serve_addr") && lookupAddr == "" {
		lookupAddr = devLookupAddr(cfg.Dev.LookupPort)
		lookupSet = []string{"--set", "stream_worker.serve_addr=" + lookupAddr}
	}
	return devOptions{
		skip: skip, dir: dir, logDir: logDir, runDir: runDir, self: self, temporalBin: temporalBin,
		kafkaAddr: kafkaAddr, temporalAddr: temporalAddr, ofdAddr: ofdAddr,
		common: common, lookupSet: lookupSet, lookupAddr: lookupAddr, s3: s3,
	}, nil
}

// taken (another dev stack, another program).
func devLookupAddr(port int) string {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		ln.Close()
		return addr
	}
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return addr // the worker says why it cannot listen
	}
	defer ln.Close()
	return ln.Addr().String()
}

// devLookupLine is the feature lookups' line of the "up" message, or "".
func devLookupLine(addr string, tls, skipped bool) string {
	if skipped || addr == "" {
		return ""
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	return fmt.Sprintf("\n  lookups         %s://%s/v1/features/payments/<user_id>   (features as of now; docs/adr/0040)",
		scheme, addr)
}

// devOFDLine is the OFD simulator's line of the "up" message, or "".
func devOFDLine(addr string, skipped bool) string {
	if skipped {
		return ""
	}
	return fmt.Sprintf("\n  OFD operator    http://%s   (simulated; dev.ofd_port)", addr)
}

// devWaitEvery is how often a start-up wait of `reckon dev` says again
// what it waits for: under 5 s, so no start-up step is silent longer.
const devWaitEvery = 4 * time.Second

// waitSaying runs wait with a limit, saying at once what it waits for and
// then every devWaitEvery how long it has waited, so no start-up step is
// silent for longer than that.
func waitSaying(ctx context.Context, say func(string, ...any), what string, limit time.Duration,
	wait func(context.Context) error) error {
	say("waiting for %s (up to %v)", what, limit)
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- wait(wctx) }()
	began := time.Now()
	tick := time.NewTicker(devWaitEvery)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			say("still waiting for %s (%v of at most %v)", what, time.Since(began).Round(time.Second), limit)
		}
	}
}

// devGenerator is one generator process of `reckon dev`.
type devGenerator struct {
	name string
	args []string // reckon's arguments, configuration flags not included
}

// devGenerators returns the generator processes of `reckon dev`: one per
// scenario, with its default mix of late, duplicate, poison and skewed
// events, at the configured rate. Every start of the stack writes into the
// same topics and lake, so no run may repeat an earlier run's event_ids
// (dedup would drop the new events as redeliveries) or fiscal shifts.
func devGenerators(cfg *config.Config) []devGenerator {
	var gens []devGenerator
	for _, sc := range []string{"sensors", "payments", "fiscal"} {
		// No --seed: each run draws a fresh event_id nonce.
		// Oversized poison is 1 in 100 poison records, not 1 in 10: each
		// is ~1 MiB in the topic and the DLQ, and a day of `make dev` must
		// fit on a laptop (docs/lake.md "rejected").
		args := []string{"generate", "--scenario", sc, "--rate", strconv.Itoa(cfg.Dev.GenerateRate), "--count", "0",
			"--oversized-share", devOversizedShare}
		if sc == "fiscal" {
			// The simulated operator answers as this generator's fiscal
			// operator (zreport.ofd_sim_generator_seed/keys), so the seed
			// is fixed; the ids still get a fresh nonce and the shifts
			// follow the clock. Parts arrive within minutes on the dev
			// clock.
			args = []string{"generate", "--scenario", sc, "--rate", "1", "--count", "0",
				"--seed", strconv.FormatInt(cfg.ZReport.OFDSimGeneratorSeed,
					10), "--keys", strconv.Itoa(cfg.ZReport.OFDSimGeneratorKeys),
				"--id-nonce", "random", "--first-key", "now",
				"--ofd-delay", "2m", "--part-delay", "30s", "--oversized-share", devOversizedShare}
		}
		gens = append(gens, devGenerator{name: "gen-" + sc, args: args})
	}
	return gens
}

// devOversizedShare is the share of the dev generators' poison that is
// oversized.
const devOversizedShare = "0.01"

// devS3 prepares dev.s3's server in dir/s3 on dev.s3_port, with the
// lake's bucket and the identity its configuration signs with (the
// configuration put the lake there: config.DevS3Root unless lake.root
// names another s3:// root).
func devS3(cfg *config.Config, dir string) (*seaweed.Setup, error) {
	if !cfg.Lake.IsS3() {
		return nil, fmt.Errorf("%w: dev.s3 puts the lake on S3: lake.root must be s3://bucket[/prefix] "+
			"(or left at its default), not %s", errUsage, cfg.Lake.Root)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Dev.S3Port))
	if c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond); err == nil {
		c.Close()
		return nil, fmt.Errorf("s3 port %s is already in use: is another `reckon dev` running? "+
			"(stop it, or change dev.s3_port)", addr)
	}
	secret, err := cfg.Lake.S3.ResolveSecretAccessKey()
	if err != nil {
		return nil, err
	}
	bucket, _, _ := strings.Cut(strings.TrimPrefix(cfg.Lake.Root, "s3://"), "/")
	s3, err := seaweed.Prepare(seaweed.Options{Bin: cfg.Dev.WeedBin, Dir: filepath.Join(dir, "s3"), Port: cfg.Dev.S3Port,
		Buckets: []string{bucket}, AccessKeyID: cfg.Lake.S3.AccessKeyID, SecretAccessKey: string(secret)})
	if errors.Is(err, seaweed.ErrNoBinary) {
		return nil, fmt.Errorf("%w (dev.weed_bin): `make weed` builds the pinned version", err)
	}
	return s3, err
}

// devLakeHint is lakeFlagHint, or on dev.s3's server the flags that point
// a command at it.
func devLakeHint(root string, s3 *seaweed.Setup) string {
	if s3 == nil {
		return lakeFlagHint(root)
	}
	return " --set dev.s3=true, and dev.s3_port if you moved it"
}

// The defaults of dev.dir and lake.root (deploy/reckon.yaml).
const (
	defaultDevDir   = "./.reckon"
	defaultLakeRoot = "./.reckon/lake"
)

// lakeFlagHint is the --lake flag a `reckon lake` command in another
// terminal needs to find this lake: none for the default one.
func lakeFlagHint(root string) string {
	if root == defaultLakeRoot {
		return ""
	}
	return " --lake " + root
}

func hasSet(sets []string, key string) bool {
	for _, s := range sets {
		if strings.HasPrefix(s, key+"=") {
			return true
		}
	}
	return false
}

func waitTemporal(ctx context.Context, addr, namespace string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		c, err := client.DialContext(ctx, client.Options{HostPort: addr, Namespace: namespace, Logger: quietLogger{}})
		if err == nil {
			_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
			c.Close()
			if err == nil {
				return nil
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("temporal at %s not ready after %v: %v", addr, timeout, last)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// runDevBroker runs the embedded Kafka-protocol broker: franz-go's kfake
// with a data dir, so topics and records survive restarts.
func runDevBroker(ctx context.Context, cx *cmdContext) error {
	dir := cx.fs.String("dir", "./.reckon/kafka", "data directory")
	port := cx.fs.Int("port", 9092, "port on 127.0.0.1")
	if err := cx.parse(); err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.Ports(*port),
		kfake.DataDir(*dir),
	)
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	fmt.Fprintf(cx.stdout, "kfake broker on %v, data in %s\n", c.ListenAddrs(), *dir)
	<-ctx.Done()
	fmt.Fprintln(cx.stdout, "broker: flushing and stopping")
	c.Close()
	return nil
}
