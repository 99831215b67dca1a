package streaming

import (
	"errors"
	"reflect"
	"testing"
)

func TestReplayLogRoundTrip(t *testing.T) {
	l := replayLog{epoch: 7, from: 1000, entries: []logEntry{
		{next: 1000, tick: 1_700_000_000_000_000_000},    // a tick before any record
		{next: 1010, skipped: []int64{1000, 1003, 1009}}, // records, three dead-lettered unprocessed
		{next: 1500, tick: 1_700_000_000_250_000_000},    // records and a tick
		{next: 1500, tick: 1_700_000_000_500_000_000},    // an idle tick
		{next: 1501, tick: -5, skipped: []int64{1500}},   // odd but legal values survive
	}}
	got, err := decodeLog(l.encode())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, l) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", *got, l)
	}
	if got.end() != 1501 {
		t.Fatalf("end %d", got.end())
	}
	if !got.entries[1].isSkipped(1003) || got.entries[1].isSkipped(1004) {
		t.Fatal("isSkipped")
	}
	empty := replayLog{epoch: 1, from: 5}
	if e, err := decodeLog(empty.encode()); err != nil || e.end() != 5 || len(e.entries) != 0 {
		t.Fatalf("empty log: %+v %v", e, err)
	}
}

func TestReplayLogRejects(t *testing.T) {
	good := (&replayLog{epoch: 1, from: 10, entries: []logEntry{{next: 12, skipped: []int64{11}}}}).encode()
	for name, b := range map[string][]byte{
		"empty":         nil,
		"magic":         append([]byte("XYZ"), good[3:]...),
		"version":       append(append([]byte(logMagic), 9), good[4:]...),
		"truncated":     good[:len(good)-1],
		"trailing":      append(append([]byte(nil), good...), 0),
		"skip outside":  (&replayLog{epoch: 1, from: 10, entries: []logEntry{{next: 12, skipped: []int64{12}}}}).encode(),
		"skip repeated": (&replayLog{epoch: 1, from: 10, entries: []logEntry{{next: 12, skipped: []int64{11, 11}}}}).encode(),
		"skip before":   (&replayLog{epoch: 1, from: 10, entries: []logEntry{{next: 12, skipped: []int64{9}}}}).encode(),
	} {
		if _, err := decodeLog(b); !errors.Is(err, errLog) {
			t.Errorf("%s: err %v, want errLog", name, err)
		}
	}
}

// FuzzReplayLog: the decoder never panics, and whatever it accepts
// survives encode and decode unchanged (varints need not be minimal on
// input, so the bytes may differ).
func FuzzReplayLog(f *testing.F) {
	f.Add((&replayLog{epoch: 3, from: 0, entries: []logEntry{{next: 4, tick: 99, skipped: []int64{1, 3}}, {next: 4, tick: 100}}}).encode())
	f.Add((&replayLog{epoch: 0, from: 1 << 40}).encode())
	f.Add([]byte("RKL\x01\x00\x00\xff\xff\xff\xff\x0f"))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := decodeLog(b)
		if err != nil {
			return
		}
		again, err := decodeLog(l.encode())
		if err != nil {
			t.Fatalf("re-encoded log rejected: %v", err)
		}
		if !reflect.DeepEqual(again, l) {
			t.Fatalf("round trip differs:\n got %+v\nwant %+v", again, l)
		}
	})
}

func TestCheckpointChunks(t *testing.T) {
	defer func(n int) { chunkBytes = n }(chunkBytes)
	chunkBytes = 4
	v := []byte("0123456789")
	cs := chunked(v)
	if len(cs) != 3 || string(cs[2]) != "89" {
		t.Fatalf("chunks %q", cs)
	}
	key := stateKey("payments", "payments-kejadian", 2)
	snaps := map[string]snapshot{}
	for i, c := range cs {
		if baseKey(chunkKey(key, i)) != key {
			t.Fatalf("baseKey(%q) = %q", chunkKey(key, i), baseKey(chunkKey(key, i)))
		}
		snaps[chunkKey(key, i)] = snapshot{state: c, next: 40, epoch: 3, chunks: len(cs)}
	}
	// A stale chunk of an older, larger checkpoint is ignored.
	snaps[chunkKey(key, 3)] = snapshot{state: []byte("stale"), next: 20, epoch: 2, chunks: 4}
	got, ok, err := checkpointOf(snaps, key)
	if err != nil || !ok || string(got.state) != string(v) || got.next != 40 {
		t.Fatalf("assembled %q %v %v", got.state, ok, err)
	}
	if baseKey(logKey("payments-kejadian", 2)) != logKey("payments-kejadian", 2) {
		t.Fatal("the log key is not a chunk key")
	}
	// A chunk from another checkpoint is an error, never a silent mix.
	snaps[chunkKey(key, 1)] = snapshot{state: cs[1], next: 20, epoch: 2, chunks: 3}
	if _, _, err := checkpointOf(snaps, key); err == nil {
		t.Fatal("mixed checkpoints accepted")
	}
	delete(snaps, chunkKey(key, 1))
	if _, _, err := checkpointOf(snaps, key); err == nil {
		t.Fatal("missing chunk accepted")
	}
}
