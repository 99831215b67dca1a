package streaming

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/kafkaconn"
	"reckon/internal/testing/badinput"
	"reckon/verify/generate"
	"reckon/verify/ledger"
)

// burstKeys is the size of the key-cardinality burst: that many distinct
// payment users, one event each, in one 5-minute window.
const burstKeys = 50_000

// hostileKeys are the Kafka record keys the bad-input cases travel with:
// paths, control characters, invalid UTF-8, an empty and a long key. The
// DLQ must hand each back unchanged, and the worker must build no file
// path from any of them.
var hostileKeys = [][]byte{
	[]byte("../../etc/passwd"),
	[]byte("/var/lib/reckon/lake"),
	[]byte(`..\..\windows\system32`),
	[]byte("a\x00b"),
	[]byte("line\nbreak\r"),
	{0xff, 0xfe, 0x00, '/'},
	nil,
	bytes.Repeat([]byte("k/"), 4096),
}

// produced is one record the test produced and what it expects of it.
type produced struct {
	rec  *kgo.Record
	bad  *badinput.Case // nil for valid events
	want event.Result   // the gate's verdict at the record's arrival
}

// TestBadInputThroughStream pushes the whole bad-input corpus
// (testdata/badinput, the generated 10 MiB and million-bracket cases
// included) through a real stream worker on kfake, between valid control
// events and a burst of 50,000 distinct keys, and checks that every bad
// record reaches the DLQ exactly once with the gate's fields and reasons
// and its original key and bytes, the valid events reach panes, the worker
// keeps running and takes new work afterwards, both streams' ledgers
// balance, and no file appears in the worker's working directory or lake
// root (no path is built from a key). A record over the raw topics' 16 MiB
// is refused at the producer and never reaches the worker.
func TestBadInputThroughStream(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	start := time.Now()
	m, err := badinput.Load(badinput.Dir())
	if err != nil {
		t.Fatal(err)
	}
	// The worker runs in an empty working directory with the lake under
	// it: afterwards both must be as they were.
	work := t.TempDir()
	t.Chdir(work)
	cfg, _ := newTestEnv(t, 1) // broker, topics and config; the traffic is built here
	cfg.Lake.Root = filepath.Join(work, "lake")
	gate, err := event.NewGate(cfg.Gate)
	if err != nil {
		t.Fatal(err)
	}
	suhu, _ := cfg.StreamByName("suhu")
	pay, _ := cfg.StreamByName("payments")
	const parts = 3 // deploy/topics.yaml: both raw topics

	var recs []produced
	add := func(r *kgo.Record, c *badinput.Case) {
		_, res := gate.Check(r.Value, r.Timestamp)
		recs = append(recs, produced{rec: r, bad: c, want: res})
	}
	// Every case on the sensor topic, round robin over its partitions, at
	// the corpus's arrival time (the expected fields assume it).
	control := -1
	for i := range m.Cases {
		c := &m.Cases[i]
		raw, err := m.Record(*c)
		if err != nil {
			t.Fatal(err)
		}
		r := &kgo.Record{Topic: suhu.Topic, Partition: int32(i % parts), Key: hostileKeys[i%len(hostileKeys)], Value: raw, Timestamp: m.Arrival}
		if len(c.Fields) == 0 {
			control = len(recs)
			add(r, nil)
			continue
		}
		add(r, c)
	}
	if control < 0 || !recs[control].want.Valid {
		t.Fatal("corpus has no control the gate accepts")
	}
	ctlEnv, _ := gate.Check(recs[control].rec.Value, recs[control].rec.Timestamp)
	ctlKey, _ := ctlEnv.String("data." + suhu.KeyField)
	ctlValue, _ := ctlEnv.Number("data." + suhu.ValueField)
	ctlStart := ctlEnv.OccurredAt.Truncate(suhu.Window)

	// The burst: one payment per distinct user, all in one window.
	burstStart := time.Date(2026, 11, 7, 8, 30, 0, 0, time.UTC)
	for i := range burstKeys {
		user := fmt.Sprintf("u-%05d", i)
		et := burstStart.Add(time.Duration(i) * (4 * time.Minute) / burstKeys)
		add(&kgo.Record{Topic: pay.Topic, Partition: int32(i % parts), Key: []byte(user),
			Value: paymentJSON(uint64(i), user, float64(i%1000)+0.25, et), Timestamp: et.Add(time.Second)}, nil)
	}
	// Closers: one valid event per partition, past each stream's window
	// end + out_of_orderness, so the control's and the burst's windows fire.
	for p := range int32(parts) {
		et := ctlStart.Add(suhu.Window + suhu.OutOfOrderness + time.Second)
		add(&kgo.Record{Topic: suhu.Topic, Partition: p, Key: []byte("sensor-99"),
			Value: sensorJSON(uint64(1<<40+int(p)), "sensor-99", 20, et), Timestamp: et.Add(time.Second)}, nil)
		et = burstStart.Add(pay.Window + pay.OutOfOrderness + time.Second)
		add(&kgo.Record{Topic: pay.Topic, Partition: p, Key: []byte("closer"),
			Value: paymentJSON(uint64(1<<41+int(p)), "closer", 1, et), Timestamp: et.Add(time.Second)}, nil)
	}
	for _, r := range recs {
		if r.bad == nil && !r.want.Valid {
			t.Fatalf("valid event rejected by the gate: %q", r.want.Reasons)
		}
	}
	produceManual(t, cfg, recs)
	t.Logf("produced %d records in %v", len(recs), time.Since(start).Round(time.Millisecond))

	// A record over the raw topics' 16 MiB never reaches the worker: the
	// producer is told MESSAGE_TOO_LARGE and nothing is written.
	cl, err := kgo.NewClient(kafkaconn.Opts(cfg.Kafka, "test")...)
	if err != nil {
		t.Fatal(err)
	}
	huge := &kgo.Record{Topic: suhu.Topic, Value: make([]byte, kafkaconn.MaxRecordBytes+1), Timestamp: m.Arrival}
	if err := cl.ProduceSync(context.Background(), huge).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
		t.Errorf("producing %d bytes: %v, want MESSAGE_TOO_LARGE", len(huge.Value), err)
	}
	cl.Close()

	// Run the worker until it has committed every offset.
	w, err := New(cfg, slog.New(slog.NewTextHandler(logTo{t}, &slog.HandlerOptions{Level: slog.LevelWarn})), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, stopped := make(chan error, 1), make(chan struct{})
	go func() { done <- w.Run(ctx); close(stopped) }()
	t.Cleanup(func() { cancel(); <-stopped }) // it logs to t: stop it before t ends
	waitDone(t, cfg, 90*time.Second)
	t.Logf("worker caught up after %v", time.Since(start).Round(time.Millisecond))

	// Still running, and it takes new work: one more sensor event.
	select {
	case err := <-done:
		t.Fatalf("worker stopped on its own: %v", err)
	default:
	}
	after := ctlStart.Add(suhu.Window + suhu.OutOfOrderness + 2*time.Second)
	extra := produced{rec: &kgo.Record{Topic: suhu.Topic, Partition: 0, Key: []byte("sensor-98"),
		Value: sensorJSON(1<<42, "sensor-98", 21, after), Timestamp: after.Add(time.Second)}}
	produceManual(t, cfg, []produced{extra})
	recs = append(recs, extra)
	waitDone(t, cfg, 2*time.Minute)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("worker: %v", err)
	}

	// The DLQ: every bad case exactly once, with the gate's verdict, its
	// source, its key and its bytes; nothing else.
	bySource := map[string]*produced{}
	for i := range recs {
		r := recs[i].rec
		bySource[fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset)] = &recs[i]
	}
	seen := map[string]int{}
	read(t, cfg, cfg.Topics.DLQ, func(d *kgo.Record) {
		h := headerMap(d)
		_, src := sourceOf(d)
		seen[src]++
		p := bySource[src]
		if p == nil || p.bad == nil {
			t.Errorf("DLQ record from %s is not a bad case: %s", src, h[event.HeaderReason])
			return
		}
		c := p.bad
		if got, want := h[event.HeaderFields], strings.Join(c.Fields, ","); got != want {
			t.Errorf("%s: reckon.fields %q, want %q", c.File, got, want)
		}
		if got, want := h[event.HeaderReason], p.want.Reason(); got != want || !strings.HasPrefix(got, c.Fields[0]+": ") {
			t.Errorf("%s: reckon.reason %q, want %q starting with %q", c.File, got, want, c.Fields[0]+": ")
		}
		if got, want := h[event.HeaderReasons], strings.Join(p.want.Reasons, "; "); got != want {
			t.Errorf("%s: reckon.reasons %q, want %q", c.File, got, want)
		}
		for i, r := range p.want.Reasons {
			if i >= len(c.Fields) || !strings.HasPrefix(r, c.Fields[i]+": ") {
				t.Errorf("%s: reason %d %q does not name field %v", c.File, i, r, c.Fields)
			}
		}
		if h[event.HeaderStage] != "gate" || h[event.HeaderAttempts] != "1" {
			t.Errorf("%s: stage %q attempts %q, want gate 1", c.File, h[event.HeaderStage], h[event.HeaderAttempts])
		}
		if ts, err := time.Parse(time.RFC3339Nano, h[event.HeaderSourceTimestamp]); err != nil || !ts.Equal(p.rec.Timestamp) {
			t.Errorf("%s: source timestamp %q, want %v", c.File, h[event.HeaderSourceTimestamp], p.rec.Timestamp)
		}
		if !bytes.Equal(d.Key, p.rec.Key) {
			t.Errorf("%s: DLQ key %q, produced %q", c.File, d.Key, p.rec.Key)
		}
		if !bytes.Equal(d.Value, p.rec.Value) {
			t.Errorf("%s: DLQ value (%d bytes) is not the original record (%d bytes)", c.File, len(d.Value), len(p.rec.Value))
		}
	})
	nbad := 0
	for src, p := range bySource {
		if p.bad == nil {
			continue
		}
		nbad++
		if seen[src] != 1 {
			t.Errorf("%s (%s): %d times in the DLQ, want once", p.bad.File, src, seen[src])
		}
	}
	if nbad != len(m.Cases)-1 {
		t.Fatalf("%d bad cases produced, corpus has %d", nbad, len(m.Cases)-1)
	}

	// Both streams' ledgers balance, and every closed window's final pane
	// is the truth of the valid events produced: the control's window and
	// every one of the burst's 50,000.
	ctx = context.Background()
	for _, s := range []config.Stream{suhu, pay} {
		man := manifestOf(s, recs, gate)
		out, err := CollectOutputs(ctx, cfg, s)
		if err != nil {
			t.Fatal(err)
		}
		l := ledger.Compute(man, s.Name, ledger.Outputs(out))
		var report strings.Builder
		l.Print(&report)
		t.Log("\n" + report.String())
		if !l.Conserved() || !l.Truthful() {
			t.Errorf("stream %s: ledger does not balance", s.Name)
		}
		if s.Name == pay.Name && l.Windows != burstKeys {
			t.Errorf("payments: %d closed windows checked, want one per burst key (%d)", l.Windows, burstKeys)
		}
		if s.Name == suhu.Name {
			p, ok := out.Panes[event.WindowKey(s.Name, ctlKey, ctlStart)]
			if !ok || p.Count != 1 || p.Sum != ctlValue {
				t.Errorf("control %s: pane %+v (found %v), want count 1 sum %v", ctlKey, p, ok, ctlValue)
			}
		}
	}

	// No file or directory appeared: not in the working directory, not
	// under the lake root.
	var created []string
	_ = filepath.WalkDir(work, func(path string, _ os.DirEntry, err error) error {
		if path != work {
			created = append(created, path)
		}
		return err
	})
	if len(created) > 0 {
		t.Errorf("the stream worker created files: %q", created)
	}
	t.Logf("%d bad cases dead-lettered, %d burst keys windowed, in %v", nbad, burstKeys, time.Since(start).Round(time.Millisecond))
}

