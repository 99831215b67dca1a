package lake

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"reckon/lake/storage"
)

// Table directories under the lake root.
const (
	RawDir       = "raw"
	RejectedDir  = "rejected"
	SummariesDir = "summaries"
	ProgressDir  = "_progress"
	// DroppedDir holds the redeliveries a closed hour's compaction removed
	// from raw (DroppedRow), so every offset stays accounted for.
	DroppedDir = "raw_dropped"
)

// Errors of package lake. Wrapped errors add the path or value at fault.
var (
	ErrBadName    = storage.ErrBadName // a key or name the lake refuses
	ErrBadRange   = errors.New("lake: bad offset range")
	ErrBadFile    = storage.ErrBadFile // a file that does not decode
	ErrNoProgress = errors.New("lake: no progress recorded")
	ErrBadQuery   = errors.New("lake: bad query")
)

// maxTopicLen is Kafka's limit on topic name length.
const maxTopicLen = 249

// ValidateTopic reports whether t can name a lake table: Kafka's legal topic
// characters [a-zA-Z0-9._-], at most 249 of them, and not starting with "."
// or "_", because file names begin with the topic and such files would be
// hidden from DuckDB, Spark and pandas globs.
func ValidateTopic(t string) error {
	return validateName("topic", t, maxTopicLen)
}

// ValidateName checks a stream or file name used in the summaries table with
// the same rules as ValidateTopic.
func ValidateName(n string) error {
	return validateName("name", n, maxTopicLen)
}

func validateName(what, s string, maxLen int) error {
	if s == "" {
		return fmt.Errorf("%w: empty %s", ErrBadName, what)
	}
	if len(s) > maxLen {
		return fmt.Errorf("%w: %s %.20q... longer than %d", ErrBadName, what, s, maxLen)
	}
	if s[0] == '.' || s[0] == '_' {
		return fmt.Errorf("%w: %s %q starts with %q (hidden from readers)", ErrBadName, what, s, s[0])
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %s %q: character %q outside [a-zA-Z0-9._-]", ErrBadName, what, s, c)
		}
	}
	return nil
}

// FileName is the base name of a raw or rejected file holding records of
// topic/partition from firstOffset to lastOffset inclusive.
func FileName(topic string, partition int32, firstOffset, lastOffset int64) string {
	var b []byte
	b = append(b, topic...)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(partition), 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, firstOffset, 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, lastOffset, 10)
	b = append(b, ".parquet"...)
	return string(b)
}

// FileRange is what a raw or rejected file name says about its content.
type FileRange struct {
	Topic       string
	Partition   int32
	FirstOffset int64
	LastOffset  int64
}

// Contains reports whether r covers o's offsets of the same topic partition.
func (r FileRange) Contains(o FileRange) bool {
	return r.Topic == o.Topic && r.Partition == o.Partition &&
		r.FirstOffset <= o.FirstOffset && o.LastOffset <= r.LastOffset
}

// ParseFileName parses a name made by FileName for the given topic. Topics may
// contain '-', so the topic is known and the three numbers are taken from the
// end.
func ParseFileName(topic, name string) (FileRange, error) {
	rest, ok := strings.CutSuffix(name, ".parquet")
	if !ok {
		return FileRange{}, fmt.Errorf("%w: %q has no .parquet suffix", ErrBadFile, name)
	}
	rest, ok = strings.CutPrefix(rest, topic+"-")
	if !ok {
		return FileRange{}, fmt.Errorf("%w: %q does not start with topic %q", ErrBadFile, name, topic)
	}
	parts := strings.Split(rest, "-")
	if len(parts) != 3 {
		return FileRange{}, fmt.Errorf("%w: %q is not <topic>-<partition>-<first>-<last>.parquet", ErrBadFile, name)
	}
	p, err1 := strconv.ParseInt(parts[0], 10, 32)
	first, err2 := strconv.ParseInt(parts[1], 10, 64)
	last, err3 := strconv.ParseInt(parts[2], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil || p < 0 || first < 0 || last < first {
		return FileRange{}, fmt.Errorf("%w: %q: bad partition or offsets", ErrBadFile, name)
	}
	return FileRange{Topic: topic, Partition: int32(p), FirstOffset: first, LastOffset: last}, nil
}

// dateString formats the UTC date of t as YYYY-MM-DD.
func dateString(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// The key (slash-separated, relative to the lake root) of each directory
// and file; the exported *Dir and *Path functions join them to a local
// root.

func rawHourKey(topic string, t time.Time) string {
	t = t.UTC()
	return RawDir + "/topic=" + topic + "/event_date=" + dateString(t) + fmt.Sprintf("/event_hour=%02d", t.Hour())
}

// droppedHourKey is the raw_dropped directory of topic's hour holding t:
// the raw layout under DroppedDir.
func droppedHourKey(topic string, t time.Time) string {
	return DroppedDir + strings.TrimPrefix(rawHourKey(topic, t), RawDir)
}

func rejectedDateKey(topic string, t time.Time) string {
	return RejectedDir + "/topic=" + topic + "/ingest_date=" + dateString(t)
}

func paneDateKey(table, stream string, t time.Time) string {
	return table + "/stream=" + stream + "/window_date=" + dateString(t)
}

func progressDirKey(topic string) string { return ProgressDir + "/topic=" + topic }

func progressKey(topic string, partition int32) string {
	return progressDirKey(topic) + "/partition=" + strconv.FormatInt(int64(partition), 10) + ".json"
}

// localPath is key under the local directory root.
func localPath(root, key string) string { return filepath.Join(root, filepath.FromSlash(key)) }

// RawHourDir is the directory of topic's raw files for the UTC hour holding
// t, in a lake at the local directory root.
func RawHourDir(root, topic string, t time.Time) string {
	return localPath(root, rawHourKey(topic, t))
}

// RejectedDateDir is the directory of topic's rejected files for the UTC
// ingest date holding t, in a lake at the local directory root.
func RejectedDateDir(root, topic string, t time.Time) string {
	return localPath(root, rejectedDateKey(topic, t))
}

// SummariesDateDir is the directory of stream's summaries for the UTC window
// date holding t, in a lake at the local directory root.
func SummariesDateDir(root, stream string, t time.Time) string {
	return localPath(root, paneDateKey(SummariesDir, stream, t))
}

// ProgressPath is the progress file of topic/partition, in a lake at the
// local directory root.
func ProgressPath(root, topic string, partition int32) string {
	return localPath(root, progressKey(topic, partition))
}

// hidden reports whether a file or directory name is hidden from lake readers.
func hidden(name string) bool {
	return name == "" || name[0] == '.' || name[0] == '_'
}

// parseDateDir parses "<prefix>=YYYY-MM-DD".
func parseDateDir(prefix, name string) (time.Time, bool) {
	v, ok := strings.CutPrefix(name, prefix+"=")
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.DateOnly, v)
	return t, err == nil
}

// parseHourDir parses "event_hour=HH".
func parseHourDir(name string) (int, bool) {
	v, ok := strings.CutPrefix(name, "event_hour=")
	if !ok || len(v) != 2 {
		return 0, false
	}
	h, err := strconv.Atoi(v)
	return h, err == nil && h >= 0 && h < 24
}

// visibleFiles returns the names of the visible files in es with suffix,
// in name order.
func visibleFiles(es []storage.Entry, suffix string) []string {
	var out []string
	for _, e := range es {
		if !e.Dir && !hidden(e.Name) && strings.HasSuffix(e.Name, suffix) {
			out = append(out, e.Name)
		}
	}
	slices.Sort(out)
	return out
}
