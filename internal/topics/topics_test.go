package topics

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"reckon/internal/config"
	"reckon/internal/kafkaconn"
)

func TestDefaultMapHasSeedTopics(t *testing.T) {
	m, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		name       string
		partitions int32
		retention  string
		key        string
	}{
		{"m8-suhu-kejadian", 3, "604800000", "id_perangkat"},
		{"m8-suhu-rangkuman", 1, "2592000000", ""},
	} {
		tp, ok := m.Find(want.name)
		if !ok {
			t.Fatalf("%s missing from the topic map", want.name)
		}
		ms, _ := tp.RetentionMS()
		if tp.Partitions != want.partitions || ms != want.retention || (want.key != "" && tp.Key != want.key) {
			t.Errorf("%s = %+v (retention.ms %s)", want.name, tp, ms)
		}
	}
	// Every topic the default config names is in the map.
	cfg, err := config.Load("", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{cfg.Topics.Summaries, cfg.Topics.Features, cfg.Topics.Late, cfg.Topics.DLQ, cfg.Topics.ZReportParts, cfg.Topics.ZReportComplete, cfg.Topics.ZReportIncomplete}
	for _, s := range cfg.Streams {
		names = append(names, s.Topic)
	}
	for _, n := range names {
		if _, ok := m.Find(n); !ok {
			t.Errorf("config names topic %q that the topic map lacks", n)
		}
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	m := &Map{Topics: []Topic{
		{Name: "bad/name", Partitions: 0, Replication: 1, Retention: "7d", Cleanup: "delete", Key: "k", Purpose: "p"},
		{Name: "ok", Partitions: 1, Replication: 0, Retention: "1h", Cleanup: "nope"},
	}}
	err := m.Validate()
	for _, want := range []string{"name must match", "partitions must be at least 1", "retention \"7d\"", "replication must be at least 1", "cleanup \"nope\"", "key and purpose"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in %v", want, err)
		}
	}
}

func TestApplyIsIdempotentAndReportsDrift(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	adm, closeAdm, err := kafkaconn.NewAdmin(config.Kafka{Brokers: c.ListenAddrs(), ClientID: "test"}, "topics")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeAdm)
	ctx := context.Background()
	m, err := Load("")
	if err != nil {
		t.Fatal(err)
	}

	acts, err := Apply(ctx, adm, m)
	if err != nil {
		t.Fatal(err)
	}
	if created := count(acts, "created"); created != len(m.Topics) {
		t.Fatalf("first apply created %d of %d topics: %v", created, len(m.Topics), acts)
	}
	live, err := Describe(ctx, adm, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range live {
		want, _ := m.Find(l.Name)
		if int32(l.Partitions) != want.Partitions || l.Configs["cleanup.policy"] != want.Cleanup ||
			want.TimestampType != "" && l.Configs["message.timestamp.type"] != want.TimestampType {
			t.Errorf("live %s = %+v, map %+v", l.Name, l, want)
		}
	}

	acts, err = Apply(ctx, adm, m)
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) != 1 || acts[0].Kind != "ok" {
		t.Fatalf("second apply was not a no-op: %v", acts)
	}

	// Raise one, lower another, change retention: apply raises and sets,
	// and reports the lowering as drift.
	m.Topics[0].Partitions = 5
	m.Topics[1].Partitions = 1
	m.Topics[2].Retention = "48h"
	acts, err = Apply(ctx, adm, m)
	if err != nil {
		t.Fatal(err)
	}
	if count(acts, "partitions") != 1 || count(acts, "drift") != 1 || count(acts, "config") != 1 {
		t.Fatalf("changed map: %v", acts)
	}
	// The timestamp type is set like the other configs.
	m.Topics[2].TimestampType = "LogAppendTime"
	if acts, err = Apply(ctx, adm, m); err != nil || count(acts, "config") != 1 {
		t.Fatalf("timestamp type: %v %v", acts, err)
	}
	live, err = Describe(ctx, adm, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range live {
		if l.Name == m.Topics[2].Name && l.Configs["message.timestamp.type"] != "LogAppendTime" {
			t.Errorf("%s: message.timestamp.type %q", l.Name, l.Configs["message.timestamp.type"])
		}
	}
}

func count(acts []Action, kind string) int {
	n := 0
	for _, a := range acts {
		if a.Kind == kind {
			n++
		}
	}
	return n
}