// TestDeadLetterAtSizeLimit: a raw record the raw topic takes (16 MiB)
// must reach the DLQ too, though the dead letter adds its headers to the
// original bytes: the dead letter keeps a prefix of the value and says so
// (event.DeadLetter.Record); whole, the broker would refuse it with
// MESSAGE_TOO_LARGE and the transaction would abort on every retry.
func TestDeadLetterAtSizeLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	cfg, _ := newTestEnv(t, 1)
	m, err := badinput.Load(badinput.Dir())
	if err != nil {
		t.Fatal(err)
	}
	raw := bytes.Repeat([]byte("x"), kafkaconn.MaxRecordBytes-200)
	r := &kgo.Record{Topic: cfg.Streams[0].Topic, Key: []byte("k"), Value: raw, Timestamp: m.Arrival}
	produce(t, cfg, []*kgo.Record{r})
	runInProcess(t, cfg)
	var got, truncated []string
	read(t, cfg, cfg.Topics.DLQ, func(d *kgo.Record) {
		got = append(got, headerMap(d)[event.HeaderReason])
		truncated = append(truncated, headerMap(d)[event.HeaderTruncated])
	})
	if len(got) != 1 || !strings.HasPrefix(got[0], "payload: ") {
		t.Fatalf("a %d-byte record: dead letters %q, want one with a payload reason", len(raw), got)
	}
	if !strings.HasPrefix(truncated[0], "value: "+strconv.Itoa(len(raw))+" bytes") {
		t.Errorf("dead letter of a %d-byte record: %s header %q, want the cut said", len(raw), event.HeaderTruncated, truncated[0])
	}
}

