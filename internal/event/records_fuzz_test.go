package event

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzPaneJSON checks Pane.AppendJSON on any field values: the output is
// always valid JSON; wherever encoding/json can encode the pane (finite
// numbers, years 0–9999) the bytes are exactly encoding/json's (without
// HTML escaping); and with valid UTF-8 strings encoding/json decodes them
// back to the same pane.
//
//	go test ./internal/event -run '^$' -fuzz '^FuzzPaneJSON$' -fuzztime 60s
func FuzzPaneJSON(f *testing.F) {
	at := time.Date(2026, 11, 7, 8, 0, 0, 0, time.UTC)
	f.Add("suhu", "sensor-07", at.Unix(), int64(0), int64(3600), int64(3), 73.5, 24.1, 24.9, int64(2), "late", "stream", "", at.Unix()+3605, int64(123456789))
	f.Add("payments", "we\"ird\\key\n\x01\u2028ü\xff<>&", int64(0), int64(999), int64(300), int64(1), 1e21, 1e-7, -0.000001, int64(9), "correction", "batch", "late events beyond lateness", int64(0), int64(0))
	f.Add("", "", int64(-62135596800), int64(0), int64(0), int64(0), math.Copysign(0, -1), 5e-324, math.MaxFloat64, int64(math.MaxInt64), "", "", "", int64(253402300799), int64(999999999))
	f.Add("x", "k", int64(253402300800), int64(0), int64(60), int64(-1), math.NaN(), math.Inf(1), math.Inf(-1), int64(math.MinInt64), "early", "stream", "\xed\xa0\x80", int64(-62135596801), int64(1))
	f.Fuzz(func(t *testing.T, stream, key string, startSec, nsec, size, count int64, sum, lo, hi float64, version int64, timing, by, reason string, wmSec, emNsec int64) {
		start := time.Unix(startSec, nsec).UTC()
		p := Pane{Stream: stream, Key: key, WindowStart: start, WindowEnd: start.Add(time.Duration(size) * time.Second),
			Count: count, Sum: sum, Min: lo, Max: hi, Version: version, Timing: Timing(timing), ComputedBy: by,
			Watermark: time.Unix(wmSec, 0).UTC(), EmittedAt: time.Unix(0, emNsec).UTC(), ProcessedAt: time.Unix(wmSec+1, emNsec).UTC(), Reason: reason}
		got := p.AppendJSON([]byte("prefix"))
		if !bytes.HasPrefix(got, []byte("prefix")) {
			t.Fatal("AppendJSON dropped what it was appending to")
		}
		got = got[len("prefix"):]
		if !json.Valid(got) {
			t.Fatalf("invalid JSON: %s", got)
		}
		want, ok := encodingJSON(t, p)
		if !ok {
			return
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendJSON differs from encoding/json:\n got %s\nwant %s", got, want)
		}
		if !allUTF8(stream, key, timing, by, reason) {
			return
		}
		var back Pane
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("decode %s: %v", got, err)
		}
		if !samePane(back, p) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", back, p)
		}
	})
}

// FuzzFeatureJSON is FuzzPaneJSON for Feature.AppendJSON.
//
//	go test ./internal/event -run '^$' -fuzz '^FuzzFeatureJSON$' -fuzztime 60s
func FuzzFeatureJSON(f *testing.F) {
	at := time.Date(2026, 11, 7, 8, 30, 0, 123456789, time.UTC)
	f.Add("payments", "Budi", "a3f8e1d2-7b4c-4e2a-9c1d-5e6f7a8b9c0d", at.Unix(), int64(at.Nanosecond()), int64(time.Minute), int64(3), 405000.0, at.Unix()-5, int64(0))
	f.Add("", "\x00\u2029\xc3", "", int64(-62135596800), int64(0), int64(-1), int64(0), math.NaN(), int64(253402300800), int64(-1))
	f.Fuzz(func(t *testing.T, stream, key, id string, sec, nsec, size, count int64, sum float64, wmSec, emNsec int64) {
		ft := Feature{Stream: stream, Key: key, EventID: id, EventTime: time.Unix(sec, nsec).UTC(), Size: time.Duration(size),
			Count: count, Sum: sum, Watermark: time.Unix(wmSec, 0).UTC(), EmittedAt: time.Unix(0, emNsec).UTC(),
			ArrivedAt: time.Unix(sec, emNsec).UTC(), SourceTopic: key, SourcePartition: int32(size), SourceOffset: count}
		got := ft.AppendJSON(nil)
		if !json.Valid(got) {
			t.Fatalf("invalid JSON: %s", got)
		}
		want, ok := encodingJSON(t, ft)
		if !ok {
			return
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendJSON differs from encoding/json:\n got %s\nwant %s", got, want)
		}
		if !allUTF8(stream, key, id) {
			return
		}
		var back Feature
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("decode %s: %v", got, err)
		}
		if back.Stream != ft.Stream || back.Key != ft.Key || back.EventID != ft.EventID || !back.EventTime.Equal(ft.EventTime) ||
			back.Size != ft.Size || back.Count != ft.Count || back.Sum != ft.Sum || !back.Watermark.Equal(ft.Watermark) || !back.EmittedAt.Equal(ft.EmittedAt) ||
			!back.ArrivedAt.Equal(ft.ArrivedAt) || back.SourceTopic != ft.SourceTopic || back.SourcePartition != ft.SourcePartition ||
			back.SourceOffset != ft.SourceOffset {
			t.Fatalf("round trip:\n got %+v\nwant %+v", back, ft)
		}
	})
}

