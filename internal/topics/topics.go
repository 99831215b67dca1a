// Package topics is the topic map as code (docs/requirements.md R-TOPIC):
// it loads
// deploy/topics.yaml, applies it to a cluster idempotently and reports drift.
package topics

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"reckon/deploy"
)

// Topic is one entry of the topic map.
type Topic struct {
	Name        string `yaml:"name"`
	Partitions  int32  `yaml:"partitions"`
	Replication int16  `yaml:"replication"`
	// Retention is a Go duration or "-1" (infinite).
	Retention string `yaml:"retention"`
	// Cleanup is delete, compact or compact,delete.
	Cleanup string `yaml:"cleanup"`
	// MaxMessageBytes is max.message.bytes; 0 leaves the broker default
	// (1 MiB). Raw topics and the DLQ take more, so an oversized record
	// reaches the quality gate and the DLQ instead of failing at produce.
	MaxMessageBytes int `yaml:"max_message_bytes"`
	// TimestampType is message.timestamp.type: CreateTime (the producer's
	// clock) or LogAppendTime (the broker's, set when the record is
	// appended); empty leaves the broker default (CreateTime). The stream's
	// watermark never passes its records' timestamps (docs/adr/0015), so a
	// raw topic whose producers' clocks are not trusted should take
	// LogAppendTime.
	TimestampType string `yaml:"timestamp_type"`
	Key           string `yaml:"key"`
	Purpose       string `yaml:"purpose"`
}

// Map is the whole topic map.
type Map struct {
	Topics []Topic `yaml:"topics"`
}

var validName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// Load reads the map at path, or the embedded deploy/topics.yaml when path
// is empty, and validates it.
func Load(path string) (*Map, error) {
	raw := deploy.DefaultTopics
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("topics: %w", err)
		}
		raw = b
	}
	var m Map
	if err := unmarshalStrict(raw, &m); err != nil {
		return nil, fmt.Errorf("topics: %w", err)
	}
	return &m, m.Validate()
}

// unmarshalStrict is yaml.UnmarshalWithOptions with yaml.Strict that turns
// a parser panic into an error: goccy/go-yaml v1.19.2 dereferences nil on
// some malformed documents (a bare "!" tag as a sequence, found by
// FuzzLoad), and a bad map file must be reported, not crash the command.
func unmarshalStrict(raw []byte, v any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("malformed YAML: the parser failed (%v)", p)
		}
	}()
	return yaml.UnmarshalWithOptions(raw, v, yaml.Strict())
}

// Validate reports every problem of the map at once.
func (m *Map) Validate() error {
	var errs []error
	seen := map[string]bool{}
	for i, t := range m.Topics {
		at := fmt.Sprintf("topics: topics[%d] (%s)", i, t.Name)
		if !validName.MatchString(t.Name) {
			errs = append(errs, fmt.Errorf("%s: name must match %s", at, validName))
		}
		if seen[t.Name] {
			errs = append(errs, fmt.Errorf("%s: listed twice", at))
		}
		seen[t.Name] = true
		if t.Partitions < 1 {
			errs = append(errs, fmt.Errorf("%s: partitions must be at least 1", at))
		}
		if t.Replication < 1 {
			errs = append(errs, fmt.Errorf("%s: replication must be at least 1", at))
		}
		if _, err := t.RetentionMS(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", at, err))
		}
		switch t.Cleanup {
		case "delete", "compact", "compact,delete":
		default:
			errs = append(errs, fmt.Errorf("%s: cleanup %q must be delete, compact or compact,delete", at, t.Cleanup))
		}
		switch t.TimestampType {
		case "", "CreateTime", "LogAppendTime":
		default:
			errs = append(errs, fmt.Errorf("%s: timestamp_type %q must be CreateTime or LogAppendTime", at, t.TimestampType))
		}
		if t.MaxMessageBytes < 0 {
			errs = append(errs, fmt.Errorf("%s: max_message_bytes must not be negative", at))
		}
		if t.Key == "" || t.Purpose == "" {
			errs = append(errs, fmt.Errorf("%s: key and purpose are required (the map documents every topic)", at))
		}
	}
	return errors.Join(errs...)
}

// Find returns the topic named n.
func (m *Map) Find(n string) (Topic, bool) {
	for _, t := range m.Topics {
		if t.Name == n {
			return t, true
		}
	}
	return Topic{}, false
}

// RetentionMS renders Retention as Kafka's retention.ms.
func (t Topic) RetentionMS() (string, error) {
	if t.Retention == "-1" {
		return "-1", nil
	}
	d, err := time.ParseDuration(t.Retention)
	if err != nil || d <= 0 {
		return "", fmt.Errorf("retention %q must be a positive Go duration or \"-1\"", t.Retention)
	}
	return strconv.FormatInt(d.Milliseconds(), 10), nil
}

// Configs are the topic configs reckon manages.
func (t Topic) Configs() map[string]string {
	ms, _ := t.RetentionMS()
	m := map[string]string{"retention.ms": ms, "cleanup.policy": t.Cleanup}
	if t.MaxMessageBytes > 0 {
		m["max.message.bytes"] = strconv.Itoa(t.MaxMessageBytes)
	}
	if t.TimestampType != "" {
		m["message.timestamp.type"] = t.TimestampType
	}
	return m
}

// Action is one thing Apply did or could not do.
type Action struct {
	Topic string
	// Kind is created, partitions, config, ok or drift.
	Kind   string
	Detail string
}

