//go:build duckdb_arrow

package sqlserve

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/parquet-go/parquet-go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"reckon/activities"
	"reckon/internal/event"
	"reckon/lake"
)

// t0 is the first event hour of the test lake.
var t0 = time.Date(2026, 11, 7, 0, 0, 0, 0, time.UTC)

const testTopic = "m8-suhu-kejadian"

// testLake is a lake with every table the views read, built with reckon's
// own writers, and what it holds.
type testLake struct {
	l    *lake.Lake
	root string
	// truth is the hourly aggregate of the raw table (lake.Aggregate, the
	// engine of `reckon lake query`): what windows must end up showing.
	truth []lake.WindowAgg
	// events is the number of distinct events; rawRows counts redeliveries.
	events, rawRows int
	// The instants around the correction of window (sensor-01, t0+1h):
	// before it that window's latest version is the stream's v1 (wrong by
	// one event), after it the batch's v2.
	beforeCorrection, afterCorrection time.Time
}

// buildLake writes 3 hours of sensor events for 4 keys over two
// partitions (with redeliveries), the panes the stream and batch would
// have published for them (one window wrong then corrected, one never
// published then corrected as missing), truth rows, and two versions of a
// Z-report.
func buildLake(t testing.TB) *testLake {
	t.Helper()
	ctx := context.Background()
	root := t.TempDir()
	l, err := lake.Open(lake.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	tl := &testLake{l: l, root: root}
	rng := rand.New(rand.NewPCG(7, 7))
	var p0Next int64       // next offset of partition 0
	var late []lake.RawRow // partition 1 events redelivered later into partition 0
	for p := int32(0); p < 2; p++ {
		var rows []lake.RawRow
		for i := 0; i < 600; i++ {
			occ := t0.Add(time.Duration(i) * 3 * time.Hour / 600).Add(time.Duration(p) * time.Second)
			key := fmt.Sprintf("sensor-%02d", rng.IntN(4))
			v := float64(rng.IntN(4000))/100 - 5
			r := lake.RawRow{
				EventID: fmt.Sprintf("%08d-0000-4000-8000-%012d", p, i), EventType: "sensor.suhu.terbaca",
				OccurredAt: occ.UnixMicro(), IngestedAt: occ.Add(time.Second).UnixMicro(), Key: key, Value: v,
				Data: fmt.Sprintf(`{"id_perangkat":%q,"suhu_c":%v}`, key, v), KafkaPartition: p, KafkaOffset: int64(len(rows)),
			}
			rows = append(rows, r)
			tl.events++
			if i%50 == 3 { // a redelivery: the same event at a later offset
				d := r
				d.KafkaOffset, d.IngestedAt = int64(len(rows)), r.IngestedAt+5_000_000
				rows = append(rows, d)
			}
			if p == 1 && i%60 == 7 { // redelivered later through partition 0, whose files sort first
				d := r
				d.KafkaPartition, d.IngestedAt = 0, r.IngestedAt+9_000_000
				late = append(late, d)
			}
		}
		tl.rawRows += len(rows)
		if _, err := l.WriteRaw(ctx, testTopic, p, 0, int64(len(rows)-1), rows); err != nil {
			t.Fatal(err)
		}
		if p == 0 {
			p0Next = int64(len(rows))
		}
	}
	for i := range late {
		late[i].KafkaOffset = p0Next + int64(i)
	}
	if _, err := l.WriteRaw(ctx, testTopic, 0, p0Next, p0Next+int64(len(late))-1, late); err != nil {
		t.Fatal(err)
	}
	tl.rawRows += len(late)
	aggs, _, err := l.Aggregate(ctx, lake.Query{Topic: testTopic, From: t0, To: t0.Add(3 * time.Hour)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tl.truth = aggs

	// Panes: every window v1 from the stream at its end + 1 minute, except
	// (sensor-03, t0+2h), never published. (sensor-01, t0+1h) was
	// published one event short and corrected at t0+5h; the batch checked
	// every window at t0+5h (truth rows).
	pane := func(a lake.WindowAgg, v int64, by string, at time.Time) event.Pane {
		p := event.Pane{Stream: "suhu", Key: a.Key, WindowStart: a.WindowStart, WindowEnd: a.WindowEnd,
			Count: a.Count, Sum: a.Sum, Min: a.Min, Max: a.Max, Version: v, EmittedAt: at}
		if by == event.ComputedByStream {
			p.Timing, p.ComputedBy, p.Watermark = event.TimingOnTime, event.ComputedByStream, a.WindowEnd
		} else {
			p.Timing, p.ComputedBy = event.TimingCorrection, event.ComputedByBatch
		}
		return p
	}
	corrected := t0.Add(5 * time.Hour)
	tl.beforeCorrection, tl.afterCorrection = corrected.Add(-time.Minute), corrected.Add(time.Minute)
	var stream, batch, truth []event.Pane
	for _, a := range aggs {
		tp := pane(a, 1, event.ComputedByBatch, corrected)
		tp.Timing, tp.Reason = "truth", "matched"
		switch {
		case a.Key == "sensor-03" && a.WindowStart.Equal(t0.Add(2*time.Hour)):
			c := pane(a, 1, event.ComputedByBatch, corrected)
			c.Reason = "missing"
			batch = append(batch, c)
			tp.Reason = "corrected: missing"
		case a.Key == "sensor-01" && a.WindowStart.Equal(t0.Add(time.Hour)):
			wrong := pane(a, 1, event.ComputedByStream, a.WindowEnd.Add(time.Minute))
			wrong.Count--
			wrong.Sum -= 1
			stream = append(stream, wrong)
			c := pane(a, 2, event.ComputedByBatch, corrected)
			c.Reason = "late events"
			batch = append(batch, c)
			tp.Version, tp.Reason = 2, "corrected: late events"
		default:
			stream = append(stream, pane(a, 1, event.ComputedByStream, a.WindowEnd.Add(time.Minute)))
		}
		truth = append(truth, tp)
	}
	var written []string
	for name, ps := range map[string][]event.Pane{"stream-panes": stream, "recompute-corrections": batch} {
		fs, err := l.WritePanes(ctx, "suhu", name, ps)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			written = append(written, f.Path)
		}
	}
	fs, err := l.WriteTruth(ctx, "suhu", "recompute-2026-11-07", truth)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		written = append(written, f.Path)
	}
	// The curated windows and corrections tables, as the batch side curates
	// them (one call: it orders each window's versions itself).
	if _, err := l.Curate(ctx, written); err != nil {
		t.Fatal(err)
	}

	// Z-reports: shift 1 of one fiscal drive, v1 incomplete at t0+2h, v2
	// complete at t0+4h.
	for _, z := range []activities.ZReportRow{
		{FiscalDrive: "9999078900001234", Shift: 1, Version: 1, Status: "incomplete", ShiftClosedAt: t0.UnixMicro(),
			FinalizedAt: t0.Add(2 * time.Hour).UnixMicro(), Reason: "retention", Missing: "rms", DifferencesJSON: "[]", SchemaVersion: 1},
		{FiscalDrive: "9999078900001234", Shift: 1, Version: 2, Status: "complete", ShiftClosedAt: t0.UnixMicro(),
			FinalizedAt: t0.Add(4 * time.Hour).UnixMicro(), Reason: "late part", DifferencesJSON: "[]", SchemaVersion: 1},
	} {
		n := int64(12)
		z.OFDReceipts, z.DWHReceipts = &n, &n
		dir := filepath.Join(root, "zreports", "close_date="+t0.Format(time.DateOnly))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := parquet.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d-v%d.parquet", z.FiscalDrive, z.Shift, z.Version)), []activities.ZReportRow{z}); err != nil {
			t.Fatal(err)
		}
	}
	return tl
}

