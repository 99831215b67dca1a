package event

import (
	"bytes"
	"strconv"
	"testing"
	"time"
)

// recordBytes is the size of r as headerBytes counts it, plus key and
// value: what a broker measures against max.message.bytes, less framing.
func recordBytes(r DeadLetterRecord) int { return len(r.Key) + len(r.Value) + headerBytes(r.Headers) }

func TestDeadLetterRecord(t *testing.T) {
	const limit = 256 << 10 // a topic's max.message.bytes
	at := seedArrival
	d := DeadLetter{Reason: "payload: too big", Reasons: []string{"payload: too big"}, Fields: []string{"payload"},
		SourceTopic: "ignored", DeadAt: at.Add(time.Second), Attempts: 1, Stage: "gate"}
	src := func(key, value int, hs ...Header) SourceRecord {
		return SourceRecord{Topic: "zreport-parts", Partition: 2, Offset: 77, Timestamp: at,
			Key: bytes.Repeat([]byte("k"), key), Value: bytes.Repeat([]byte("v"), value), Headers: hs}
	}
	want := d // the headers Record should write
	want.SourceTopic, want.SourcePartition, want.SourceOffset, want.SourceTimestamp = "zreport-parts", 2, 77, at
	big := Header{"origin", bytes.Repeat([]byte("h"), limit)}
	// 100 KiB of source headers: their excess over half the overhead
	// comes out of the value.
	large := Header{"origin", bytes.Repeat([]byte("h"), 100<<10)}
	largeKept := limit - DeadLetterOverhead - 5 - (headerBytes(want.Headers()) + headerBytes([]Header{large}) - DeadLetterOverhead/2)
	for _, tc := range []struct {
		name     string
		src      SourceRecord
		key, val int      // bytes kept
		cuts     []string // HeaderTruncated values, in order
		carried  int      // source headers kept
	}{
		{name: "small", src: src(5, 100, Header{"trace", []byte("t1")}), key: 5, val: 100, carried: 1},
		{name: "at the limit", src: src(5, limit-DeadLetterOverhead-5), key: 5, val: limit - DeadLetterOverhead - 5},
		{name: "value over", src: src(5, limit), key: 5, val: limit - DeadLetterOverhead - 5,
			cuts: []string{"value: " + strconv.Itoa(limit) + " bytes, first " + strconv.Itoa(limit-DeadLetterOverhead-5) + " kept"}},
		{name: "key and value over", src: src(MaxDeadLetterKey+1, limit), key: MaxDeadLetterKey, val: limit - DeadLetterOverhead - MaxDeadLetterKey,
			cuts: []string{"key: " + strconv.Itoa(MaxDeadLetterKey+1) + " bytes, first " + strconv.Itoa(MaxDeadLetterKey) + " kept",
				"value: " + strconv.Itoa(limit) + " bytes, first " + strconv.Itoa(limit-DeadLetterOverhead-MaxDeadLetterKey) + " kept"}},
		{name: "source headers over", src: src(5, 10, big), key: 5, val: 10,
			cuts: []string{"headers: 1 source headers of " + strconv.Itoa(headerBytes([]Header{big})) + " bytes dropped"}},
		{name: "large source headers", src: src(5, limit, large), key: 5, val: largeKept, carried: 1,
			cuts: []string{"value: " + strconv.Itoa(limit) + " bytes, first " + strconv.Itoa(largeKept) + " kept"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := d.Record(tc.src, limit)
			if !bytes.Equal(r.Key, tc.src.Key[:tc.key]) || !bytes.Equal(r.Value, tc.src.Value[:tc.val]) {
				t.Errorf("kept key %d, value %d bytes; want %d, %d", len(r.Key), len(r.Value), tc.key, tc.val)
			}
			hs := want.Headers()
			// Half the overhead stays free for framing and the cut notes.
			if n := recordBytes(r) - 100*len(tc.cuts); n > limit-DeadLetterOverhead/2 {
				t.Errorf("dead letter of %d bytes leaves less than %d bytes of framing room under %d", n, DeadLetterOverhead/2, limit)
			}
			if len(r.Headers) != len(hs)+len(tc.cuts)+tc.carried {
				t.Fatalf("%d headers, want %d of reckon's, %d cuts, %d carried: %q", len(r.Headers), len(hs), len(tc.cuts), tc.carried, r.Headers)
			}
			for i, h := range hs {
				if r.Headers[i].Key != h.Key || !bytes.Equal(r.Headers[i].Value, h.Value) {
					t.Errorf("header %d: %s=%q, want %s=%q", i, r.Headers[i].Key, r.Headers[i].Value, h.Key, h.Value)
				}
			}
			for i, c := range tc.cuts {
				if h := r.Headers[len(hs)+i]; h.Key != HeaderTruncated || string(h.Value) != c {
					t.Errorf("cut %d: %s=%q, want %s=%q", i, h.Key, h.Value, HeaderTruncated, c)
				}
			}
			for i, h := range r.Headers[len(hs)+len(tc.cuts):] {
				if h.Key != tc.src.Headers[i].Key || !bytes.Equal(h.Value, tc.src.Headers[i].Value) {
					t.Errorf("carried header %d: %s, want %s", i, h.Key, tc.src.Headers[i].Key)
				}
			}
		})
	}
}
