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
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
	"reckon/internal/topics"
	"reckon/workflows"
	"reckon/zreport"
)

// fakeTemporal is a Temporal client that only accepts signal-with-start
// of ZReportSignalParts, recording the parts per workflow id (their event
// ids, and the parts whole) and the parts per call. A call fails when one
// of its parts' event ids is chosen to: Unavailable a few times, or
// InvalidArgument always; down makes every call fail Unavailable.
type fakeTemporal struct {
	client.Client // nil: any other call panics

	mu          sync.Mutex // protects the fields below
	parts       map[string][]string
	whole       map[string][]zreport.Part // the parts accepted, per workflow id, in order
	calls       []int                     // parts per accepted call
	failed      int                       // calls refused
	down        bool
	unavailable map[string]int
	invalid     map[string]bool
	inputs      []workflows.ZReportInput
	opts        []client.StartWorkflowOptions
}

func (f *fakeTemporal) SignalWithStartWorkflow(_ context.Context, id, sig string, arg any, opts client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ps, ok := arg.([]zreport.Part)
	if !ok || len(ps) == 0 || sig != workflows.ZReportSignalParts || wf != workflows.ZReportWorkflow || opts.ID != id {
		return nil, serviceerror.NewInvalidArgument("wrong call")
	}
	if f.down {
		f.failed++
		return nil, serviceerror.NewUnavailable("simulated outage")
	}
	for _, p := range ps {
		if id != p.Key.WorkflowID() {
			return nil, serviceerror.NewInvalidArgument("wrong key")
		}
		if f.invalid[p.EventID] {
			f.failed++
			return nil, serviceerror.NewInvalidArgument("simulated rejection")
		}
	}
	for _, p := range ps {
		if f.unavailable[p.EventID] > 0 {
			f.unavailable[p.EventID]--
			f.failed++
			return nil, serviceerror.NewUnavailable("simulated outage")
		}
	}
	if f.parts == nil {
		f.parts = map[string][]string{}
	}
	if f.whole == nil {
		f.whole = map[string][]zreport.Part{}
	}
	for _, p := range ps {
		f.parts[id] = append(f.parts[id], p.EventID)
	}
	f.whole[id] = append(f.whole[id], ps...)
	f.calls = append(f.calls, len(ps))
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

// seededCluster makes a one-broker cluster seeded with the topics "parts"
// and "dlq" of the given partitions, closed when the test ends, and
// returns the clients' options and a producer on it.
func seededCluster(t *testing.T, partitions int32) (base []kgo.Opt, pc *kgo.Client) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "parts", "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	base = []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	pc, err = kgo.NewClient(base...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pc.Close)
	return base, pc
}

// deployTopics makes a one-broker cluster, closed when the test ends,
// holding the parts and DLQ topics (by those names) as deploy/topics.yaml
// has them, with their max.message.bytes. It returns the topics, clients'
// options as the workers make them, a producer that sets each record's
// partition itself, and an admin client on that producer.
func deployTopics(ctx context.Context, t *testing.T, parts, dlq string) (partsTopic, dlqTopic topics.Topic, base []kgo.Opt, pc *kgo.Client, adm *kadm.Client) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	m, err := topics.Load("")
	if err != nil {
		t.Fatal(err)
	}
	partsTopic, _ = m.Find(parts)
	dlqTopic, _ = m.Find(dlq)
	base, err = kafkaconn.Options(config.Kafka{Brokers: c.ListenAddrs(), ClientID: "test"}, "zreport-bridge")
	if err != nil {
		t.Fatal(err)
	}
	pc, err = kgo.NewClient(append(base, kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pc.Close)
	adm = kadm.NewClient(pc)
	if _, err := topics.Apply(ctx, adm, &topics.Map{Topics: []topics.Topic{partsTopic, dlqTopic}}); err != nil {
		t.Fatal(err)
	}
	return partsTopic, dlqTopic, base, pc, adm
}

