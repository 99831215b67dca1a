package workers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
	"reckon/internal/testing/testenv"
	"reckon/workflows"
	"reckon/zreport"
)

// zpartJSON renders a Z-report part envelope as the parts topic carries it.
func zpartJSON(id, typ, drive string, shift, receipts int, total float64, closed time.Time) []byte {
	return fmt.Appendf(nil, `{"event_id":%q,"event_type":%q,"occurred_at":%q,"data":{"fiscal_drive":%q,"shift":%d,"receipts":%d,"total":%.2f,"shift_closed_at":%q}}`,
		id, typ, closed.Format(time.RFC3339Nano), drive, shift, receipts, total, closed.Format(time.RFC3339Nano))
}

func zid(n int) string {
	return uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "zreport-e2e-%d", n)).String()
}

// TestZReportEndToEnd runs parts over the wire: kfake broker → bridge →
// real Temporal dev server → entity workflows → activities → complete /
// incomplete topics, the lake and the simulated operator (HTTP). Deadlines
// are shortened to seconds: the OFD request fires 2s after shift close, the
// retention 6s after.
func TestZReportEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	var tc client.Client
	var hostport, ui string
	if *uiCheck != "" { // -ui DIR: with the web UI, checked in headless chromium at the end
		tc, hostport, ui = temporalWithUI(t)
	} else {
		tc, hostport = testenv.Temporal(t)
	}
	topics := []string{"zreport-parts", "zreport-complete", "zreport-incomplete", "reckon-dlq"}
	_, brokers := testenv.Kafka(t, 3, "", topics...)

	// The simulated operator on a free port, serving one document: for the
	// key whose OFD part never reaches Kafka.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := time.Now().UTC().Truncate(time.Millisecond)
	docs := filepath.Join(t.TempDir(), "ofd.jsonl")
	if err := os.WriteFile(docs, zpartJSON(zid(100), zreport.TypeOFD, "9960440300000002", 77, 56, 31650.25, closed), 0o644); err != nil {
		t.Fatal(err)
	}
	lakeRoot := t.TempDir()
	cfg, err := config.Load("", nil, []string{
		"kafka.brokers=" + brokers[0], "temporal.address=" + hostport, "temporal.task_queue=zreport-e2e",
		"lake.root=" + lakeRoot,
		"zreport.ofd_request_after=2s", "zreport.retention=6s", "zreport.ofd_retry=1s", "zreport.linger=1s",
		"zreport.ofd_url=http://" + ln.Addr().String(), "zreport.ofd_sim_documents=" + docs,
		"zreport.ofd_backoff=100ms",
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, sim, err := newOFDSimulator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	w := worker.New(tc, cfg.Temporal.TaskQueue, worker.Options{})
	run, closeFn, err := zreportBatch(cfg, tc, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	bctx, stopBridge := context.WithCancel(ctx)
	var bwg sync.WaitGroup
	bwg.Add(1)
	go func() {
		defer bwg.Done()
		if err := run(bctx); err != nil {
			t.Errorf("bridge: %v", err)
		}
	}()
	t.Cleanup(func() { stopBridge(); bwg.Wait(); closeFn(); w.Stop() })

	cl, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "test"),
		kgo.ConsumeTopics("zreport-complete", "zreport-incomplete", "reckon-dlq"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	type rec struct{ key, value string }
	parts := []rec{
		// K1 matched, its DWH part redelivered (same bytes).
		{"9960440300000001/142", string(zpartJSON(zid(1), zreport.TypeRMS, "9960440300000001", 142, 120, 78000.5, closed))},
		{"9960440300000001/142", string(zpartJSON(zid(2), zreport.TypeDWH, "9960440300000001", 142, 120, 78000.5, closed))},
		{"9960440300000001/142", string(zpartJSON(zid(3), zreport.TypeOFD, "9960440300000001", 142, 120, 78000.5, closed))},
		{"9960440300000001/142", string(zpartJSON(zid(2), zreport.TypeDWH, "9960440300000001", 142, 120, 78000.5, closed))},
		// K2: OFD never sent; the operator has it (day "six" = 2s).
		{"9960440300000002/77", string(zpartJSON(zid(10), zreport.TypeDWH, "9960440300000002", 77, 56, 31650.25, closed))},
		{"9960440300000002/77", string(zpartJSON(zid(11), zreport.TypeRMS, "9960440300000002", 77, 56, 31650.25, closed))},
		// K3: DWH never arrives → incomplete at the retention (6s).
		{"9960440300000003/9", string(zpartJSON(zid(20), zreport.TypeOFD, "9960440300000003", 9, 10, 1000, closed))},
		{"9960440300000003/9", string(zpartJSON(zid(21), zreport.TypeRMS, "9960440300000003", 9, 10, 1000, closed))},
		// K4 mismatched: RMS lost a receipt.
		{"9960440300000004/12", string(zpartJSON(zid(30), zreport.TypeOFD, "9960440300000004", 12, 33, 9900.99, closed))},
		{"9960440300000004/12", string(zpartJSON(zid(31), zreport.TypeDWH, "9960440300000004", 12, 33, 9900.99, closed))},
		{"9960440300000004/12", string(zpartJSON(zid(32), zreport.TypeRMS, "9960440300000004", 12, 32, 9600.99, closed))},
		// Invalid: a 15-digit fiscal drive → DLQ.
		{"996044030000005/1", string(zpartJSON(zid(40), zreport.TypeOFD, "996044030000005", 1, 1, 1, closed))},
	}
	var krecs []*kgo.Record
	for _, p := range parts {
		krecs = append(krecs, &kgo.Record{Topic: "zreport-parts", Key: []byte(p.key), Value: []byte(p.value)})
	}
	if err := cl.ProduceSync(ctx, krecs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	finals := map[string]zreport.Aggregate{}
	changelogs := map[string]int{}
	var dead []*kgo.Record
	for len(finals) < 4 || len(dead) < 1 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("timed out: finals %v, dead %d", slices.Collect(mapKeys(finals)), len(dead))
		}
		fs.EachRecord(func(r *kgo.Record) {
			switch r.Topic {
			case "zreport-complete":
				var a zreport.Aggregate
				if err := json.Unmarshal(r.Value, &a); err != nil {
					t.Fatal(err)
				}
				if a.Key().String() != string(r.Key) {
					t.Errorf("record key %s for %s", r.Key, a.Key())
				}
				finals[string(r.Key)] = a
			case "zreport-incomplete":
				if r.Value != nil {
					changelogs[string(r.Key)]++
				}
			case "reckon-dlq":
				dead = append(dead, r)
			}
		})
	}
	check := func(key string, status zreport.Status, missing ...zreport.Source) zreport.Aggregate {
		t.Helper()
		a := finals[key]
		if a.Status != status || a.Version != 1 || !slices.Equal(a.Missing, append([]zreport.Source{}, missing...)) {
			t.Errorf("%s: %+v, want %s missing %v", key, a, status, missing)
		}
		return a
	}
	if a := check("9960440300000001/142", zreport.StatusMatched); a.Duplicates.DWH+a.Duplicates.RMS+a.Duplicates.OFD > 1 {
		t.Errorf("K1 duplicates %+v", a.Duplicates)
	}
	if a := check("9960440300000002/77", zreport.StatusMatched); a.Sources.OFD == nil || a.Sources.OFD.EventID != zid(100) {
		t.Errorf("K2 OFD from the operator: %+v", a.Sources.OFD)
	}
	check("9960440300000003/9", zreport.StatusIncomplete, zreport.DWH)
	if a := check("9960440300000004/12", zreport.StatusMismatched); len(a.Differences) != 2 {
		t.Errorf("K4 differences %+v", a.Differences)
	}
	if changelogs["9960440300000002/77"] != 2 || changelogs["9960440300000003/9"] != 2 {
		t.Errorf("changelog entries %v", changelogs)
	}
	if st := sim.Stats(); st.Found < 1 {
		t.Errorf("operator stats %+v", st)
	}
	// The dead letter keeps the original bytes and says why.
	d := dead[0]
	if string(d.Value) != parts[11].value || string(d.Key) != parts[11].key {
		t.Errorf("dead letter %s / %s", d.Key, d.Value)
	}
	hdr := map[string]string{}
	for _, h := range d.Headers {
		hdr[h.Key] = string(h.Value)
	}
	if !strings.Contains(hdr[event.HeaderReason], "data.fiscal_drive") || hdr[event.HeaderSourceTopic] != "zreport-parts" {
		t.Errorf("dead-letter headers %v", hdr)
	}
	// One lake file per key, readable, TIMESTAMP(MICROS).
	files, _ := filepath.Glob(filepath.Join(lakeRoot, "zreports", "close_date=*", "*.parquet"))
	if len(files) != 4 {
		t.Errorf("lake files %v", files)
	}
	for _, f := range files {
		rows, err := parquet.ReadFile[struct {
			FiscalDrive string `parquet:"fiscal_drive"`
			Status      string `parquet:"status"`
		}](f)
		if err != nil || len(rows) != 1 || !strings.HasPrefix(filepath.Base(f), rows[0].FiscalDrive+"-") {
			t.Errorf("%s: %v %v", f, rows, err)
		}
	}
	// Offsets are committed: the group is at the end of every partition.
	adm := kadm.NewClient(cl)
	var lag int64 = -1
	pollUntil(time.Minute, func() (bool, string) {
		ends, _ := adm.ListEndOffsets(ctx, "zreport-parts")
		offs, err := adm.FetchOffsets(ctx, cfg.ZReport.BridgeGroup)
		if err == nil {
			lag = 0
			ends.Each(func(o kadm.ListedOffset) {
				c, _ := offs.Lookup(o.Topic, o.Partition)
				lag += o.Offset - c.At
			})
		}
		return lag == 0, ""
	})
	if lag != 0 {
		t.Errorf("bridge group lag %d", lag)
	}

	// The CLI: show queries the entity, list uses visibility.
	var out, errb bytes.Buffer
	env := []string{}
	sets := []string{"--set", "temporal.address=" + hostport}
	if code := Main(ctx, append(append([]string{"zreport", "show"}, sets...), "9960440300000002", "77"), nil, &out, &errb, env); code != 0 {
		t.Fatalf("show: %d %s", code, errb.String())
	}
	for _, want := range []string{"zreport/9960440300000002/77", "status:          matched (version 1)", "OFD requests:    1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("show output lacks %q:\n%s", want, out.String())
		}
	}
	var listed string
	pollUntil(time.Minute, func() (bool, string) {
		out.Reset()
		if code := Main(ctx, append([]string{"zreport", "list", "--status", "incomplete"}, sets...), nil, &out, &errb, env); code != 0 {
			t.Fatalf("list: %d %s", code, errb.String())
		}
		listed = out.String()
		return strings.Contains(listed, "zreport/9960440300000003/9"), ""
	})
	if !strings.Contains(listed, "zreport/9960440300000003/9") || strings.Contains(listed, "9960440300000001") {
		t.Errorf("list --status incomplete:\n%s", listed)
	}
	if ui != "" {
		// The details in the UI name the differing figures and the
		// missing source, as `reckon zreport show` does.
		for name, k := range map[string]struct {
			id   string
			want []string
		}{
			"ui-zreport-mismatched": {"zreport/9960440300000004/12", []string{"mismatched v1", "receipts_count", "total_amount", "-300"}},
			"ui-zreport-incomplete": {"zreport/9960440300000003/9", []string{"incomplete v1, missing DWH", "DWH: missing"}},
		} {
			d, err := tc.DescribeWorkflowExecution(ctx, k.id, "")
			if err != nil {
				t.Errorf("describe %s: %v", k.id, err)
				continue
			}
			run := d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
			renderUI(t, ctx, *uiCheck, name, ui+"/namespaces/default/workflows/"+url.PathEscape(k.id)+"/"+run+"/user-metadata", k.want...)
		}
	}
}

