package workers

import (
	"os"
	"testing"
)

// envChild makes the test binary run as a `reckon` process (its arguments
// in envChildArgs, separated by the ASCII unit separator 0x1f), so tests can SIGKILL a real worker.
const (
	envChild     = "WORKERS_TEST_CHILD"
	envChildArgs = "WORKERS_TEST_CHILD_ARGS"
)

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		ctx, stop := signalContext()
		defer stop()
		args := splitArgs(os.Getenv(envChildArgs))
		os.Exit(Main(ctx, args, os.Stdin, os.Stdout, os.Stderr, os.Environ()))
	}
	os.Exit(m.Run())
}

func splitArgs(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1f {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
