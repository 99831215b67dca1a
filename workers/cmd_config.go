package workers

import (
	"context"
	"fmt"

	"github.com/goccy/go-yaml"

	"reckon/internal/config"
)

func runConfig(ctx context.Context, cx *cmdContext) error {
	cx.fs.Usage = func() {
		fmt.Fprintln(cx.stderr, "usage: reckon config [show|keys]")
		cx.fs.PrintDefaults()
	}
	if err := cx.parse(); err != nil {
		return err
	}
	switch sub := cx.fs.Arg(0); sub {
	case "", "show":
		b, err := yaml.Marshal(cx.cfg)
		if err != nil {
			return err
		}
		_, err = cx.stdout.Write(b)
		return err
	case "keys":
		for _, k := range config.Keys() {
			fmt.Fprintf(cx.stdout, "%-36s %s\n", k, config.EnvName(k))
		}
		return nil
	default:
		return fmt.Errorf("%w: unknown subcommand %q (want show or keys)", errUsage, sub)
	}
}
