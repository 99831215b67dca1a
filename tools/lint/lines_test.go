package lint

import (
	"bufio"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// maxLine is the longest product line, in characters (tabs count one).
const maxLine = 120

var updateLines = flag.Bool("update-lines", false, "rewrite testdata/long_lines.txt from the tree")

// productDirs are the rooms whose code the line rule covers: the product
// and the wiring (not tools, verification or test helpers, not tests).
var productDirs = []string{"activities", "deploy", "internal", "lake", "sqlserve", "streaming", "workers", "workflows", "zreport"}

// generated is the first line of a generated file (go help generate).
var generated = regexp.MustCompile(`^// Code generated .* DO NOT EDIT\.$`)

// longLines counts, per product file, the lines over maxLine; generated
// files are skipped.
func longLines(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, d := range productDirs {
		err := filepath.WalkDir(filepath.Join("../..", d), func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel("../..", path)
			if e.IsDir() {
				if rel == "internal/testing" || rel == "lake/interop" || e.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 1<<20)
			for first := true; sc.Scan(); first = false {
				if first && generated.Match(sc.Bytes()) {
					return nil // a generated file: its generator decides its lines
				}
				if utf8.RuneCount(sc.Bytes()) > maxLine {
					out[filepath.ToSlash(rel)]++
				}
			}
			return sc.Err()
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestLineLength: product lines are at most 120 characters. The files that
// had longer lines when the rule came in are listed in
// testdata/long_lines.txt with their count, which may only go down (run
// with -update-lines after wrapping some); every other file has none.
func TestLineLength(t *testing.T) {
	have := longLines(t)
	const golden = "testdata/long_lines.txt"
	if *updateLines {
		var b strings.Builder
		b.WriteString("# product files with lines over 120 characters: the count may only go down\n")
		for _, f := range slices.Sorted(maps.Keys(have)) {
			fmt.Fprintf(&b, "%s %d\n", f, have[f])
		}
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]int{}
	for _, l := range strings.Split(string(raw), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 || strings.HasPrefix(l, "#") {
			continue
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			t.Fatalf("%s: %q: %v", golden, l, err)
		}
		allowed[f[0]] = n
	}
	for _, f := range slices.Sorted(maps.Keys(have)) {
		if have[f] > allowed[f] {
			t.Errorf("%s: %d lines over %d characters (allowed %d): wrap them", f, have[f], maxLine, allowed[f])
		}
	}
	for _, f := range slices.Sorted(maps.Keys(allowed)) {
		if have[f] < allowed[f] {
			t.Errorf("%s: %d lines over %d characters, %s allows %d: lower it (go test ./tools/lint -run TestLineLength -update-lines)",
				f, have[f], maxLine, golden, allowed[f])
		}
	}
}