// start runs b until the returned stop is called; stop waits for the run
// to end and fails the test if it ended in an error. Call stop from the
// test's goroutine.
func start(ctx context.Context, t *testing.T, b *Bridge) (stop func()) {
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.Run(rctx) }()
	return func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("run: %v", err)
		}
	}
}

// waitFor polls ok until it holds; if ctx ends first, the test fails
// saying what it waited for and, b given, the bridge's stats.
func waitFor(ctx context.Context, t *testing.T, b *Bridge, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		if ctx.Err() != nil {
			if b != nil {
				t.Fatalf("timed out waiting for %s; stats %+v", what, b.Stats())
			}
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// allCommitted reports whether group's committed offsets, summed over
// partitions, reach n; a failed fetch counts as not yet.
func allCommitted(ctx context.Context, adm *kadm.Client, group string, n int) func() bool {
	return func() bool {
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false
		}
		var at int64
		offs.Each(func(o kadm.OffsetResponse) { at += max(o.At, 0) })
		return at == int64(n)
	}
}

func TestBridge(t *testing.T) {
	base, pc := seededCluster(t, 2)
	tc := &fakeTemporal{unavailable: map[string]int{uuidN(7): 2}, invalid: map[string]bool{uuidN(13): true}}
	b, err := New(base, tc, Options{
		Topic: "parts", Group: "g", DLQTopic: "dlq", TaskQueue: "q", Gate: gateOptions(), Concurrency: 3,
		Start: workflows.ZReportInput{Policy: zreport.Policy{OFDRequestAfter: time.Minute}, HistoryLimit: 777},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
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
	stop := start(ctx, t, b)
	waitFor(ctx, t, b, "every record's offset committed", allCommitted(ctx, kadm.NewClient(pc), "g", len(recs)))
	stop()
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
	// Each key's six parts sit together in its partition: they go in few
	// calls (the key with the rejected part is sent again part by part).
	if len(tc.calls) != int(st.Calls) || st.Calls >= st.Signalled || slices.Max(tc.calls) < 2 {
		t.Errorf("parts per call %v, stats %+v: want the parts of a key coalesced", tc.calls, st)
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	partsTopic, dlqTopic, base, pc, adm := deployTopics(ctx, t, "zreport-parts", "reckon-dlq")
	if dlqTopic.MaxMessageBytes != kafkaconn.MaxRecordBytes || partsTopic.MaxMessageBytes != kafkaconn.MaxRecordBytes {
		t.Fatalf("topic map: parts max_message_bytes %d, DLQ %d; this test assumes both are kafkaconn.MaxRecordBytes %d",
			partsTopic.MaxMessageBytes, dlqTopic.MaxMessageBytes, kafkaconn.MaxRecordBytes)
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

	tc := &fakeTemporal{}
	b, err := New(base, tc, Options{Topic: partsTopic.Name, Group: "g", DLQTopic: dlqTopic.Name, TaskQueue: "q", Gate: gateOptions()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	stop := start(ctx, t, b)
	waitFor(ctx, t, b, "the offsets past the oversized part's dead letter committed (the bridge stalled on it)", allCommitted(ctx, adm, "g", len(recs)))
	stop()
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

// committed returns the group's committed offsets summed over partitions
// (0 when nothing was committed).
func committed(ctx context.Context, t *testing.T, adm *kadm.Client, group string) int64 {
	t.Helper()
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	var n int64
	offs.Each(func(o kadm.OffsetResponse) { n += max(o.At, 0) })
	return n
}

// TestCommitOnlyAfterBatchAccepted: a poll's offsets are committed only
// after Temporal accepted every signal of it, batches included. While one
// key's batch is refused, nothing of the poll is committed (not even the
// key Temporal accepted); the bridge is then stopped, and the next bridge
// of the group gets every part again and delivers the refused key's parts
// in one call, in order, before committing.
func TestCommitOnlyAfterBatchAccepted(t *testing.T) {
	base, pc := seededCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(pc)

	types := []string{zreport.TypeOFD, zreport.TypeDWH, zreport.TypeRMS}
	var recs []*kgo.Record
	for i := 0; i < 6; i++ { // A, B, A, B, A, B
		drive := fmt.Sprintf("99604403000000%02d", i%2)
		v := fmt.Sprintf(`{"event_id":%q,"event_type":%q,"occurred_at":"2026-01-01T23:00:00Z","data":{"fiscal_drive":%q,"shift":3,"receipts":%d,"total":1.5,"shift_closed_at":"2026-01-01T23:00:00Z"}}`,
			uuidN(i), types[i/2], drive, i)
		recs = append(recs, &kgo.Record{Topic: "parts", Key: []byte(drive + "/3"), Value: []byte(v)})
	}
	if err := pc.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	keyB := zreport.Key{FiscalDrive: "9960440300000001", Shift: 3}.WorkflowID()
	run := func(tc *fakeTemporal) (stop func()) {
		b, err := New(base, tc, Options{Topic: "parts", Group: "g", DLQTopic: "dlq", TaskQueue: "q", Gate: gateOptions(), Concurrency: 2})
		if err != nil {
			t.Fatal(err)
		}
		stopRun := start(ctx, t, b)
		return func() {
			stopRun()
			b.Close() // leaves the group before the next bridge joins
		}
	}

	// Temporal refuses B's batch (its second part) until the bridge stops.
	refusing := &fakeTemporal{unavailable: map[string]int{uuidN(3): 1 << 30}}
	stop := run(refusing)
	waitFor(ctx, t, nil, "A accepted and B's batch refused three times", func() bool {
		refusing.mu.Lock()
		defer refusing.mu.Unlock()
		return len(refusing.calls) == 1 && refusing.failed >= 3
	})
	if n := committed(ctx, t, adm, "g"); n != 0 {
		t.Fatalf("offsets committed up to %d while B's batch was not accepted", n)
	}
	stop()
	if n := committed(ctx, t, adm, "g"); n != 0 {
		t.Fatalf("offsets committed up to %d by a bridge stopped before B's batch was accepted", n)
	}
	refusing.mu.Lock()
	if got := refusing.parts[keyB]; len(got) != 0 {
		t.Errorf("B: %v accepted by the refusing server", got)
	}
	refusing.mu.Unlock()

	accepting := &fakeTemporal{}
	stop = run(accepting)
	waitFor(ctx, t, nil, "every record committed", func() bool { return committed(ctx, t, adm, "g") == int64(len(recs)) })
	stop()
	accepting.mu.Lock()
	defer accepting.mu.Unlock()
	if got, want := accepting.parts[keyB], []string{uuidN(1), uuidN(3), uuidN(5)}; !slices.Equal(got, want) {
		t.Errorf("B after the restart: %v, want %v", got, want)
	}
	if got := accepting.parts[zreport.Key{FiscalDrive: "9960440300000000", Shift: 3}.WorkflowID()]; len(got) != 3 {
		t.Errorf("A after the restart: %v, want its three parts again (never committed)", got)
	}
	if !slices.Equal(accepting.calls, []int{3, 3}) {
		t.Errorf("parts per call after the restart %v, want [3 3]", accepting.calls)
	}
}

// TestLingerCoalescesPartsArrivingApart: a key's second part arriving
// after the bridge has taken its first, while it lingers after the short
// poll that found the first, goes in the same call.
func TestLingerCoalescesPartsArrivingApart(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "parts", "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	base := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	pc, err := kgo.NewClient(base...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pc.Close)
	// The barrier: the bridge (the only consumer here) has taken the first
	// part, offset 0, once it fetches from offset 1. kgo fetches again only
	// after a poll took what the last fetch buffered, so the second part,
	// produced then, comes in a later poll: the linger's, not the first.
	taken := make(chan struct{})
	var takenOnce sync.Once
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, tp := range req.(*kmsg.FetchRequest).Topics {
			for _, p := range tp.Partitions {
				if p.FetchOffset >= 1 {
					takenOnce.Do(func() { close(taken) })
				}
			}
		}
		return nil, nil, false
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tc := &fakeTemporal{}
	// The longest linger the bridge allows: the second part must arrive
	// within it, which is the behaviour under test, so it gets all of it.
	b, err := New(base, tc, Options{Topic: "parts", Group: "g", DLQTopic: "dlq", TaskQueue: "q", Gate: gateOptions(), Linger: MaxLinger})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	stop := start(ctx, t, b)
	part := func(i int, typ string) *kgo.Record {
		return &kgo.Record{Topic: "parts", Key: []byte("9960440300000001/3"), Value: fmt.Appendf(nil,
			`{"event_id":%q,"event_type":%q,"occurred_at":"2026-01-01T23:00:00Z","data":{"fiscal_drive":"9960440300000001","shift":3,"receipts":1,"total":1.5,"shift_closed_at":"2026-01-01T23:00:00Z"}}`,
			uuidN(i), typ)}
	}
	if err := pc.ProduceSync(ctx, part(1, zreport.TypeOFD)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-taken:
	case <-ctx.Done():
		t.Fatal("the bridge never fetched past the first part")
	}
	if err := pc.ProduceSync(ctx, part(2, zreport.TypeDWH)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, b, "both parts signalled", func() bool { return b.Stats().Signalled >= 2 })
	stop()
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if !slices.Equal(tc.calls, []int{2}) {
		t.Errorf("parts per call %v, want both parts in one call", tc.calls)
	}
}

// TestStaticMemberRestartsAtOnce: a bridge killed with kill -9 never leaves
// its group. Restarted with the same InstanceID it is the same static
// member and gets its partitions back at once; as a new (dynamic) member it
// waits until the broker gives up on the dead one, the group's session
// timeout: 5 minutes here, well beyond the test's 2-minute bound, so a slow
// machine can neither fail the static member (it once had 30 s against a
// 45 s session) nor pass a dynamic one.
func TestStaticMemberRestartsAtOnce(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "parts", "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	base := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	pc, err := kgo.NewClient(base...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pc.Close)
	adm := kadm.NewClient(pc)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	produce := func(i int) {
		t.Helper()
		drive := fmt.Sprintf("99604403000000%02d", i)
		v := fmt.Sprintf(`{"event_id":%q,"event_type":%q,"occurred_at":"2026-01-01T23:00:00Z","data":{"fiscal_drive":%q,"shift":3,"receipts":1,"total":1.5,"shift_closed_at":"2026-01-01T23:00:00Z"}}`,
			uuidN(i), zreport.TypeOFD, drive)
		if err := pc.ProduceSync(ctx, &kgo.Record{Topic: "parts", Key: []byte(drive + "/3"), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	tc := &fakeTemporal{}
	newBridge := func() *Bridge {
		t.Helper()
		opts := append(base, kgo.SessionTimeout(5*time.Minute), kgo.RebalanceTimeout(5*time.Minute))
		b, err := New(opts, tc, Options{Topic: "parts", Group: "g", InstanceID: "batch-1", DLQTopic: "dlq",
			TaskQueue: "q", Gate: gateOptions()})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	first := newBridge()
	produce(0)
	stop := start(ctx, t, first)
	waitFor(ctx, t, first, "the first bridge to commit the first part", allCommitted(ctx, adm, "g", 1))
	// kill -9: whatever the client would send on its way out, the broker
	// never sees a LeaveGroup (the request is answered, nothing is left).
	c.ControlKey(kmsg.LeaveGroup.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		resp := req.ResponseKind()
		resp.SetVersion(req.GetVersion())
		return resp, nil, true
	})
	stop()
	first.Close()

	produce(1)
	second := newBridge()
	defer second.Close()
	stop = start(ctx, t, second)
	waitFor(ctx, t, second, "the restarted bridge to commit the part produced after the kill", allCommitted(ctx, adm, "g", 2))
	stop()
	groups, err := adm.DescribeGroups(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	var members []string
	for _, m := range groups["g"].Members {
		members = append(members, fmt.Sprint(m.InstanceID))
		if m.InstanceID != nil {
			members[len(members)-1] = *m.InstanceID
		}
	}
	if !slices.Equal(members, []string{"batch-1"}) {
		t.Errorf("group members by instance id %v, want the one static member batch-1", members)
	}
}