// TestZReportListSaysWhenTruncated: a list stopped by --limit says how
// many it showed of how many; a complete one prints no footer.
func TestZReportListSaysWhenTruncated(t *testing.T) {
	tc, hostport := testenv.Temporal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Z-report executions that no worker runs: visibility lists them all
	// the same.
	for i := range 5 {
		if _, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("zreport/list-test/%d", i), TaskQueue: "nobody-polls"}, workflows.ZReportWorkflow); err != nil {
			t.Fatal(err)
		}
	}
	list := func(limit string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := Main(ctx, []string{"zreport", "list", "--limit", limit, "--set", "temporal.address=" + hostport}, nil, &out, &errb, nil); code != 0 {
			t.Fatalf("list --limit %s: exit %d: %s", limit, code, errb.String())
		}
		return out.String()
	}
	var all string
	if ok, _ := pollUntil(2*time.Minute, func() (bool, string) {
		all = list("10")
		return strings.Count(all, "zreport/list-test/") == 5, ""
	}); !ok {
		t.Fatalf("visibility never listed the 5 executions:\n%s", all)
	}
	if strings.Contains(all, "showing") {
		t.Errorf("a complete list has a footer:\n%s", all)
	}
	got := list("3")
	if n := strings.Count(got, "zreport/list-test/"); n != 3 || !strings.Contains(got, "(showing 3 of 5; --limit N for more)") {
		t.Errorf("list --limit 3 (%d rows):\n%s", n, got)
	}
	if got := list("5"); strings.Contains(got, "showing") {
		t.Errorf("list --limit 5 of 5 has a footer:\n%s", got)
	}
}

