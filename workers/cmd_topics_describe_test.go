package workers

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTopicsDescribeCountsOffsets: three records committed in one
// transaction take four offsets (the commit marker is the fourth);
// `topics describe` shows 4 under OFFSETS and says what the figure is,
// rather than calling it a message count.
func TestTopicsDescribeCountsOffsets(t *testing.T) {
	const topic = "m8-suhu-kejadian"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	tx, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("describe-test"), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	ctx := context.Background()
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Value: []byte("a")}, &kgo.Record{Value: []byte("b")}, &kgo.Record{Value: []byte("c")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := runReckon(t, "topics", "--set", "kafka.brokers="+strings.Join(c.ListenAddrs(), ","), "--wait", "10s", "describe")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(stdout, "\n")
	header := strings.Fields(strings.ReplaceAll(lines[0], "END OFFSETS", "END_OFFSETS"))
	col := -1
	for i, h := range header {
		if h == "OFFSETS" {
			col = i
		}
		if h == "MESSAGES" {
			t.Errorf("header still says MESSAGES: %s", lines[0])
		}
	}
	var row []string
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) > 0 && f[0] == topic {
			row = f
		}
	}
	if col < 0 || len(row) <= col || row[col] != "4" {
		t.Fatalf("want OFFSETS 4 for %s (3 records + the commit marker):\n%s", topic, stdout)
	}
	if !strings.Contains(stdout, "transaction markers") || !strings.Contains(stdout, "not a message count") {
		t.Errorf("no note on what OFFSETS counts:\n%s", stdout)
	}
}
