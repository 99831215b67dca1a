package workers

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSQLRunsSecondBinary: `reckon sql` and `reckon serve sql` run
// reckon-sql from PATH with their arguments, environment and streams, and
// exit with its status; without it they say how to build it.
func TestSQLRunsSecondBinary(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	code, _, stderr := runReckon(t, "sql", "SELECT 1")
	if code != 1 || !strings.Contains(stderr, "reckon-sql not found") || !strings.Contains(stderr, "make build") {
		t.Errorf("without reckon-sql: exit %d, %q", code, stderr)
	}

	script := "#!/bin/sh\necho \"args: $*\"\necho \"listen: $RECKON_SQL_LISTEN\"\n/bin/cat\nexit 3\n"
	if err := os.WriteFile(filepath.Join(dir, "reckon-sql"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sql", "--format", "csv", "SELECT 1"}, "args: sql --format csv SELECT 1"},
		{[]string{"serve", "sql", "--set", "sql.listen=127.0.0.1:1"}, "args: serve --set sql.listen=127.0.0.1:1"},
	} {
		var out, errb bytes.Buffer
		code := Main(context.Background(), tc.args, strings.NewReader("from stdin"), &out, &errb, []string{"PATH=" + dir, "RECKON_SQL_LISTEN=127.0.0.1:2"})
		if code != 3 || errb.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q", tc.args, code, errb.String())
		}
		if got := out.String(); !strings.Contains(got, tc.want) || !strings.Contains(got, "listen: 127.0.0.1:2") || !strings.Contains(got, "from stdin") {
			t.Errorf("%v: reckon-sql saw %q, want %q, the environment and stdin", tc.args, got, tc.want)
		}
	}
	if code, _, _ := runReckon(t, "serve", "http"); code != 2 {
		t.Errorf("reckon serve http: exit %d, want 2 (usage)", code)
	}
}
