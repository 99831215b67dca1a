package workers

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"reckon/internal/generate"
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
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
