package bridge

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"reckon/internal/event"
	"reckon/internal/zreport"
	"reckon/workflows"
)

// fakeTemporal is a Temporal client that only accepts signal-with-start,
// recording the parts per workflow id. Chosen event ids fail: Unavailable
// a few times, or InvalidArgument always.
type fakeTemporal struct {
	client.Client // nil: any other call panics

	mu          sync.Mutex // protects the fields below
	parts       map[string][]string
	unavailable map[string]int
	invalid     map[string]bool
	inputs      []workflows.ZReportInput
	opts        []client.StartWorkflowOptions
}

func (f *fakeTemporal) SignalWithStartWorkflow(_ context.Context, id, sig string, arg any, opts client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := arg.(zreport.Part)
	if sig != workflows.ZReportSignalPart || wf != workflows.ZReportWorkflow || id != p.Key.WorkflowID() || opts.ID != id {
		return nil, serviceerror.NewInvalidArgument("wrong call")
	}
	if f.invalid[p.EventID] {
		return nil, serviceerror.NewInvalidArgument("simulated rejection")
	}
	if f.unavailable[p.EventID] > 0 {
		f.unavailable[p.EventID]--
		return nil, serviceerror.NewUnavailable("simulated outage")
	}
	f.parts[id] = append(f.parts[id], p.EventID)
	f.inputs = append(f.inputs, args[0].(workflows.ZReportInput))
	f.opts = append(f.opts, opts)
	return nil, nil
}

func gateOptions() event.GateOptions {
	zero := 0.0
	rules := event.TypeRules{Fields: map[string]event.FieldRule{
		"fiscal_drive":    {Required: true, Type: "string", Pattern: "[0-9]{16}"},
		"shift":           {Required: true, Type: "integer", Min: ptr(1.0)},
		"receipts":        {Required: true, Type: "integer", Min: &zero},
		"total":           {Required: true, Type: "number", Min: &zero},
		"shift_closed_at": {Required: true, Type: "string"},
	}}
	return event.GateOptions{Types: map[string]event.TypeRules{zreport.TypeOFD: rules, zreport.TypeDWH: rules, zreport.TypeRMS: rules}}
}

func ptr[T any](v T) *T { return &v }

func uuidN(n int) string { return fmt.Sprintf("3f2a0000-0000-4000-8000-%012d", n) }

func TestBridge(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "parts", "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	base := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	tc := &fakeTemporal{parts: map[string][]string{}, unavailable: map[string]int{uuidN(7): 2}, invalid: map[string]bool{uuidN(13): true}}
	b, err := New(base, tc, Options{
		Topic: "parts", Group: "g", DLQTopic: "dlq", TaskQueue: "q", Gate: gateOptions(), Concurrency: 3,
		Start: workflows.ZReportInput{Policy: zreport.Policy{OFDRequestAfter: time.Minute}, HistoryLimit: 777},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pc, err := kgo.NewClient(base...)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	closed := time.Date(2026, 1, 1, 23, 0, 0, 0, time.UTC)
	types := []string{zreport.TypeOFD, zreport.TypeDWH, zreport.TypeRMS}
	want := map[string][]string{}
	var recs []*kgo.Record
	for i := 0; i < 30; i++ {
		drive := fmt.Sprintf("99604403000000%02d", i%5)
		v := fmt.Sprintf(`{"event_id":%q,"event_type":%q,"occurred_at":"2026-01-01T23:00:00Z","data":{"fiscal_drive":%q,"shift":3,"receipts":%d,"total":1.5,"shift_closed_at":"2026-01-01T23:00:00Z"}}`,
			uuidN(i), types[i%3], drive, i)
		recs = append(recs, &kgo.Record{Topic: "parts", Key: []byte(drive + "/3"), Value: []byte(v), Timestamp: closed.Add(time.Duration(i) * time.Second)})
		if i != 13 {
			want["zreport/"+drive+"/3"] = append(want["zreport/"+drive+"/3"], uuidN(i))
		}
	}
	recs = append(recs, &kgo.Record{Topic: "parts", Key: []byte("x"), Value: []byte(`{"event_id":"nope"}`), Timestamp: closed})
	if err := pc.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.Run(rctx) }()

	adm := kadm.NewClient(pc)
	for {
		offs, err := adm.FetchOffsets(ctx, "g")
		if err == nil {
			var n int64
			offs.Each(func(o kadm.OffsetResponse) { n += o.At })
			if n == int64(len(recs)) {
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("offsets never committed; stats %+v", b.Stats())
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := b.Stats()
	if st.Records != 31 || st.Signalled != 29 || st.DeadLettered != 2 || st.Retries < 2+2 {
		t.Errorf("stats %+v", st)
	}
	tc.mu.Lock()
	for id, ids := range want {
		if !slices.Equal(tc.parts[id], ids) {
			t.Errorf("%s: signalled %v, want in partition order %v", id, tc.parts[id], ids)
		}
	}
	in, opts := tc.inputs[0], tc.opts[0]
	tc.mu.Unlock()
	if in.HistoryLimit != 777 || in.Policy.OFDRequestAfter != time.Minute || !in.ClosedHint.Equal(closed) || in.State != nil {
		t.Errorf("start input %+v", in)
	}
	if opts.TaskQueue != "q" || opts.WorkflowIDReusePolicy.String() != "AllowDuplicate" || opts.StaticSummary == "" {
		t.Errorf("start options %+v", opts)
	}

	// Two dead letters: the gate's and Temporal's rejection, with reasons.
	cl, err := kgo.NewClient(append(base, kgo.ConsumeTopics("dlq"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	stages := map[string]string{}
	for len(stages) < 2 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("dead letters: %v", stages)
		}
		fs.EachRecord(func(r *kgo.Record) {
			h := map[string]string{}
			for _, x := range r.Headers {
				h[x.Key] = string(x.Value)
			}
			stages[h[event.HeaderStage]] = h[event.HeaderReason]
		})
	}
	if stages["gate"] == "" || stages["process"] != "temporal: simulated rejection" {
		t.Errorf("dead letters by stage: %v", stages)
	}
}
