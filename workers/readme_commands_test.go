package workers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/worker"

	"reckon/internal/config"
	"reckon/internal/testing/testenv"
	"reckon/lake"
	"reckon/workflows"
)

// docCommand is a `temporal …` command a document shows: where, the
// command, and what the document claims it shows (the prose after an
// inline command up to the end of its clause or the next code span, or a
// code line's comment).
type docCommand struct {
	where string // file:line
	line  string
	claim string
}

var inlineTemporal = regexp.MustCompile("`(temporal [^`]+)`")

// temporalCommands returns the Temporal CLI commands in a markdown file:
// inline code spans of its paragraphs and lines of code blocks that start
// with "temporal ".
func temporalCommands(t *testing.T, path string) []docCommand {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []docCommand
	inBlock := false
	var para []string
	paraStart := 0
	flush := func() {
		text := strings.Join(para, " ")
		for _, m := range inlineTemporal.FindAllStringSubmatchIndex(text, -1) {
			claim := text[m[1]:]
			if k := strings.IndexAny(claim, ";:`"); k >= 0 {
				claim = claim[:k]
			}
			if k := strings.Index(claim, ". "); k >= 0 {
				claim = claim[:k]
			}
			out = append(out, docCommand{fmt.Sprintf("%s:%d", path, paraStart), text[m[2]:m[3]], claim})
		}
		para = para[:0]
	}
	for n, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			flush()
			inBlock = !inBlock
			continue
		}
		if inBlock {
			if s := strings.TrimSpace(l); strings.HasPrefix(s, "temporal ") {
				_, comment, _ := strings.Cut(s, " # ")
				out = append(out, docCommand{fmt.Sprintf("%s:%d", path, n+1), s, comment})
			}
			continue
		}
		if strings.TrimSpace(l) == "" {
			flush()
			continue
		}
		if len(para) == 0 {
			paraStart = n + 1
		}
		para = append(para, strings.TrimSpace(l))
	}
	flush()
	return out
}

// shellWords splits a command line as sh does for the quoting documents
// use ('…', "…", a trailing # comment); ok is false for anything else
// (variables, pipes, placeholders like <id>), which cannot run as written.
func shellWords(s string) (words []string, ok bool) {
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '"':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, false
			}
			quoted := s[i+1 : i+1+j]
			if c == '"' && strings.ContainsAny(quoted, "$`\\") {
				return nil, false
			}
			cur.WriteString(quoted)
			inWord = true
			i += j + 1
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		case c == '#' && !inWord:
			i = len(s)
		case strings.IndexByte("$`\\|&;<>(){}*?", c) >= 0:
			return nil, false
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, true
}

