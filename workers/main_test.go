package workers

import (
	"context"
	"fmt"
	"os"
	"testing"

	"reckon/activities"
	"reckon/internal/testing/s3test"
)

// envChild makes the test binary run as a `reckon` process (its arguments
// in envChildArgs, separated by the ASCII unit separator 0x1f, or else its
// own command line, as `reckon dev` passes them), so tests can SIGKILL a
// real worker or supervise real children.
const (
	envChild     = "WORKERS_TEST_CHILD"
	envChildArgs = "WORKERS_TEST_CHILD_ARGS"
	// envArchiveBarrier makes a child's archive steps stop at a barrier
	// after their lake write: each announces itself on stdout with the
	// line archiveBarrierLine and then blocks until the process dies, so a
	// test's SIGKILL lands after the write and before Temporal hears of it.
	envArchiveBarrier  = "WORKERS_TEST_ARCHIVE_BARRIER"
	archiveBarrierLine = "archive-barrier: wrote %s %d [%d, %d)\n"
)

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		ctx, stop := signalContext()
		defer stop()
		args := os.Args[1:]
		if a, ok := os.LookupEnv(envChildArgs); ok {
			args = splitArgs(a)
		}
		if os.Getenv(envArchiveBarrier) != "" {
			archiveAfterWrite = func(_ context.Context, in activities.ArchiveRangeInput, res activities.ArchiveRangeResult) {
				fmt.Fprintf(os.Stdout, archiveBarrierLine, in.Topic, in.Partition, in.From, res.Next)
				select {} // until SIGKILL
			}
		}
		os.Exit(Main(ctx, args, os.Stdin, os.Stdout, os.Stderr, os.Environ()))
	}
	code := m.Run()
	s3test.Stop()
	os.Exit(code)
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
