package workers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// sqlBinary is the second binary holding the SQL engine (DuckDB, CGO):
// reckon stays CGO-free (docs/adr/0017-sql-endpoint.md).
const sqlBinary = "reckon-sql"

// runServe is `reckon serve sql`: the Arrow Flight SQL endpoint.
func runServe(ctx context.Context, cx *cmdContext) error {
	if len(cx.args) == 0 || cx.args[0] != "sql" {
		fmt.Fprintln(cx.stderr,
			"usage: reckon serve sql [--config FILE] [--set key=value ...]\n  serve Arrow Flight SQL on sql.listen over the "+
				"lake (bin/reckon-sql; docs/adr/0017-sql-endpoint.md)")
		if len(cx.args) > 0 && (cx.args[0] == "-h" || cx.args[0] == "--help") {
			return nil
		}
		return fmt.Errorf("%w: want `reckon serve sql`", errUsage)
	}
	return execSQL(ctx, cx, append([]string{"serve"}, cx.args[1:]...))
}

// runSQL is `reckon sql "SELECT ..."`: one query, printed.
func runSQL(ctx context.Context, cx *cmdContext) error {
	return execSQL(ctx, cx, append([]string{"sql"}, cx.args...))
}

// childExit is reckon-sql's failure: it has printed why; reckon exits
// with its status and says nothing more.
type childExit struct{ code int }

func (e childExit) Error() string { return fmt.Sprintf("%s exited with status %d", sqlBinary, e.code) }

// findSQLBinary returns reckon-sql next to this executable, else on PATH.
func findSQLBinary() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), sqlBinary)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath(sqlBinary); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s not found next to reckon or on PATH: the SQL engine (DuckDB, CGO) is a second binary; "+
		"build it with `make build`", sqlBinary)
}

// execSQL runs reckon-sql with args, the same environment and standard
// streams; SIGINT/SIGTERM (ctx) reach it as SIGTERM.
func execSQL(ctx context.Context, cx *cmdContext, args []string) error {
	bin, err := findSQLBinary()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr, cmd.Env = cx.stdin, cx.stdout, cx.stderr, cx.environ
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ctx.Err() == nil {
		return childExit{code: ee.ExitCode()}
	}
	if ctx.Err() != nil {
		return nil // stopped by a signal, as asked
	}
	return err
}
