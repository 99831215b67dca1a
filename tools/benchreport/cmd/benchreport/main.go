// Command benchreport renders BENCHMARKS.md from the raw output of
// `make bench`:
//
//	benchreport -raw .reckon/bench/raw.txt -out BENCHMARKS.md -command "make bench"
//
// It exits 1, after writing the report, when a benchmark the report names
// did not run.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"reckon/tools/benchreport"
)

func main() {
	raw := flag.String("raw", ".reckon/bench/raw.txt", "raw `go test -bench` output with the Makefile's markers")
	out := flag.String("out", "BENCHMARKS.md", "report to write")
	command := flag.String("command", "make bench", "the command that produced the raw output, as the report shows it")
	notes := flag.String("notes", "docs/benchmarks-notes.md", "hand-written analysis to link, relative to the report")
	goVersion := flag.String("go", "", "Go version that built the benchmarks (default: this program's)")
	flag.Parse()
	if err := run(*raw, *out, *command, *notes, *goVersion); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

func run(rawPath, outPath, command, notes, goVersion string) error {
	f, err := os.Open(rawPath)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := benchreport.Parse(f)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	res, err := benchreport.Render(&buf, r, benchreport.Options{
		Command: command, Raw: rawPath, Notes: notes, Machine: benchreport.ReadMachine(goVersion),
	})
	if err != nil {
		return err
	}
	if err := os.WriteFile(outPath, buf.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Printf("benchreport: wrote %s from %s (%d benchmarks)\n", outPath, rawPath, len(r.Benchmarks))
	if len(res.DidNotRun) > 0 {
		for _, m := range res.DidNotRun {
			fmt.Fprintln(os.Stderr, "did not run or failed:", m)
		}
		return fmt.Errorf("%d benchmarks did not run or failed (see %s)", len(res.DidNotRun), outPath)
	}
	return nil
}