// openEngine opens an engine over root, closed at cleanup.
func openEngine(t testing.TB, root string, mod ...func(*Options)) *Engine {
	t.Helper()
	o := Options{Root: root, Threads: 2, MemoryLimit: "1GB"}
	for _, m := range mod {
		m(&o)
	}
	e, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// startServer serves eng on a loopback port until the test ends and
// returns the address.
func startServer(t testing.TB, eng *Engine, opts ServeOptions) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan net.Addr, 1)
	opts.Listen = "127.0.0.1:0"
	opts.Ready = func(a net.Addr) { addrs <- a }
	if opts.Log == nil {
		opts.Log = discardLog()
	}
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, eng, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	select {
	case a := <-addrs:
		return a.String()
	case err := <-done:
		t.Fatalf("server ended: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("server did not start")
	}
	return ""
}

// newClient is arrow-go's Flight SQL client on addr, closed at cleanup.
func newClient(t testing.TB, addr string, opts ...grpc.DialOption) *flightsql.Client {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	c, err := flightsql.NewClient(addr, nil, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// table is a query's whole answer, with each value as arrow's ValueStr.
type table struct {
	schema *arrow.Schema
	rows   [][]string
}

// readAll runs query through the client and receives every batch.
func readAll(ctx context.Context, c *flightsql.Client, query string, opts ...grpc.CallOption) (*table, error) {
	info, err := c.Execute(ctx, query, opts...)
	if err != nil {
		return nil, err
	}
	return readInfo(ctx, c, info, opts...)
}

func readInfo(ctx context.Context, c *flightsql.Client, info *flight.FlightInfo, opts ...grpc.CallOption) (*table, error) {
	out := &table{}
	for _, ep := range info.GetEndpoint() {
		rdr, err := c.DoGet(ctx, ep.GetTicket(), opts...)
		if err != nil {
			return nil, err
		}
		out.schema = rdr.Schema()
		for rdr.Next() {
			rec := rdr.RecordBatch()
			out.rows = append(out.rows, cellStrings(rec)...)
		}
		err = rdr.Err()
		rdr.Release()
		if err != nil && err != io.EOF {
			return nil, err
		}
	}
	return out, nil
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
