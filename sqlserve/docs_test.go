//go:build duckdb_arrow

package sqlserve

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDocExamples runs every SQL statement of docs/lake.md's examples
// through the Flight SQL client: the documentation cannot drift from the
// views.
func TestDocExamples(t *testing.T) {
	b, err := os.ReadFile("../docs/lake.md")
	if err != nil {
		t.Fatal(err)
	}
	// Only the endpoint's section: the rest of the page queries the files
	// directly (run by lake/interop's TestLakeDocQueries).
	_, section, ok := strings.Cut(string(b), "\n## SQL endpoint views")
	if !ok {
		t.Fatal("docs/lake.md has no section \"SQL endpoint views\"")
	}
	blocks := regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(section, -1)
	var stmts []string
	for _, blk := range blocks {
		for _, s := range strings.Split(blk[1], ";") {
			var lines []string
			for _, l := range strings.Split(s, "\n") {
				if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "--") {
					lines = append(lines, l)
				}
			}
			if len(lines) > 0 {
				stmts = append(stmts, strings.Join(lines, "\n"))
			}
		}
	}
	if len(stmts) < 3 {
		t.Fatalf("docs/lake.md: %d SQL examples found", len(stmts))
	}
	c := newClient(t, startServer(t, openEngine(t, buildLake(t).root), ServeOptions{}))
	for _, s := range stmts {
		if _, err := readAll(context.Background(), c, s); err != nil {
			t.Errorf("docs/lake.md example fails:\n%s\n%v", s, err)
		}
	}
}
