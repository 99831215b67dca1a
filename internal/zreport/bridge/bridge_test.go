package bridge

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
	"reckon/internal/topics"
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

// TestDeadLetterOverTopicLimit: a part the parts topic takes but the gate
// refuses (over max_payload_bytes) near the topics' 16 MiB limit cannot go
// to the DLQ whole, reason headers added; a broker (and the client, whose
// batches stop at the same limit) refuses it and the bridge used to retry
// it until its context ended, never committing again. The dead letter is
// cut to fit, says so, and the part after it is signalled and committed.
func TestDeadLetterOverTopicLimit(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The parts and DLQ topics as deploy/topics.yaml has them, with their
	// max.message.bytes, and clients as the workers make them.
	m, err := topics.Load("")
	if err != nil {
		t.Fatal(err)
	}
	partsTopic, _ := m.Find("zreport-parts")
	dlqTopic, _ := m.Find("reckon-dlq")
	if dlqTopic.MaxMessageBytes != kafkaconn.MaxRecordBytes || partsTopic.MaxMessageBytes != kafkaconn.MaxRecordBytes {
		t.Fatalf("topic map: parts max_message_bytes %d, DLQ %d; this test assumes both are kafkaconn.MaxRecordBytes %d",
			partsTopic.MaxMessageBytes, dlqTopic.MaxMessageBytes, kafkaconn.MaxRecordBytes)
	}
	base, err := kafkaconn.Options(config.Kafka{Brokers: c.ListenAddrs(), ClientID: "test"}, "zreport-bridge")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := kgo.NewClient(append(base, kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	adm := kadm.NewClient(pc)
	if _, err := topics.Apply(ctx, adm, &topics.Map{Topics: []topics.Topic{partsTopic, dlqTopic}}); err != nil {
		t.Fatal(err)
	}

	closed := time.Date(2026, 1, 1, 23, 0, 0, 0, time.UTC)
	part := func(n int, pad string) []byte {
		return fmt.Appendf(nil, `{"event_id":%q,"event_type":%q,"occurred_at":"2026-01-01T23:00:00Z","data":{"fiscal_drive":"9960440300000001","shift":3,"receipts":1,"total":1.5,"shift_closed_at":"2026-01-01T23:00:00Z"%s}}`,
			uuidN(n), zreport.TypeOFD, pad)
	}
	// Over the gate's 1 MiB, 200 bytes under the parts topic's limit: room
	// for the record's framing and its header, not for the dead letter's
	// reason headers.
	pad := kafkaconn.MaxRecordBytes - 200 - len(part(1, `,"note":""`))
	huge := part(1, `,"note":"`+strings.Repeat("x", pad)+`"`)
	recs := []*kgo.Record{
		{Topic: partsTopic.Name, Key: []byte("9960440300000001/3"), Value: huge, Timestamp: closed,
			Headers: []kgo.RecordHeader{{Key: "origin", Value: []byte("ofd")}}},
		{Topic: partsTopic.Name, Key: []byte("9960440300000001/3"), Value: part(2, ""), Timestamp: closed.Add(time.Second)},
	}
	if err := pc.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing a %d-byte part: %v", len(huge), err)
	}

	tc := &fakeTemporal{parts: map[string][]string{}}
	b, err := New(base, tc, Options{Topic: partsTopic.Name, Group: "g", DLQTopic: dlqTopic.Name, TaskQueue: "q", Gate: gateOptions()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.Run(rctx) }()
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
			stop()
			t.Fatalf("the bridge stalled on the oversized part's dead letter: offsets never committed; stats %+v", b.Stats())
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.Records != 2 || st.Signalled != 1 || st.DeadLettered != 1 {
		t.Errorf("stats %+v, want 2 records, 1 signalled, 1 dead-lettered", st)
	}
	tc.mu.Lock()
	got := tc.parts["zreport/9960440300000001/3"]
	tc.mu.Unlock()
	if !slices.Equal(got, []string{uuidN(2)}) {
		t.Errorf("signalled %v, want the valid part %s after the oversized one", got, uuidN(2))
	}

	cl, err := kgo.NewClient(append(base, kgo.ConsumeTopics(dlqTopic.Name), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var dead []*kgo.Record
	for len(dead) == 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("no dead letter in the DLQ")
		}
		dead = append(dead, fs.Records()...)
	}
	d := dead[0]
	h := map[string][]string{}
	for _, x := range d.Headers {
		h[x.Key] = append(h[x.Key], string(x.Value))
	}
	one := func(k string) string {
		if len(h[k]) != 1 {
			t.Errorf("header %s: %q, want one", k, h[k])
			return ""
		}
		return h[k][0]
	}
	wantReason := "payload: " + strconv.Itoa(len(huge)) + " bytes exceeds max_payload_bytes 1048576"
	if r := one(event.HeaderReason); r != wantReason {
		t.Errorf("reason %q, want %q", r, wantReason)
	}
	if o := one(event.HeaderSourceOffset); o != strconv.FormatInt(recs[0].Offset, 10) {
		t.Errorf("source offset %s, want %d", o, recs[0].Offset)
	}
	if c := one(event.HeaderTruncated); !strings.HasPrefix(c, "value: "+strconv.Itoa(len(huge))+" bytes, first ") {
		t.Errorf("%s %q, want the value's cut said", event.HeaderTruncated, c)
	}
	if o := one("origin"); o != "ofd" {
		t.Errorf("the part's own header: origin %q, want ofd", o)
	}
	if len(d.Value) >= len(huge) || !bytes.HasPrefix(huge, d.Value) || !bytes.Equal(d.Key, recs[0].Key) {
		t.Errorf("dead letter: key %q, value of %d bytes; want the part's key and a prefix of its %d bytes", d.Key, len(d.Value), len(huge))
	}
}
