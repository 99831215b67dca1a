package workers

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"reckon/internal/kafkaconn"
	"reckon/internal/topics"
)

func runTopics(ctx context.Context, cx *cmdContext) error {
	mapFile := cx.fs.String("map", "",
		"topic map file (default: topics.map from config, else the embedded deploy/topics.yaml)")
	wait := cx.fs.Duration("wait", 30*time.Second, "how long to wait for the brokers to answer")
	cx.fs.Usage = func() {
		fmt.Fprintln(cx.stderr,
			"usage: reckon topics apply|describe [flags]\n       reckon topics tail TOPIC [-n N] [--follow]")
		cx.fs.PrintDefaults()
	}
	n := cx.fs.Int("n", 10, "tail: records per partition to show from the end")
	follow := cx.fs.Bool("follow", false, "tail: keep printing new records")
	// The subcommand (and tail's topic) may come before or after the
	// flags. Flag parsing stops at the first argument that is not a flag,
	// so the leading ones are taken off first: `topics describe --set k=v`
	// reads --set.
	var pos []string
	for len(cx.args) > 0 && len(pos) < 2 && !strings.HasPrefix(cx.args[0], "-") {
		pos, cx.args = append(pos, cx.args[0]), cx.args[1:]
	}
	if err := cx.parse(); err != nil {
		return err
	}
	pos = append(pos, cx.fs.Args()...)
	var sub string
	if len(pos) > 0 {
		sub = pos[0]
	}
	if sub == "tail" {
		var topic string
		if len(pos) > 1 {
			topic = pos[1]
		}
		return runTopicsTail(ctx, cx, topic, *n, *follow)
	}
	if sub != "apply" && sub != "describe" {
		return fmt.Errorf("%w: want `topics apply`, `topics describe` or `topics tail`", errUsage)
	}
	path := *mapFile
	if path == "" {
		path = cx.cfg.Topics.Map
	}
	m, err := topics.Load(path)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, *wait)
	defer cancel()
	if err := kafkaconn.WaitReady(wctx, cx.cfg.Kafka); err != nil {
		return err
	}
	adm, closeAdm, err := kafkaconn.NewAdmin(cx.cfg.Kafka, "topics")
	if err != nil {
		return err
	}
	defer closeAdm()
	if sub == "apply" {
		acts, err := topics.Apply(ctx, adm, m)
		for _, a := range acts {
			fmt.Fprintln(cx.stdout, a)
		}
		return err
	}
	live, err := topics.Describe(ctx, adm, m)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(cx.stdout, 0, 4, 2, ' ', 0)
	// The sum of end offsets is not a message count: transaction markers
	// and aborted records take offsets too, and retention does not lower it.
	fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tRETENTION.MS\tCLEANUP\tOFFSETS\tEND OFFSETS\tIN MAP")
	for _, l := range live {
		var parts []int32
		var total int64
		for p, o := range l.EndOffsets {
			parts = append(parts, p)
			total += o
		}
		sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
		var offs []string
		for _, p := range parts {
			offs = append(offs, fmt.Sprintf("%d:%d", p, l.EndOffsets[p]))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%s\t%v\n", l.Name, l.Partitions, l.Configs["retention.ms"],
			l.Configs["cleanup.policy"], total, strings.Join(offs, " "), l.InMap)
	}
	for _, t := range m.Topics {
		found := false
		for _, l := range live {
			found = found || l.Name == t.Name
		}
		if !found {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t(missing: run `reckon topics apply`)\ttrue\n", t.Name)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(cx.stdout,
		"\nOFFSETS is the sum of the partitions' END OFFSETS (partition:offset): offsets ever used, transaction "+
			"markers\nand aborted records included, records removed by retention not subtracted. It is not a message count.")
	return nil
}