func TestTruncatedFooter(t *testing.T) {
	for _, c := range []struct {
		shown int
		total int64
		want  string
	}{
		{100, 214, "(showing 100 of 214; --limit N for more)"},
		{100, 100, ""},
		{100, -1, "(showing the first 100; there are more: --limit N for more)"},
	} {
		if got := truncatedFooter(c.shown, c.total, "--limit"); got != c.want {
			t.Errorf("truncatedFooter(%d, %d) = %q, want %q", c.shown, c.total, got, c.want)
		}
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestZReportSimulateCLI runs `reckon zreport simulate` black-box.
func TestZReportSimulateCLI(t *testing.T) {
	dir := t.TempDir()
	closed := time.Date(2026, 1, 1, 23, 0, 0, 0, time.UTC)
	line := func(id, src, drive string, rc int, total float64, arrived time.Time) string {
		return fmt.Sprintf(`{"event_id":%q,"event_type":"zreport.part.received","occurred_at":"2026-01-01T23:00:00Z","arrived_at":%q,"data":{"source":%q,"fiscal_drive":%q,"shift":1,"shift_closed_at":"2026-01-01T23:00:00Z","receipts_count":%d,"total_amount":%v}}`,
			id, arrived.Format(time.RFC3339), src, drive, rc, total)
	}
	in := strings.Join([]string{
		line("a1", "DWH", "9960440300000001", 5, 50, closed.Add(time.Hour)),
		line("a2", "RMS", "9960440300000001", 5, 50, closed.Add(2*time.Hour)),
		`{"bad json`,
	}, "\n")
	ofd := `{"event_id":"doc","event_type":"zreport.part.received","occurred_at":"2026-01-01T23:00:00Z","data":{"source":"OFD","fiscal_drive":"9960440300000001","shift":1,"shift_closed_at":"2026-01-01T23:00:00Z","receipts_count":5,"total_amount":50}}`
	if err := os.WriteFile(filepath.Join(dir, "parts.jsonl"), []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ofd.jsonl"), []byte(ofd), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"zreport", "simulate", "--input", filepath.Join(dir, "parts.jsonl"), "--ofd", filepath.Join(dir, "ofd.jsonl"), "--ofd-request-after", "3h"}, nil, &out, &errb, nil)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	want := `{"type":"state","fiscal_drive":"9960440300000001","shift":1,"at":"2026-01-02T00:00:00Z","present":["DWH"],"missing":["OFD","RMS"]}
{"type":"state","fiscal_drive":"9960440300000001","shift":1,"at":"2026-01-02T01:00:00Z","present":["DWH","RMS"],"missing":["OFD"]}
{"type":"ofd_request","fiscal_drive":"9960440300000001","shift":1,"at":"2026-01-02T02:00:00Z","found":true}
{"type":"final","fiscal_drive":"9960440300000001","shift":1,"at":"2026-01-02T02:00:00Z","version":1,"status":"matched","sources":{"OFD":{"receipts_count":5,"total_amount":50},"DWH":{"receipts_count":5,"total_amount":50},"RMS":{"receipts_count":5,"total_amount":50}},"missing":[],"duplicates":{"OFD":0,"DWH":0,"RMS":0}}
{"type":"totals","parts":2,"duplicates":0,"invalid":1,"keys":1,"matched":1,"mismatched":0,"incomplete":0}
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
	if !strings.Contains(errb.String(), "line 3:") {
		t.Errorf("stderr %q", errb.String())
	}
	if code := Main(context.Background(), []string{"zreport", "list", "--status", "done"}, nil, &out, &errb, nil); code != 2 {
		t.Errorf("bad --status: exit %d", code)
	}
}

// TestOFDSimulatorConfig: the dev simulator listens on ofd_url's host:port
// and answers like the generator's operator.
func TestOFDSimulatorConfig(t *testing.T) {
	cfg, err := config.Load("", nil, []string{"zreport.ofd_url=http://127.0.0.1:18280"})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ofdSimulator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if srv.Addr != "127.0.0.1:18280" {
		t.Errorf("addr %s", srv.Addr)
	}
	bad := *cfg
	bad.ZReport.OFDSimMissingFraction, bad.ZReport.OFDRequestAfter = 2, 2*bad.ZReport.Retention
	if _, err := ofdSimulator(&bad); err == nil || !strings.Contains(err.Error(), "missing_fraction") || !strings.Contains(err.Error(), "retention") {
		t.Errorf("validation: %v", err)
	}
}

// BenchmarkZReportThroughput pushes business keys (three parts each, all
// present, so every key finalizes on its third part; every 20th key's RMS
// counts one receipt more, so exactly that 5% must end mismatched) through
// the bridge and the entity workflows on a real dev server, in two cases
// (docs/adr/0021-zreport-coalescing.md):
//
//   - backlog: b.N keys' parts, each key's three together in its
//     partition, already in the topic when the bridge starts (a catch-up):
//     parts accepted per second (parts/s), parts per signal-with-start call
//     (parts/call), keys finalized per second, time until all are final;
//   - spread: b.N more keys whose parts arrive in three rounds, one part of
//     every key per round, each round produced after the bridge committed
//     the one before, so no poll or linger ever holds two parts of a key:
//     parts accepted per second (spread-parts/s, production included) and
//     parts per call (spread-parts/call, 1 by construction).
//
// For reference, the same invocation first measures the dev server's bare
// signal-with-start rate: 3·b.N signals to a workflow that only receives
// them, from as many goroutines as the bridge has lanes. It also reports
// the Go heap of this process (bridge + worker + kfake) after a GC. Run it
// as
//
//	go test ./workers -run '^$' -bench ZReportThroughput -benchtime 10000x -timeout 60m
func BenchmarkZReportThroughput(b *testing.B) {
	if b.N == 1 {
		return // the framework's probe run; -benchtime Nx does the work
	}
	// Every entity stays open until its retention (2h), so the spread case
	// has 2·b.N open entities: the worker's sticky cache is sized to them
	// (docs/adr/0005-zreport-entity-workflows.md), or a part for an evicted
	// entity costs a history fetch and a replay. Process-wide; it takes
	// effect only before the first worker of the process starts.
	worker.SetStickyWorkflowCacheSize(max(10_000, 2*b.N+1_000))
	tc, hostport := testenv.Temporal(b)
	_, brokers := testenv.Kafka(b, 3, "", "zreport-parts", "zreport-complete", "zreport-incomplete", "reckon-dlq")
	cfg, err := config.Load("", nil, []string{
		"kafka.brokers=" + brokers[0], "temporal.address=" + hostport, "temporal.task_queue=zreport-bench",
		"lake.root=" + b.TempDir(), "zreport.ofd_request_after=1h", "zreport.retention=2h",
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	keys := b.N
	baseline := bareSignalRate(b, ctx, tc, 3*keys, cfg.ZReport.BridgeConcurrency)

	cl, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "bench"),
		kgo.ConsumeTopics("zreport-complete"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	closed := time.Now().UTC().Truncate(time.Second)
	// part returns part j of key i; keys of the spread case have their own
	// fiscal drives.
	part := func(i, j int, spread bool) *kgo.Record {
		prefix, n := "99604403", i
		if spread {
			prefix, n = "99604404", i+keys
		}
		drive := fmt.Sprintf("%s%08d", prefix, i/1000)
		shift := 1 + i%1000
		typ := []string{zreport.TypeRMS, zreport.TypeDWH, zreport.TypeOFD}[j]
		receipts := 100 + i%50
		if i%20 == 0 && typ == zreport.TypeRMS {
			receipts++ // every 20th key: RMS counted one receipt more
		}
		return &kgo.Record{Topic: "zreport-parts", Key: fmt.Appendf(nil, "%s/%d", drive, shift),
			Value: zpartJSON(zid(3*n+j), typ, drive, shift, receipts, 1234.5, closed)}
	}
	var backlog []*kgo.Record
	for i := 0; i < keys; i++ {
		for j := 0; j < 3; j++ {
			backlog = append(backlog, part(i, j, false))
		}
	}
	if err := cl.ProduceSync(ctx, backlog...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	w := worker.New(tc, cfg.Temporal.TaskQueue, worker.Options{})
	calls := &countingClient{Client: tc}
	run, closeFn, err := zreportBatch(cfg, calls, w)
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	defer closeFn()
	adm := kadm.NewClient(cl)
	// committedAt waits until the bridge committed n offsets in all.
	committedAt := func(n int64) {
		for {
			if offs, err := adm.FetchOffsets(ctx, cfg.ZReport.BridgeGroup); err == nil {
				var at int64
				offs.Each(func(o kadm.OffsetResponse) { at += max(o.At, 0) })
				if at >= n {
					return
				}
			}
			if ctx.Err() != nil {
				b.Fatalf("timed out waiting for %d committed offsets", n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	finals := map[string]zreport.Status{}
	// finalized waits until n keys have a final version.
	finalized := func(n int) {
		for len(finals) < n {
			fs := cl.PollRecords(ctx, 10000)
			if ctx.Err() != nil {
				b.Fatalf("timed out with %d of %d finalized", len(finals), n)
			}
			fs.EachRecord(func(r *kgo.Record) {
				var a zreport.Aggregate
				if err := json.Unmarshal(r.Value, &a); err != nil {
					b.Fatal(err)
				}
				finals[string(r.Key)] = a.Status
			})
		}
	}

	b.ResetTimer()
	start := time.Now()
	bctx, stop := context.WithCancel(ctx)
	defer stop()
	go run(bctx)
	committedAt(int64(len(backlog)))
	accepted := time.Since(start)
	backlogCalls := calls.n.Load()
	finalized(keys)
	all := time.Since(start)

	spreadStart := time.Now()
	for j := 0; j < 3; j++ {
		round := make([]*kgo.Record, keys)
		for i := range round {
			round[i] = part(i, j, true)
		}
		if err := cl.ProduceSync(ctx, round...).FirstErr(); err != nil {
			b.Fatal(err)
		}
		committedAt(int64(len(backlog) + (j+1)*keys))
	}
	spread := time.Since(spreadStart)
	spreadCalls := calls.n.Load() - backlogCalls
	finalized(2 * keys)
	b.StopTimer()
	var mismatched int
	for _, st := range finals {
		if st == zreport.StatusMismatched {
			mismatched++
		} else if st != zreport.StatusMatched {
			b.Errorf("status %s", st)
		}
	}
	if want := 2 * ((keys + 19) / 20); mismatched != want {
		b.Errorf("%d mismatched, want %d", mismatched, want)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(baseline, "bare-signals/s")
	b.ReportMetric(float64(len(backlog))/accepted.Seconds(), "parts/s")
	b.ReportMetric(float64(len(backlog))/float64(backlogCalls), "parts/call")
	b.ReportMetric(float64(3*keys)/spread.Seconds(), "spread-parts/s")
	b.ReportMetric(float64(3*keys)/float64(spreadCalls), "spread-parts/call")
	b.ReportMetric(float64(keys)/all.Seconds(), "finalized-keys/s")
	b.ReportMetric(all.Seconds(), "s-to-all-final")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
	b.ReportMetric(0, "ns/op")
}

// countingClient counts signal-with-start calls (each one the server
// answered, accepted or not).
type countingClient struct {
	client.Client
	n atomic.Int64
}

func (c *countingClient) SignalWithStartWorkflow(ctx context.Context, id, sig string, arg any, opts client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	c.n.Add(1)
	return c.Client.SignalWithStartWorkflow(ctx, id, sig, arg, opts, wf, args...)
}

// receiveThree is the reference workflow: it receives three signals.
func receiveThree(ctx workflow.Context) error {
	ch := workflow.GetSignalChannel(ctx, "s")
	for i := 0; i < 3; i++ {
		ch.Receive(ctx, nil)
	}
	return nil
}

// bareSignalRate measures signal-with-start calls per second against a
// workflow that does nothing else.
func bareSignalRate(b *testing.B, ctx context.Context, tc client.Client, signals, lanes int) float64 {
	b.Helper()
	w := worker.New(tc, "bare", worker.Options{})
	w.RegisterWorkflowWithOptions(receiveThree, workflow.RegisterOptions{Name: "receiveThree"})
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	ids := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for l := 0; l < lanes; l++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ids {
				_, err := tc.SignalWithStartWorkflow(ctx, fmt.Sprint("bare-", i/3), "s", nil, client.StartWorkflowOptions{
					TaskQueue: "bare", WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
				}, "receiveThree")
				if err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for i := 0; i < signals; i++ {
		ids <- i
	}
	close(ids)
	wg.Wait()
	return float64(signals) / time.Since(start).Seconds()
}
