package streaming

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// envBenchBroker=process runs the benchmarks' broker in a process of its
// own, as production has it, instead of in the benchmark's process: the
// worker's CPU and the broker's no longer share one Go runtime, and
// cpu-ns/event counts the worker alone.
const envBenchBroker = "RECKON_BENCH_E2E_BROKER"

// envBrokerChild makes the test binary the broker process (TestMain).
const envBrokerChild = "STREAMING_TEST_BROKER"

// runBrokerChild serves a kfake cluster set up as testenv.Kafka's, prints
// its address and exits when its standard input closes.
func runBrokerChild() {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1), kfake.GroupMinSessionTimeout(500*time.Millisecond))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(c.ListenAddrs()[0])
	_, _ = io.Copy(io.Discard, os.Stdin)
	c.Close()
	os.Exit(0)
}

// brokerProcess starts the test binary as a broker process for t and
// returns its address; the process ends with t.
func brokerProcess(t testing.TB) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envBrokerChild+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("broker process: %v", err)
		}
	})
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("broker process: no address: %v", err)
	}
	return []string{strings.TrimSpace(addr)}
}