// produceManual produces each record to its own partition and fills in its
// offset.
func produceManual(t *testing.T, cfg *config.Config, recs []produced) {
	t.Helper()
	cl, err := kgo.NewClient(append(kafkaconn.Opts(cfg.Kafka, "test"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rs := make([]*kgo.Record, len(recs))
	for i := range recs {
		rs[i] = recs[i].rec
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// manifestOf accounts the records produced to s's topic as the ledger
// wants them: the bad cases listed as poison at their offsets, the truth of
// s's windows computed from the valid events.
func manifestOf(s config.Stream, recs []produced, gate *event.Gate) *generate.Manifest {
	m := &generate.Manifest{Topic: s.Topic}
	truth := map[string]*generate.Window{}
	var order []string
	for _, r := range recs {
		if r.rec.Topic != s.Topic {
			continue
		}
		m.Counts.Records++
		if r.bad != nil {
			p, o := r.rec.Partition, r.rec.Offset
			m.Listed = append(m.Listed, generate.Entry{Category: generate.Poison, Partition: &p, Offset: &o})
			continue
		}
		env, _ := gate.Check(r.rec.Value, r.rec.Timestamp)
		key, _ := env.String("data." + s.KeyField)
		v, _ := env.Number("data." + s.ValueField)
		start := env.OccurredAt.Truncate(s.Window)
		k := event.WindowKey(s.Name, key, start)
		w := truth[k]
		if w == nil {
			w = &generate.Window{Stream: s.Name, Key: key, WindowStart: start.Format(time.RFC3339Nano),
				WindowEnd: start.Add(s.Window).Format(time.RFC3339Nano), Min: v, Max: v}
			truth[k] = w
			order = append(order, k)
		}
		w.Count++
		w.Sum += v
		w.Min, w.Max = min(w.Min, v), max(w.Max, v)
	}
	for _, k := range order {
		m.Truth = append(m.Truth, *truth[k])
	}
	return m
}

// logTo sends the worker's warnings and errors to the test log.
type logTo struct{ t *testing.T }

func (w logTo) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func headerMap(r *kgo.Record) map[string]string {
	h := map[string]string{}
	for _, x := range r.Headers {
		h[x.Key] = string(x.Value)
	}
	return h
}

// eventID is a lowercase canonical UUID made from n.
func eventID(n uint64) string {
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(n>>32)|0x10000000, uint16(n>>16), uint16(n)&0xfff, 0, n)
}

func paymentJSON(n uint64, user string, amount float64, et time.Time) []byte {
	return []byte(`{"event_id":"` + eventID(n) + `","event_type":"payment.checkout.completed","occurred_at":"` +
		et.UTC().Format(time.RFC3339Nano) + `","data":{"user_id":"` + user + `","amount":` +
		strconv.FormatFloat(amount, 'f', -1, 64) + `,"currency":"IDR"}}`)
}

func sensorJSON(n uint64, device string, suhu float64, et time.Time) []byte {
	return []byte(`{"event_id":"` + eventID(n) + `","event_type":"sensor.suhu.terbaca","occurred_at":"` +
		et.UTC().Format(time.RFC3339Nano) + `","data":{"id_perangkat":"` + device + `","lantai":3,"suhu_c":` +
		strconv.FormatFloat(suhu, 'f', -1, 64) + `}}`)
}
