//go:build duckdb_arrow

package sqlserve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/ipc"

	"reckon/internal/testing/poll"
	"reckon/internal/testing/testlog"
)

// TestOneShot: `reckon sql` prints a query's result as a table, CSV, JSON
// lines (columns in order) and an Arrow IPC stream.
func TestOneShot(t *testing.T) {
	tl := buildLake(t)
	run := func(format string) (string, string, int) {
		var out, errb bytes.Buffer
		code := Main(context.Background(), []string{"sql", "--format", format, "--set", "lake.root=" + tl.root,
			`SELECT key, count(*) AS windows, sum("count")::BIGINT AS events FROM windows GROUP BY key ORDER BY key`}, strings.NewReader(""), &out, &errb, nil)
		return out.String(), errb.String(), code
	}
	out, errs, code := run("table")
	if code != 0 || !strings.HasPrefix(out, "key ") || !strings.Contains(out, "sensor-00") || !strings.HasSuffix(out, "(4 rows)\n") {
		t.Errorf("table: exit %d %s\n%s", code, errs, out)
	}
	out, _, code = run("csv")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 5 || lines[0] != "key,windows,events" {
		t.Errorf("csv: exit %d\n%s", code, out)
	}
	out, _, code = run("json")
	sum := 0
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil || !strings.HasPrefix(l, `{"key":`) {
			t.Errorf("json line %q: %v", l, err)
		}
		n, _ := m["events"].(float64)
		sum += int(n)
	}
	if code != 0 || sum != tl.events {
		t.Errorf("json: exit %d, %d events, want %d", code, sum, tl.events)
	}
	out, _, code = run("arrow")
	r, err := ipc.NewReader(strings.NewReader(out))
	if err != nil || code != 0 {
		t.Fatalf("arrow: exit %d, %v", code, err)
	}
	rows := 0
	for r.Next() {
		rows += int(r.RecordBatch().NumRows())
	}
	if rows != 4 || r.Schema().Field(2).Name != "events" {
		t.Errorf("arrow: %d rows, schema %v", rows, r.Schema())
	}
	r.Release()

	// Numbers in the table in plain notation, grouped; CSV keeps them exact.
	var money bytes.Buffer
	code = Main(context.Background(), []string{"sql", "--set", "lake.root=" + tl.root,
		"SELECT 2974500.0::DOUBLE AS money, 1234567::BIGINT AS n, 0.125::DOUBLE AS small"}, strings.NewReader(""), &money, io.Discard, nil)
	if out := money.String(); code != 0 || !strings.Contains(out, "2,974,500  1,234,567  0.125") || strings.Contains(out, "e+") {
		t.Errorf("table of numbers: exit %d\n%s", code, out)
	}

	var empty bytes.Buffer
	code = Main(context.Background(), []string{"sql", "--format", "csv", "--set", "lake.root=" + tl.root, "SELECT key, version FROM windows WHERE false"},
		strings.NewReader(""), &empty, io.Discard, nil)
	if code != 0 || empty.String() != "key,version\n" {
		t.Errorf("csv of an empty result: exit %d, %q; want the header", code, empty.String())
	}

	var errb bytes.Buffer
	code = Main(context.Background(), []string{"sql", "--set", "lake.root=" + tl.root, "COPY windows TO '" + tl.root + "/w.csv'"}, strings.NewReader(""), io.Discard, &errb, nil)
	if code != 1 || !strings.Contains(errb.String(), "read-only SELECT") {
		t.Errorf("a write through reckon sql: exit %d, %q", code, errb.String())
	}
}

// TestServeCommand: `reckon-sql serve` prints its address, answers a
// Flight SQL client, serves its metrics, and stops cleanly when its
// context ends.
func TestServeCommand(t *testing.T) {
	tl := buildLake(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	var logs testlog.Buffer
	go func() {
		done <- Main(ctx, []string{"serve", "--set", "lake.root=" + tl.root, "--set", "sql.listen=127.0.0.1:0",
			"--set", "metrics.addr=127.0.0.1:0"}, strings.NewReader(""), pw, &logs, nil)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no address line: %v", err)
	}
	go io.Copy(io.Discard, pr)
	_, rest, ok := strings.Cut(line, "grpc://")
	if !ok {
		t.Fatalf("address line %q", line)
	}
	addr := strings.Fields(rest)[0]
	c := newClient(t, addr)
	if n := mustRead(t, c, "SELECT count(*) FROM events").rows[0][0]; n != strconv.Itoa(tl.events) {
		t.Errorf("events through the served endpoint: %s, want %d", n, tl.events)
	}
	var url string
	poll.WaitFor(t, 2*time.Minute, "the metrics line", func() (bool, string) {
		_, rest, ok := strings.Cut(logs.String(), "msg=metrics url=")
		if ok {
			url = strings.Fields(rest)[0]
		}
		return ok, logs.String()
	})
	if body := scrape(t, url); !strings.Contains(body, `reckon_sql_query_retries_total{reason="vanished_file"} 0`+"\n") {
		t.Errorf("%s holds no vanished_file retry series at 0:\n%s", url, body)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("serve exited %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// scrape returns the body of a GET of a /metrics url.
func scrape(t testing.TB, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	return string(b)
}
