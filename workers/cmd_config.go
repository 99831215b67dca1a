package workers

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/goccy/go-yaml"

	"reckon/internal/config"
)

func runConfig(ctx context.Context, cx *cmdContext) error {
	cx.fs.Usage = func() {
		fmt.Fprintln(cx.stderr, "usage: reckon config [show|keys]")
		cx.fs.PrintDefaults()
	}
	// The subcommand first, so `config show --set k=v` shows the override.
	var sub string
	if len(cx.args) > 0 && !strings.HasPrefix(cx.args[0], "-") {
		sub, cx.args = cx.args[0], cx.args[1:]
	}
	if err := cx.parse(); err != nil {
		return err
	}
	if sub == "" {
		sub = cx.fs.Arg(0)
	}
	switch sub {
	case "", "show":
		b, err := yaml.Marshal(cx.cfg)
		if err != nil {
			return err
		}
		_, err = cx.stdout.Write(b)
		return err
	case "keys":
		// Defaults are the configuration with no file, RECKON_* variable
		// or --set: the embedded deploy/reckon.yaml, defaults filled.
		def, err := config.Load("", nil, nil)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(cx.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tENVIRONMENT\tDEFAULT\tDESCRIPTION")
		for _, k := range config.Keys() {
			v, _ := config.Get(def, k)
			if v == "" {
				v = `""`
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k, config.EnvName(k), v, config.KeyDoc(k))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(cx.stdout,
			"\nDEFAULT is the value with no config file, environment variable or --set, on this machine.\nSet a key in the "+
				"config file, in its environment variable or with --set key=value (lists comma separated,\ndurations like 90s). "+
				"Streams and gate.types are set in the file only.")
		return nil
	default:
		return fmt.Errorf("%w: unknown subcommand %q (want show or keys)", errUsage, sub)
	}
}
