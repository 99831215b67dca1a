package workers

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"reckon/internal/config"
)

// command is one `reckon` subcommand.
type command struct {
	name    string
	summary string
	// run executes the command with its own flag set already created; it
	// registers its flags on fs and must call cx.parse before using them.
	run func(ctx context.Context, cx *cmdContext) error
}

// commands lists every subcommand in help order. Each lives in cmd_<name>.go.
var commands = []command{
	{"dev", "run the whole system on the embedded stack (kfake broker, Temporal dev server, workers, generator)", runDev},
	{"stream", "run the streaming worker: event-time windows, watermarks, panes, rolling features, DLQ", runStream},
	{"batch", "run the Temporal batch worker: archive to the lake, recompute, reconcile, replay, Z-reports", runBatch},
	{"generate", "produce realistic traffic (sensors, payments, fiscal) to Kafka or JSONL, with a manifest", runGenerate},
	{"simulate", "run the stream operator over a JSONL file offline and print panes and features", runSimulate},
	{"validate", "check JSONL envelopes from stdin against the quality gate, one JSON verdict per line", runValidate},
	{"topics", "apply or describe the topic map (deploy/topics.yaml) on the broker", runTopics},
	{"lake", "inspect and query the Parquet lake", runLake},
	{"replay", "recompute and correct a date range through a Temporal replay workflow", runReplay},
	{"reconcile", "run the daily reconciliation for a date now and print the price-of-speed report", runReconcile},
	{"schedule", "apply (create/update), describe or trigger the daily reconciliation schedule on Temporal", runSchedule},
	{"zreport", "inspect Z-report entity workflows and the simulated OFD operator", runZReport},
	{"config", "print the effective configuration or the list of overridable keys", runConfig},
	{"verify", "check conservation and truth of a generator run against the topics and committed stream state", runVerify},
	{"serve", "serve sql: the analysts' Arrow Flight SQL endpoint over the lake (runs bin/reckon-sql)", runServe},
	{"sql", "run one SQL query on the lake's views and print it: table, csv, json or arrow (runs bin/reckon-sql)", runSQL},
}

// cmdContext is what a command receives.
type cmdContext struct {
	name    string
	args    []string
	fs      *flag.FlagSet
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
	environ []string

	configPath string
	sets       stringList
	cfg        *config.Config
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// parse parses the command's flags and loads the configuration.
func (cx *cmdContext) parse() error {
	if err := cx.fs.Parse(cx.args); err != nil {
		return err
	}
	// Flag parsing stops at the first argument that is not a flag: a
	// --set or --config after it would be silently ignored and the command
	// would run on another configuration than the operator wrote.
	for _, a := range cx.fs.Args() {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && (name == "set" || name == "config") {
			return fmt.Errorf("%w: %s comes after the argument %q and would be ignored: put flags before arguments", errUsage, a,
				cx.fs.Arg(0))
		}
	}
	path := cx.configPath
	if path == "" {
		for _, kv := range cx.environ {
			if v, ok := strings.CutPrefix(kv, config.EnvConfigPath+"="); ok {
				path = v
			}
		}
	}
	cfg, err := config.Load(path, cx.environ, cx.sets)
	if err != nil {
		return err
	}
	cx.cfg = cfg
	return nil
}

// errUsage marks an error whose message is a usage problem (exit 2).
var errUsage = errors.New("usage")

// Main runs reckon with args (without the program name) and returns the
// process exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, environ []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	var cmd *command
	for i := range commands {
		if commands[i].name == args[0] {
			cmd = &commands[i]
		}
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "reckon: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	cx := &cmdContext{name: cmd.name, args: args[1:], stdin: stdin, stdout: stdout, stderr: stderr, environ: environ}
	cx.fs = flag.NewFlagSet("reckon "+cmd.name, flag.ContinueOnError)
	cx.fs.SetOutput(stderr)
	cx.fs.StringVar(&cx.configPath, "config", "",
		"configuration file (default: embedded deploy/reckon.yaml; env RECKON_CONFIG)")
	cx.fs.Var(&cx.sets, "set", "override a config key, key=value (repeatable; see `reckon config keys`)")
	err := cmd.run(ctx, cx)
	var child childExit
	switch {
	case err == nil:
		return 0
	case errors.As(err, &child):
		return child.code
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "reckon %s: %v\n", cmd.name, err)
		return 2
	default:
		fmt.Fprintf(stderr, "reckon %s: %v\n", cmd.name, err)
		return 1
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "reckon — a lambda (stream + batch) data system")
	fmt.Fprintln(w, "\nUsage: reckon <command> [flags]\n\nCommands:")
	width := 0
	for _, c := range commands {
		width = max(width, len(c.name))
	}
	for _, c := range commands {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.summary)
	}
	fmt.Fprintln(w, "\nEvery command takes --config FILE and --set key=value; `reckon <command> -h` shows its flags.")
}

// Run is the process entry point used by workers/reckon.
func Run() int {
	ctx, stop := signalContext()
	defer stop()
	return Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ())
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
