package topics

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"reckon/deploy"
)

// FuzzLoad feeds the topic map loader. Errors say they are the topic map's;
// a map it accepts has a Kafka config for every topic (retention.ms a
// positive integer or -1, max.message.bytes a positive integer when set),
// and marshalled back to YAML it loads as the same map.
//
//	go test ./internal/topics -run '^$' -fuzz '^FuzzLoad$' -fuzztime 60s
func FuzzLoad(f *testing.F) {
	f.Add(deploy.DefaultTopics)
	f.Add([]byte("topics:\n  - {name: a, partitions: 1, replication: 1, retention: \"-1\", cleanup: compact, key: k, purpose: p}\n"))
	f.Add([]byte("topics:\n  - {name: a, partitions: 1, replication: 1, retention: -1, cleanup: delete, key: k, purpose: p, max_message_bytes: 1}\n  - {name: a}\n"))
	f.Add([]byte("topics: [{name: \"a/b\", retention: 1ns}]"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "topics.yaml")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := Load(path)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "topics: ") {
				t.Fatalf("error does not say it is the topic map's: %v", err)
			}
			return
		}
		for _, tp := range m.Topics {
			c := tp.Configs()
			if ms, err := strconv.ParseInt(c["retention.ms"], 10, 64); err != nil || (ms <= 0 && ms != -1) {
				t.Fatalf("%s: retention.ms %q", tp.Name, c["retention.ms"])
			}
			if v, ok := c["max.message.bytes"]; ok {
				if n, err := strconv.Atoi(v); err != nil || n <= 0 {
					t.Fatalf("%s: max.message.bytes %q", tp.Name, v)
				}
			}
		}
		out, err := yaml.Marshal(m)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		if err := os.WriteFile(path, out, 0o600); err != nil {
			t.Fatal(err)
		}
		m2, err := Load(path)
		if err != nil {
			t.Fatalf("marshalled map does not load: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(m.Topics, m2.Topics) && (len(m.Topics) > 0 || len(m2.Topics) > 0) {
			t.Fatalf("marshalled map loads differently:\n%+v\n%+v\n%s", m.Topics, m2.Topics, out)
		}
	})
}
