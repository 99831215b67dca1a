package bridge

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/testing/badinput"
	"reckon/workflows"
	"reckon/zreport"
)

// TestBadInputThroughBridge pushes the whole bad-input corpus
// (testdata/badinput, the generated 10 MiB and million-bracket cases
// included) through the Z-report bridge on the parts topic as
// deploy/topics.yaml has it, with the production gate (the default
// configuration's), each case between valid parts of three business keys:
// every case reaches the DLQ exactly once, with the gate's fields and
// reason for what the gate refuses (the fiscal case names
// data.fiscal_drive) and a "not a Z-report part" reason on data for the
// events the gate passes, with its original key and bytes; the valid parts
// are signalled exactly once each, in partition order, unchanged.
func TestBadInputThroughBridge(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	m, err := badinput.Load(badinput.Dir())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load("", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	gate, err := event.NewGate(cfg.Gate)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	partsTopic, dlqTopic, base, pc, adm := deployTopics(ctx, t, cfg.Topics.ZReportParts, cfg.Topics.DLQ)
	nparts := partsTopic.Partitions

	// Valid parts of three keys, each key on its own partition; a bad case
	// after each, on the partitions in turn.
	type bad struct {
		c    *badinput.Case
		rec  *kgo.Record
		want event.Result
	}
	var recs []*kgo.Record
	bads := map[string]*bad{} // by partition/offset after producing
	var badList []*bad
	want := map[string][]zreport.Part{}
	drives := []string{"9960440300000001", "9960440300000002", "9960440300000003"}
	n := 0
	valid := func() {
		d := drives[n%len(drives)]
		id := fmt.Sprintf("3f2a0000-0000-4000-8000-%012d", n)
		closed := m.Arrival.Add(-time.Hour)
		at := closed.Format(time.RFC3339)
		v := fmt.Sprintf(`{"event_id":%q,"event_type":%q,"occurred_at":%q,"data":{"fiscal_drive":%q,"shift":%d,"receipts":%d,"total":%d.25,"shift_closed_at":%q}}`,
			id, zreport.TypeOFD, at, d, 7, n, 100+n, at)
		p := zreport.Part{EventID: id, Source: zreport.OFD, Key: zreport.Key{FiscalDrive: d, Shift: 7},
			Figures: zreport.Figures{Receipts: int64(n), Total: float64(100+n) + 0.25}, ShiftClosedAt: closed, OccurredAt: closed}
		want[p.Key.WorkflowID()] = append(want[p.Key.WorkflowID()], p)
		recs = append(recs, &kgo.Record{Topic: partsTopic.Name, Partition: int32(n%len(drives)) % nparts, Key: []byte(p.Key.String()), Value: []byte(v), Timestamp: m.Arrival})
		n++
	}
	for i := range m.Cases {
		cs := &m.Cases[i]
		raw, err := m.Record(*cs)
		if err != nil {
			t.Fatal(err)
		}
		valid()
		r := &kgo.Record{Topic: partsTopic.Name, Partition: int32(i) % nparts, Key: []byte("../" + cs.File), Value: raw, Timestamp: m.Arrival}
		_, res := gate.Check(raw, m.Arrival)
		b := &bad{c: cs, rec: r, want: res}
		badList = append(badList, b)
		recs = append(recs, r)
	}
	valid()
	for _, r := range recs {
		if err := pc.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("producing %d bytes: %v", len(r.Value), err)
		}
	}
	for _, b := range badList {
		bads[fmt.Sprintf("%d/%d", b.rec.Partition, b.rec.Offset)] = b
	}

	tc := &fakeTemporal{}
	b, err := New(base, tc, Options{Topic: partsTopic.Name, Group: "g", DLQTopic: dlqTopic.Name, TaskQueue: "q", Gate: cfg.Gate,
		Start: workflows.ZReportInput{}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	stop := start(ctx, t, b)
	waitFor(ctx, t, b, "every record's offset committed", allCommitted(ctx, adm, "g", len(recs)))
	stop()
	if st := b.Stats(); st.Records != int64(len(recs)) || st.Signalled != int64(n) || st.DeadLettered != int64(len(badList)) {
		t.Errorf("stats %+v; want %d records, %d signalled, %d dead-lettered", st, len(recs), n, len(badList))
	}

	// Valid parts: each once, in order, unchanged.
	tc.mu.Lock()
	for id, ps := range want {
		got := tc.whole[id]
		if !slices.EqualFunc(got, ps, func(a, b zreport.Part) bool {
			return a.EventID == b.EventID && a.Source == b.Source && a.Key == b.Key && a.Figures == b.Figures && a.ShiftClosedAt.Equal(b.ShiftClosedAt)
		}) {
			t.Errorf("%s: signalled %d parts, want the %d produced, in order, unchanged", id, len(got), len(ps))
		}
	}
	if len(tc.whole) != len(want) {
		t.Errorf("signalled %d entities, want %d", len(tc.whole), len(want))
	}
	tc.mu.Unlock()

	// The DLQ: every case once, with its verdict, key and bytes.
	cl, err := kgo.NewClient(append(base, kgo.ConsumeTopics(dlqTopic.Name), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(32<<20))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]int{}
	for got := 0; got < len(badList); {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("DLQ: %d of %d dead letters", got, len(badList))
		}
		fs.EachRecord(func(d *kgo.Record) {
			got++
			h := map[string]string{}
			for _, x := range d.Headers {
				h[x.Key] = string(x.Value)
			}
			src := h[event.HeaderSourcePartition] + "/" + h[event.HeaderSourceOffset]
			seen[src]++
			bc := bads[src]
			if bc == nil {
				t.Errorf("DLQ record from %s is not a bad case: %s", src, h[event.HeaderReason])
				return
			}
			if h[event.HeaderStage] != "gate" {
				t.Errorf("%s: stage %q", bc.c.File, h[event.HeaderStage])
			}
			if bc.want.Valid {
				// The gate passes it; it is no Z-report part.
				if h[event.HeaderFields] != "data" || h[event.HeaderReason] == "" {
					t.Errorf("%s: passed the gate, dead-lettered with fields %q reason %q, want data and a reason", bc.c.File, h[event.HeaderFields], h[event.HeaderReason])
				}
			} else {
				if got, want := h[event.HeaderFields], strings.Join(bc.c.Fields, ","); got != want {
					t.Errorf("%s: reckon.fields %q, want %q", bc.c.File, got, want)
				}
				if got, want := h[event.HeaderReason], bc.want.Reason(); got != want {
					t.Errorf("%s: reckon.reason %q, want %q", bc.c.File, got, want)
				}
			}
			if !bytes.Equal(d.Key, bc.rec.Key) {
				t.Errorf("%s: DLQ key %q, produced %q", bc.c.File, d.Key, bc.rec.Key)
			}
			if !bytes.Equal(d.Value, bc.rec.Value) && h[event.HeaderTruncated] == "" {
				t.Errorf("%s: DLQ value (%d bytes) is not the original (%d bytes)", bc.c.File, len(d.Value), len(bc.rec.Value))
			}
		})
	}
	fiscal := false
	for src, bc := range bads {
		if seen[src] != 1 {
			t.Errorf("%s: %d times in the DLQ, want once", bc.c.File, seen[src])
		}
		if strings.HasPrefix(bc.c.File, "zreport-") {
			fiscal = true
			if bc.want.Valid || !slices.Contains(bc.c.Fields, "data.fiscal_drive") {
				t.Errorf("%s: the fiscal case is not refused on data.fiscal_drive by the production gate: %+v", bc.c.File, bc.want)
			}
		}
	}
	if !fiscal {
		t.Error("the corpus has no fiscal (zreport-*) case")
	}
}
