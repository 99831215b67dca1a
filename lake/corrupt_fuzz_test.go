package lake

import (
	"context"
	"errors"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"reckon/internal/testing/corrupt"
)

// corruptBase is a valid raw file of one hour (several row groups, so
// statistics and pruning matter) and what a scan and an aggregation of
// it answer.
var corruptBase struct {
	once sync.Once
	file []byte
	key  string
	sum  uint64 // hashOfScan of the clean file
	aggs []WindowAgg
	err  error
}

// corruptQuery is the hour of the corrupted file.
var corruptQuery = Query{Topic: topic, From: testStart, To: testStart.Add(time.Hour)}

func corruptFixture(t *testing.T) {
	t.Helper()
	corruptBase.once.Do(func() {
		dir, err := os.MkdirTemp("", "reckon-corrupt-")
		if err != nil {
			corruptBase.err = err
			return
		}
		defer os.RemoveAll(dir)
		l, err := Open(Options{Root: dir, RowGroupRows: 64})
		if err != nil {
			corruptBase.err = err
			return
		}
		res, err := l.WriteRaw(context.Background(), topic, 0, 0, 299, genRows(300, 1, 6, 0, 0, 1))
		if err != nil {
			corruptBase.err = err
			return
		}
		corruptBase.key = res.Files[0].Path
		if corruptBase.file, err = os.ReadFile(filepath.Join(dir, filepath.FromSlash(corruptBase.key))); err != nil {
			corruptBase.err = err
			return
		}
		if corruptBase.sum, err = hashOfScan(l); err != nil {
			corruptBase.err = err
			return
		}
		corruptBase.aggs, _, corruptBase.err = l.Aggregate(context.Background(), corruptQuery, 5*time.Minute)
	})
	if corruptBase.err != nil {
		t.Fatal(corruptBase.err)
	}
}

// hashOfScan hashes every column of every row a full scan delivers.
func hashOfScan(l *Lake) (uint64, error) {
	h := fnv.New64a()
	var b [8]byte
	put := func(v uint64) {
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
		h.Write(b[:])
	}
	_, err := l.Scan(context.Background(), corruptQuery, ColAll, func(r *RawRow) error {
		h.Write([]byte(r.EventID + "\x00" + r.EventType + "\x00" + r.Key + "\x00" + r.Data + "\x00"))
		put(uint64(r.OccurredAt))
		put(uint64(r.IngestedAt))
		put(math.Float64bits(r.Value))
		put(uint64(r.KafkaPartition))
		put(uint64(r.KafkaOffset))
		return nil
	})
	return h.Sum64(), err
}

// FuzzCorruptRawFile: a raw file corrupted in storage (bytes flipped at
// pos, or cut short by cut bytes) read by the lake's reader. It must never
// panic; a failing read names the file (and wraps ErrBadFile); a read
// that succeeds returns exactly what the intact file holds, never a
// different answer.
//
//	go test ./lake -run '^$' -fuzz '^FuzzCorruptRawFile$' -fuzztime 60s
func FuzzCorruptRawFile(f *testing.F) {
	f.Add(uint32(0), byte(0), uint32(0))      // intact
	f.Add(uint32(0), byte(0xff), uint32(0))   // the header magic
	f.Add(uint32(100), byte(0x01), uint32(0)) // inside the first page
	f.Add(uint32(0), byte(0), uint32(1))      // the footer magic cut
	f.Add(uint32(0), byte(0), uint32(9))      // the footer length cut
	f.Add(uint32(0), byte(0), uint32(5000))   // half the file gone
	f.Add(^uint32(0)-8, byte(0x80), uint32(0))
	f.Add(^uint32(0)-200, byte(0x10), uint32(0)) // inside the footer
	f.Fuzz(func(t *testing.T, pos uint32, flip byte, cut uint32) {
		corruptFixture(t)
		n := uint32(len(corruptBase.file))
		dir := corrupt.Root(t, corruptBase.key, corrupt.Bytes(corruptBase.file, pos, flip, cut))
		l := mustOpen(t, Options{Root: dir})
		name := filepath.Base(corruptBase.key)
		check := func(what string, err error) bool {
			t.Helper()
			if err == nil {
				return true
			}
			if !strings.Contains(err.Error(), name) {
				t.Fatalf("%s of a corrupt file: %v: does not name the file", what, err)
			}
			if !errors.Is(err, ErrBadFile) {
				t.Fatalf("%s of a corrupt file: %v: not ErrBadFile", what, err)
			}
			return false
		}
		if sum, err := hashOfScan(l); check("scan", err) && sum != corruptBase.sum {
			t.Fatalf("scan of a file corrupted at %d (^%#x, cut %d) answered other rows without an error", pos%n, flip, cut%n)
		}
		aggs, _, err := l.Aggregate(context.Background(), corruptQuery, 5*time.Minute)
		if check("aggregate", err) && !equalAggs(aggs, corruptBase.aggs) {
			t.Fatalf("aggregate of a file corrupted at %d (^%#x, cut %d) answered otherwise without an error", pos%n, flip, cut%n)
		}
	})
}

func equalAggs(a, b []WindowAgg) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzCorruptPaneFile: a pane history file (summaries table, read whole
// with parquet.Read like the truth table) corrupted in storage. It must
// never panic; a failing read names the file and wraps ErrBadFile; a read
// that succeeds returns exactly the panes written.
//
//	go test ./lake -run '^$' -fuzz '^FuzzCorruptPaneFile$' -fuzztime 60s
func FuzzCorruptPaneFile(f *testing.F) {
	f.Add(uint32(0), byte(0), uint32(0))
	f.Add(uint32(0), byte(0xff), uint32(0))
	f.Add(uint32(80), byte(0x02), uint32(0))
	f.Add(uint32(0), byte(0), uint32(3))
	f.Add(^uint32(0)-25, byte(0x11), uint32(0)) // inside the footer
	dir := f.TempDir()
	l, err := Open(Options{Root: dir})
	if err != nil {
		f.Fatal(err)
	}
	panes := cancelPanes
	for i := 1; i < 20; i++ {
		p := cancelPanes[0]
		p.Key, p.Count, p.Sum = "u"+string(rune('a'+i)), int64(i), float64(i)
		panes = append(panes, p)
	}
	files, err := l.WritePanes(context.Background(), "payments", "fuzz", panes)
	if err != nil || len(files) != 1 {
		f.Fatal(files, err)
	}
	key := files[0].Path
	want, err := l.ReadPanes(context.Background(), "payments", testStart, testStart.Add(time.Hour))
	if err != nil {
		f.Fatal(err)
	}
	orig := corrupt.Read(f, dir, key)
	f.Fuzz(func(t *testing.T, pos uint32, flip byte, cut uint32) {
		n := uint32(len(orig))
		root := corrupt.Root(t, key, corrupt.Bytes(orig, pos, flip, cut))
		got, err := mustOpen(t, Options{Root: root}).ReadPanes(context.Background(), "payments", testStart, testStart.Add(time.Hour))
		if err != nil {
			if !strings.Contains(err.Error(), filepath.Base(key)) || !errors.Is(err, ErrBadFile) {
				t.Fatalf("reading a corrupt pane file: %v: want ErrBadFile naming %s", err, key)
			}
			return
		}
		if len(got) != len(want) {
			t.Fatalf("a file corrupted at %d (^%#x, cut %d): %d panes read without an error, want %d", pos%n, flip, cut%n, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("a file corrupted at %d (^%#x, cut %d): pane %d read as %+v without an error, want %+v", pos%n, flip, cut%n, i, got[i], want[i])
			}
		}
	})
}