// FuzzDeadLetterHeaders checks that a dead letter's headers carry every
// field so a reader (`reckon topics tail`, the ledger) gets them back: the
// reason and lists as given, numbers and times parseable to the same
// values.
//
//	go test ./internal/event -run '^$' -fuzz '^FuzzDeadLetterHeaders$' -fuzztime 60s
func FuzzDeadLetterHeaders(f *testing.F) {
	at := time.Date(2026, 11, 7, 8, 31, 0, 0, time.UTC)
	f.Add("data.suhu_c: 75 above max 60", "data.suhu_c", "m8-suhu-kejadian", int32(2), int64(1234), at.UnixNano(), at.UnixNano()+1, 1, "gate")
	f.Add("payload: invalid UTF-8 at byte 154\xff", "payload\x00", "", int32(-1), int64(-1), int64(0), int64(math.MinInt64), 3, "process")
	f.Fuzz(func(t *testing.T, reason, field, topic string, part int32, off, srcNs, deadNs int64, attempts int, stage string) {
		d := DeadLetter{Reason: reason, Reasons: []string{reason, "x: second"}, Fields: []string{field, "x"},
			SourceTopic: topic, SourcePartition: part, SourceOffset: off, SourceTimestamp: time.Unix(0, srcNs),
			DeadAt: time.Unix(0, deadNs), Attempts: attempts, Stage: stage}
		h := map[string]string{}
		for _, x := range d.Headers() {
			if _, dup := h[x.Key]; dup {
				t.Fatalf("header %s twice", x.Key)
			}
			h[x.Key] = string(x.Value)
		}
		if h[HeaderReason] != reason || h[HeaderReasons] != reason+"; x: second" || h[HeaderFields] != field+",x" ||
			h[HeaderSourceTopic] != topic || h[HeaderStage] != stage {
			t.Fatalf("string headers %q", h)
		}
		if p, err := strconv.ParseInt(h[HeaderSourcePartition], 10, 32); err != nil || int32(p) != part {
			t.Fatalf("partition %q: %v", h[HeaderSourcePartition], err)
		}
		if o, err := strconv.ParseInt(h[HeaderSourceOffset], 10, 64); err != nil || o != off {
			t.Fatalf("offset %q: %v", h[HeaderSourceOffset], err)
		}
		if a, err := strconv.Atoi(h[HeaderAttempts]); err != nil || a != attempts {
			t.Fatalf("attempts %q: %v", h[HeaderAttempts], err)
		}
		for k, want := range map[string]time.Time{HeaderSourceTimestamp: d.SourceTimestamp, HeaderDeadAt: d.DeadAt} {
			if got, err := time.Parse(time.RFC3339Nano, h[k]); err != nil || !got.Equal(want) || !strings.HasSuffix(h[k], "Z") {
				t.Fatalf("%s %q: %v, want %v in UTC", k, h[k], err, want)
			}
		}
	})
}

// encodingJSON renders v as encoding/json does without HTML escaping; ok is
// false where encoding/json refuses (NaN, ±Inf, years outside 0–9999).
func encodingJSON(t *testing.T, v any) ([]byte, bool) {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, false
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), true
}

func allUTF8(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

func samePane(a, b Pane) bool {
	return a.Stream == b.Stream && a.Key == b.Key && a.WindowStart.Equal(b.WindowStart) && a.WindowEnd.Equal(b.WindowEnd) &&
		a.Count == b.Count && a.Sum == b.Sum && a.Min == b.Min && a.Max == b.Max && a.Version == b.Version &&
		a.Timing == b.Timing && a.ComputedBy == b.ComputedBy && a.Watermark.Equal(b.Watermark) && a.EmittedAt.Equal(b.EmittedAt) &&
		a.ProcessedAt.Equal(b.ProcessedAt) && a.Reason == b.Reason
}
