package lint

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// pkg is one package of the module as `go list` reports it: its
// non-test imports only (a test may import what its package may not).
type pkg struct {
	path    string
	imports []string
}

// list runs `go list` over the module (lake/interop is a module of its
// own and is not listed).
func list(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		pkgs = append(pkgs, pkg{path: f[0], imports: f[1:]})
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages; is the test running inside the module?", len(pkgs))
	}
	return pkgs
}

func under(path string, prefixes ...string) bool {
	for _, p := range prefixes {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// The rooms (docs/adr/0023-rooms.md, docs/ARCHITECTURE.md "Packages").
var (
	// pureCores import nothing of ours beyond the envelope package.
	pureCores = []string{"reckon/internal/event", "reckon/zreport", "reckon/streaming/operator"}
	// productRooms are what a running worker or the SQL endpoint executes.
	productRooms = []string{
		"reckon/streaming", "reckon/lake", "reckon/activities", "reckon/workflows",
		"reckon/zreport", "reckon/sqlserve",
	}
	// wiring connects the rooms to configuration and clients.
	wiring = []string{
		"reckon/internal/config", "reckon/internal/event", "reckon/internal/kafkaconn",
		"reckon/internal/lakeconn", "reckon/internal/metrics", "reckon/internal/temporalconn",
		"reckon/internal/topics", "reckon/deploy",
	}
	// offPath are never imported by the product or the wiring: tooling,
	// verification and test helpers.
	offPath = []string{"reckon/tools", "reckon/verify", "reckon/internal/testing"}
	// workflowIO are packages a deterministic workflow must not import:
	// anything that reaches a clock, a file, the network or a client.
	workflowIO = []string{
		"os", "net", "io/fs", "database/sql", "math/rand", "math/rand/v2", "log/slog",
		"github.com/twmb/franz-go", "github.com/parquet-go", "github.com/apache/arrow-go",
		"github.com/aws", "go.temporal.io/sdk/client", "go.temporal.io/sdk/worker",
		"reckon/lake", "reckon/streaming", "reckon/internal/kafkaconn", "reckon/internal/lakeconn",
		"reckon/internal/temporalconn", "reckon/internal/metrics", "reckon/internal/config",
	}
)

// configRatchet lists the product packages that still take the whole
// *config.Config instead of options of their own (issue 26). The list may
// only shrink: a package that stops importing internal/config must leave
// it, and no package may join it.
var configRatchet = []string{
	"reckon/activities",
	"reckon/sqlserve",
	"reckon/streaming",
}

// forbidden returns every broken rule, one line each.
func forbidden(pkgs []pkg) []string {
	var bad []string
	for _, p := range pkgs {
		for _, imp := range p.imports {
			switch {
			case slices.Contains(pureCores, p.path) && strings.HasPrefix(imp, "reckon/") && imp != "reckon/internal/event":
				bad = append(bad, p.path+" (a pure core) imports "+imp+": pure cores import only reckon/internal/event")
			case (under(p.path, productRooms...) || under(p.path, wiring...)) && under(imp, offPath...):
				bad = append(bad, p.path+" imports "+imp+": nothing in a worker's path imports tooling, verification or test helpers")
			case under(p.path, "reckon/zreport") && under(imp, "reckon/activities"):
				bad = append(bad, p.path+" imports "+imp+": the Z-report domain never imports activities")
			case under(p.path, "reckon/workflows") && under(imp, workflowIO...):
				bad = append(bad, p.path+" imports "+imp+": workflows import no I/O package")
			case !under(p.path, "reckon/tools") && under(imp, "reckon/tools"):
				bad = append(bad, p.path+" imports "+imp+": only tools/ imports tools/")
			case !under(p.path, "reckon/internal/testing", "reckon/tools") && under(imp, "reckon/internal/testing"):
				bad = append(bad, p.path+" imports "+imp+": test helpers are for tests and tools")
			case under(p.path, productRooms...) && imp == "reckon/internal/config" && !slices.Contains(configRatchet, p.path):
				bad = append(bad, p.path+" imports reckon/internal/config: a product room takes options of its own; the wiring maps the config")
			}
		}
	}
	for _, r := range configRatchet {
		i := slices.IndexFunc(pkgs, func(p pkg) bool { return p.path == r })
		if i < 0 || !slices.Contains(pkgs[i].imports, "reckon/internal/config") {
			bad = append(bad, r+" no longer imports reckon/internal/config: take it off configRatchet")
		}
	}
	return bad
}

// TestForbiddenImports holds the dependency rules of docs/ARCHITECTURE.md.
func TestForbiddenImports(t *testing.T) {
	for _, l := range forbidden(list(t)) {
		t.Error(l)
	}
}

// TestForbiddenImportsCatches shows each rule fires on a package that
// breaks it.
func TestForbiddenImportsCatches(t *testing.T) {
	for _, c := range []pkg{
		{"reckon/streaming/operator", []string{"reckon/lake"}},
		{"reckon/activities", []string{"reckon/verify/ledger"}},
		{"reckon/internal/kafkaconn", []string{"reckon/internal/testing/poll"}},
		{"reckon/zreport/bridge", []string{"reckon/activities"}},
		{"reckon/workflows", []string{"os"}},
		{"reckon/workflows", []string{"github.com/twmb/franz-go/pkg/kgo"}},
		{"reckon/workers", []string{"reckon/tools/chaos"}},
		{"reckon/verify/ledger", []string{"reckon/internal/testing/testenv"}},
		{"reckon/lake", []string{"reckon/internal/config"}},
	} {
		var pkgs []pkg
		for _, r := range configRatchet {
			pkgs = append(pkgs, pkg{r, []string{"reckon/internal/config"}})
		}
		pkgs = append(pkgs, c)
		if bad := forbidden(pkgs); len(bad) != 1 {
			t.Errorf("%s importing %v: want one broken rule, got %q", c.path, c.imports, bad)
		}
	}
}

var tableRow = regexp.MustCompile("^\\| *((?:`[^`]+`[ ,]*)+)\\|")
var tick = regexp.MustCompile("`([^`]+)`")

// TestArchitectureTable: every package of the module has a row in
// docs/ARCHITECTURE.md's package tables, and every package a row names
// exists, so the table cannot drift from the tree.
func TestArchitectureTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	start, end := strings.Index(s, "\n## Packages"), strings.Index(s, "\n## Where things are")
	if start < 0 || end < start {
		t.Fatal("docs/ARCHITECTURE.md: no \"## Packages\" section before \"## Where things are\"")
	}
	named := map[string]bool{}
	for _, line := range strings.Split(s[start:end], "\n") {
		m := tableRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, n := range tick.FindAllStringSubmatch(m[1], -1) {
			named["reckon/"+strings.TrimSuffix(n[1], "/")] = true
		}
	}
	have := map[string]bool{}
	for _, p := range list(t) {
		have[p.path] = true
		if !named[p.path] {
			t.Errorf("docs/ARCHITECTURE.md: package %s has no row in the package tables", strings.TrimPrefix(p.path, "reckon/"))
		}
	}
	for n := range named {
		if !have[n] && n != "reckon/lake/interop" {
			t.Errorf("docs/ARCHITECTURE.md: the package tables name %s, which go list does not know", strings.TrimPrefix(n, "reckon/"))
		}
	}
}