// TestDocumentedTemporalCommands runs every Temporal CLI command the
// README and deploy/README.md show against a dev server holding what they
// talk about (the compaction workflow of m8-suhu-kejadian waiting for the
// stream), with the pinned CLI: each exits 0, and what the README says
// one shows is in its output — `temporal workflow metadata` prints the
// current details, the wait included, as the SDK reads them, and
// `describe` only the static summary. A command
// with a placeholder is reported, not run; a new command needs a check
// here.
func TestDocumentedTemporalCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("temporal dev server")
	}
	var cmds []docCommand
	for _, f := range []string{"../README.md", "../deploy/README.md"} {
		cmds = append(cmds, temporalCommands(t, f)...)
	}
	if len(cmds) == 0 {
		t.Fatal("no temporal commands found in the READMEs")
	}

	tc, hostPort := testenv.Temporal(t)
	_, brokers := testenv.Kafka(t, 1, "")
	root := t.TempDir()
	cfg, err := config.Load("", nil, []string{"temporal.address=" + hostPort, "kafka.brokers=" + brokers[0],
		"lake.root=" + root, "lake.compaction.poll=1s", "lake.compaction.lookback=100000h"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	applyTopicMap(t, ctx, cfg)
	lk, err := lake.Open(lake.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	// An archived hour of m8-suhu-kejadian the stream has published no
	// progress for: its compaction waits, and says so.
	const topic = "m8-suhu-kejadian"
	h := time.Date(2026, 11, 7, 8, 0, 0, 0, time.UTC)
	var rows []lake.RawRow
	for i := range int64(5) {
		at := h.Add(time.Duration(i) * time.Minute)
		rows = append(rows, lake.RawRow{EventID: fmt.Sprintf("e%02d", i), EventType: "sensor.suhu.terbaca", Key: "sensor-07",
			OccurredAt: at.UnixMicro(), IngestedAt: at.UnixMicro(), Data: `{"suhu_c":24.5}`, KafkaOffset: i})
	}
	if _, err := lk.WriteRaw(ctx, topic, 0, 0, 4, rows); err != nil {
		t.Fatal(err)
	}
	if _, err := lk.WriteProgress(ctx, lake.Progress{Topic: topic, NextOffset: 5, ArchivedThrough: h.Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	w := worker.New(tc, cfg.Temporal.TaskQueue, worker.Options{})
	closeTruth, err := registerTruth(w, cfg, lk, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeTruth)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	if err := startCompactions(ctx, cfg, tc, quiet); err != nil {
		t.Fatal(err)
	}
	compactID := workflows.CompactionWorkflowID(topic)
	var wait string
	waitFor(t, 2*time.Minute, compactID+" to say what it waits for", func() (bool, string) {
		v, err := tc.QueryWorkflow(ctx, compactID, "", "__temporal_workflow_metadata")
		if err != nil {
			return false, err.Error()
		}
		var md sdkpb.WorkflowMetadata
		if err := v.Get(&md); err != nil {
			return false, err.Error()
		}
		for _, l := range strings.Split(md.GetCurrentDetails(), "\n") {
			if strings.HasPrefix(l, "- next hour waits for ") {
				wait = strings.TrimPrefix(l, "- ")
			}
		}
		return wait != "", md.GetCurrentDetails()
	})
	t.Cleanup(func() { _ = tc.TerminateWorkflow(context.Background(), compactID, "", "test done") })

	bin := testenv.TemporalBin(t)
	ran := 0
	for _, c := range cmds {
		args, ok := shellWords(c.line)
		if !ok || slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "<") }) {
			t.Logf("%s: %q has a placeholder: not run", c.where, c.line)
			continue
		}
		check, known := documentedChecks(args, c.claim, wait)
		if !known {
			t.Errorf("%s: %q (claim %q): no check for this documented command and claim; add one to documentedChecks", c.where, c.line, c.claim)
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		out, err := exec.CommandContext(cctx, bin, append(args[1:], "--address", hostPort)...).CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("%s: %q: %v\n%s", c.where, c.line, err, out)
			continue
		}
		if msg := check(string(out)); msg != "" {
			t.Errorf("%s: %q: %s\n%s", c.where, c.line, msg, out)
		}
		ran++
	}
	if ran == 0 {
		t.Error("no documented temporal command could run")
	}
}

// documentedChecks returns the check of what a documented command's
// output must hold ("" when it does) given the document's claim, false
// when the test knows no such command. wait is the compaction's wait, as
// its current details say it.
func documentedChecks(args []string, claim, wait string) (func(string) string, bool) {
	if len(args) < 3 || args[1] != "workflow" {
		return nil, false
	}
	switch args[2] {
	case "metadata", "describe":
		if len(args) != 5 || args[3] != "-w" || args[4] != "compact/m8-suhu-kejadian" {
			return nil, false
		}
		switch {
		case strings.Contains(claim, "only") && strings.Contains(claim, "static summary"):
			return func(out string) string {
				if strings.Contains(out, wait) {
					return fmt.Sprintf("the document says it shows only the static summary, it prints the wait (%q)", wait)
				}
				if !strings.Contains(out, "compact m8-suhu-kejadian's raw lake table") {
					return "the document says it shows the static summary; it does not"
				}
				return ""
			}, true
		case strings.Contains(claim, "waits for"):
			return func(out string) string {
				if !strings.Contains(out, wait) {
					return fmt.Sprintf("the document says it shows what the compaction waits for; the output lacks it (%q)", wait)
				}
				return ""
			}, true
		}
	case "list":
		// A list query runs: the server knows every search attribute it
		// names (an unknown one fails the command).
		return func(string) string { return "" }, len(args) == 5 && args[3] == "--query"
	}
	return nil, false
}