func (a Action) String() string {
	return fmt.Sprintf("%-22s %-10s %s", a.Topic, a.Kind, a.Detail)
}

// Apply makes the cluster match the map: creates missing topics, raises
// partition counts, sets managed configs. What it must not fix (fewer
// partitions in the map than live: Kafka cannot remove partitions, and
// changing the count remaps keys) is reported as drift. Running it twice
// does nothing the second time.
func Apply(ctx context.Context, adm *kadm.Client, m *Map) ([]Action, error) {
	names := make([]string, len(m.Topics))
	for i, t := range m.Topics {
		names[i] = t.Name
	}
	live, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("topics: list: %w", err)
	}
	var actions []Action
	var errs []error
	for _, t := range m.Topics {
		d, exists := live[t.Name]
		if !exists || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			cfgs := map[string]*string{}
			for k, v := range t.Configs() {
				cfgs[k] = kadm.StringPtr(v)
			}
			if _, err := adm.CreateTopic(ctx, t.Partitions, t.Replication, cfgs, t.Name); err != nil && !errors.Is(err,
				kerr.TopicAlreadyExists) {
				errs = append(errs, fmt.Errorf("topics: create %s: %w", t.Name, err))
				continue
			}
			actions = append(actions,
				Action{t.Name, "created", fmt.Sprintf("%d partitions, %s", t.Partitions, fmtConfigs(t.Configs()))})
			continue
		}
		if d.Err != nil {
			errs = append(errs, fmt.Errorf("topics: %s: %w", t.Name, d.Err))
			continue
		}
		n := int32(len(d.Partitions))
		switch {
		case n < t.Partitions:
			if _, err := adm.UpdatePartitions(ctx, int(t.Partitions), t.Name); err != nil {
				errs = append(errs, fmt.Errorf("topics: partitions %s: %w", t.Name, err))
			} else {
				actions = append(actions, Action{t.Name, "partitions", fmt.Sprintf("%d -> %d", n, t.Partitions)})
			}
		case n > t.Partitions:
			actions = append(actions,
				Action{t.Name, "drift",
					fmt.Sprintf("live has %d partitions, map says %d; partitions cannot be removed — update the map", n,
						t.Partitions)})
		}
		changed, err := applyConfigs(ctx, adm, t)
		if err != nil {
			errs = append(errs, err)
		} else if changed != "" {
			actions = append(actions, Action{t.Name, "config", changed})
		}
	}
	if len(actions) == 0 && len(errs) == 0 {
		actions = append(actions, Action{"*", "ok", "cluster matches the topic map"})
	}
	return actions, errors.Join(errs...)
}

func applyConfigs(ctx context.Context, adm *kadm.Client, t Topic) (string, error) {
	rcs, err := adm.DescribeTopicConfigs(ctx, t.Name)
	if err != nil {
		return "", fmt.Errorf("topics: describe configs %s: %w", t.Name, err)
	}
	rc, err := rcs.On(t.Name, nil)
	if err != nil {
		return "", fmt.Errorf("topics: describe configs %s: %w", t.Name, err)
	}
	have := map[string]string{}
	for _, c := range rc.Configs {
		have[c.Key] = c.MaybeValue()
	}
	var alter []kadm.AlterConfig
	var diffs []string
	want := t.Configs()
	for _, k := range sortedKeys(want) {
		if have[k] != want[k] {
			alter = append(alter, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(want[k])})
			diffs = append(diffs, fmt.Sprintf("%s %q -> %q", k, have[k], want[k]))
		}
	}
	if len(alter) == 0 {
		return "", nil
	}
	resps, err := adm.AlterTopicConfigs(ctx, alter, t.Name)
	if err == nil {
		for _, r := range resps {
			if r.Err != nil {
				err = r.Err
			}
		}
	}
	if err != nil {
		return "", fmt.Errorf("topics: alter configs %s: %w", t.Name, err)
	}
	return strings.Join(diffs, ", "), nil
}

// Live is the observed state of one topic.
type Live struct {
	Name       string
	Partitions int
	Configs    map[string]string
	// EndOffsets per partition (the high watermark).
	EndOffsets map[int32]int64
	InMap      bool
}

// Describe reads the live state of every topic in the map (and only those).
func Describe(ctx context.Context, adm *kadm.Client, m *Map) ([]Live, error) {
	var names []string
	for _, t := range m.Topics {
		names = append(names, t.Name)
	}
	live, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("topics: list: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, live.Names()...)
	if err != nil {
		return nil, fmt.Errorf("topics: end offsets: %w", err)
	}
	var out []Live
	for _, name := range live.Names() {
		d := live[name]
		if d.Err != nil {
			continue
		}
		l := Live{Name: name, Partitions: len(d.Partitions), Configs: map[string]string{}, EndOffsets: map[int32]int64{}}
		_, l.InMap = m.Find(name)
		if rcs, err := adm.DescribeTopicConfigs(ctx, name); err == nil {
			if rc, err := rcs.On(name, nil); err == nil {
				for _, c := range rc.Configs {
					if c.Key == "retention.ms" || c.Key == "cleanup.policy" || c.Key == "max.message.bytes" || c.Key == "message.timestamp.type" {
						l.Configs[c.Key] = c.MaybeValue()
					}
				}
			}
		}
		ends.Each(func(o kadm.ListedOffset) {
			if o.Topic == name && o.Err == nil {
				l.EndOffsets[o.Partition] = o.Offset
			}
		})
		out = append(out, l)
	}
	return out, nil
}

func fmtConfigs(m map[string]string) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, " ")
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
