package workers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/config"
	"reckon/internal/testing/testlog"
	"reckon/verify/generate"
)

func runReckon(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, strings.NewReader(""), &out, &errb, nil)
	return code, out.String(), errb.String()
}

// TestGenerateDeterministic: the same flags and seed give byte-identical
// JSONL and manifest.
func TestGenerateDeterministic(t *testing.T) {
	dir := t.TempDir()
	out, man := filepath.Join(dir, "events.jsonl"), filepath.Join(dir, "manifest.json")
	args := []string{"generate", "--scenario", "payments", "--count", "3000", "--seed", "9", "--no-kafka",
		"--out", out, "--manifest", man, "--start", "2026-11-07T08:00:00Z", "--poison-fraction", "0.05", "--duplicate-fraction", "0.05"}
	read := func() (string, string) {
		code, stdout, stderr := runReckon(t, args...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var s generateSummary
		if err := json.Unmarshal([]byte(stdout), &s); err != nil || s.Records != 3000 || !s.Complete || s.Paced {
			t.Fatalf("summary %q: %+v %v", stdout, s, err)
		}
		j, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		m, err := os.ReadFile(man)
		if err != nil {
			t.Fatal(err)
		}
		if got := int64(bytes.Count(j, []byte("\n"))); got != s.JSONLLines || got+s.JSONLSkipped != 3000 {
			t.Fatalf("%d lines, summary %+v", got, s)
		}
		return string(j), string(m)
	}
	j1, m1 := read()
	j2, m2 := read()
	if j1 != j2 || m1 != m2 {
		t.Fatal("two runs with the same seed differ")
	}
	m, err := generate.ReadManifest(strings.NewReader(m1))
	if err != nil {
		t.Fatal(err)
	}
	if m.Counts.Records != 3000 || len(m.Truth) == 0 || m.Options.Start != "2026-11-07T08:00:00.000Z" {
		t.Fatalf("manifest %+v", m.Counts)
	}
}

// TestDevGeneratorsNeverRepeat: two consecutive runs of each generator
// `reckon dev` starts share no event_id, so a restarted stack does not
// take the new traffic for redeliveries of the old.
func TestDevGeneratorsNeverRepeat(t *testing.T) {
	cfg, err := config.Load("", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, g := range devGenerators(cfg) {
		t.Run(g.name, func(t *testing.T) {
			run := func(i int) map[string]bool {
				out := filepath.Join(dir, fmt.Sprintf("%s-%d.jsonl", g.name, i))
				// Later flags win: a finite run to a file instead of Kafka.
				args := append(slices.Clone(g.args), "--count", "600", "--no-kafka", "--out", out)
				if code, _, stderr := runReckon(t, args...); code != 0 {
					t.Fatalf("%v: exit %d: %s", args, code, stderr)
				}
				return eventIDs(t, out)
			}
			first, second := run(1), run(2)
			if len(first) < 300 || len(second) < 300 {
				t.Fatalf("%d and %d event_ids", len(first), len(second))
			}
			for id := range second {
				if first[id] {
					t.Fatalf("event_id %s in both runs", id)
				}
			}
		})
	}
}

// TestDevGeneratorsFewOversized: the generators of `reckon dev` make
// 1 in 100 poison records oversized (~1 MiB each), so a day-long dev stack
// fits on disk (docs/lake.md "rejected").
func TestDevGeneratorsFewOversized(t *testing.T) {
	cfg, err := config.Load("", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, g := range devGenerators(cfg) {
		m := filepath.Join(dir, g.name+".json")
		args := append(slices.Clone(g.args), "--count", "100", "--no-kafka", "--out", filepath.Join(dir, g.name+".jsonl"), "--manifest", m)
		if code, _, stderr := runReckon(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		var man struct {
			Options struct {
				OversizedShare float64 `json:"oversized_share"`
			} `json:"options"`
		}
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &man); err != nil {
			t.Fatal(err)
		}
		if man.Options.OversizedShare != 0.01 {
			t.Errorf("%s: oversized share %v, want 0.01 (%s)", g.name, man.Options.OversizedShare, b[:min(len(b), 300)])
		}
	}
}

// TestGenerateSeedRepeats: an explicit --seed repeats a run exactly, event_ids
// included; --id-nonce random on top of it does not repeat the ids.
func TestGenerateSeedRepeats(t *testing.T) {
	dir := t.TempDir()
	run := func(name string, extra ...string) map[string]bool {
		out := filepath.Join(dir, name)
		args := append([]string{"generate", "--scenario", "sensors", "--count", "500", "--seed", "5", "--no-kafka", "--out", out}, extra...)
		if code, _, stderr := runReckon(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		return eventIDs(t, out)
	}
	a, b, c := run("a"), run("b"), run("c", "--id-nonce", "random")
	if !maps.Equal(a, b) || len(a) < 300 {
		t.Fatalf("same seed: %d and %d event_ids, not the same", len(a), len(b))
	}
	for id := range c {
		if a[id] {
			t.Fatalf("--id-nonce random repeated event_id %s", id)
		}
	}
}

// eventIDs returns the event_ids of a JSONL file that look like UUIDs (the
// bad_uuid poison's short ids are left out: they are drawn from a small
// range).
func eventIDs(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var e struct {
			EventID any `json:"event_id"`
		}
		if json.Unmarshal(line, &e) != nil {
			continue
		}
		if id, ok := e.EventID.(string); ok && len(id) == 36 {
			ids[id] = true
		}
	}
	return ids
}

// TestGenerateKafka produces to an in-process kfake cluster through the
// configured brokers and reads the records back.
func TestGenerateKafka(t *testing.T) {
	const topic = "m8-suhu-kejadian"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	brokers := strings.Join(c.ListenAddrs(), ",")
	man := filepath.Join(t.TempDir(), "manifest.json")
	code, stdout, stderr := runReckon(t, "generate", "--set", "kafka.brokers="+brokers,
		"--scenario", "sensors", "--count", "2000", "--seed", "3", "--start", "2026-11-07T08:00:00Z",
		"--manifest", man, "--poison-fraction", "0.03", "--poison-kinds", "bad_json,nan,bad_uuid,future")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var s generateSummary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil || s.KafkaAcked != 2000 {
		t.Fatalf("summary %q: %v", stdout, err)
	}
	b, err := os.ReadFile(man)
	if err != nil {
		t.Fatal(err)
	}
	m, err := generate.ReadManifest(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	offsets := map[[2]int64]bool{}
	for _, e := range m.Listed {
		if e.Offset == nil {
			t.Fatalf("listed record %d without offset", e.Seq)
		}
		offsets[[2]int64{int64(*e.Partition), *e.Offset}] = true
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var got, listed int
	for got < 2000 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			got++
			if offsets[[2]int64{int64(r.Partition), r.Offset}] {
				listed++
			}
		})
	}
	if got != 2000 || listed != len(m.Listed) {
		t.Fatalf("read %d records (want 2000), %d of %d listed offsets", got, listed, len(m.Listed))
	}
}

func TestGenerateUsage(t *testing.T) {
	for _, args := range [][]string{
		{"generate", "--no-kafka", "--out", "x"},
		{"generate", "--scenario", "boats", "--no-kafka", "--out", "x"},
		{"generate", "--scenario", "sensors", "--no-kafka"},
		{"generate", "--scenario", "sensors", "--manifest", "m.json", "--no-kafka", "--out", "x"},
		{"generate", "--scenario", "sensors", "--late-fraction", "2", "--no-kafka", "--out", "x"},
	} {
		if code, _, stderr := runReckon(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, stderr)
		}
	}
}

func TestGenerateMissingTopic(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	code, _, stderr := runReckon(t, "generate", "--set", "kafka.brokers="+strings.Join(c.ListenAddrs(), ","),
		"--scenario", "fiscal", "--count", "10", "--start", "2026-11-07T08:00:00Z")
	if code != 1 || !strings.Contains(stderr, "topics apply") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

// TestWatchProducerSaysWhenStalled: with the brokers gone and records
// buffered, the generator says so every interval; while acknowledgements
// move, it says nothing.
func TestWatchProducerSaysWhenStalled(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var acked atomic.Int64
	produce := func() {
		cl.Produce(context.Background(), &kgo.Record{Value: []byte("x")}, func(_ *kgo.Record, err error) {
			if err == nil {
				acked.Add(1)
			}
		})
	}
	var out testlog.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go watchProducer(ctx, cl.BufferedProduceRecords, acked.Load, 50*time.Millisecond, &out)
	produce()
	if ok, _ := pollUntil(time.Minute, func() (bool, string) { return acked.Load() == 1, "" }); !ok {
		t.Fatal("the first record was never acknowledged")
	}
	if s := out.String(); s != "" {
		t.Errorf("said something while the brokers answer: %q", s)
	}
	c.Close()
	produce()
	ok, _ := pollUntil(time.Minute, func() (bool, string) {
		return strings.Contains(out.String(), "1 records wait in the producer's buffer"), ""
	})
	if !ok {
		t.Fatalf("no word of the stall: %q", out.String())
	}
}
