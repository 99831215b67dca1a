package lake

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"reckon/internal/event"
	"reckon/lake/storage"
)

// lakeCall is one method of Lake (or of its RawWriter) that reaches storage.
type lakeCall struct {
	name string
	call func(ctx context.Context, l *Lake) error
}

var cancelPanes = []event.Pane{{Stream: "payments", Key: "u1", WindowStart: testStart, WindowEnd: testStart.Add(5 * time.Minute),
	Count: 1, Sum: 1, Min: 1, Max: 1, Version: 1, Timing: "on_time", ComputedBy: event.ComputedByBatch, EmittedAt: testStart}}

// seedCancelLake gives every call of lakeCalls something to read.
func seedCancelLake(t *testing.T, l *Lake) {
	t.Helper()
	ctx := t.Context()
	if _, err := l.WriteRaw(ctx, topic, 0, 0, 9, genRows(10, 1, 2, 0, 0, 5)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.WriteProgress(ctx, Progress{Topic: topic, Partition: 0, NextOffset: 10, ArchivedThrough: testStart.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.WritePanes(ctx, "payments", "seed", cancelPanes); err != nil {
		t.Fatal(err)
	}
	if _, err := l.WriteTruth(ctx, "payments", "seed", cancelPanes); err != nil {
		t.Fatal(err)
	}
	if _, err := l.WriteReport(ctx, "reconcile", "seed", []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	putFile(t, l, "zreports/close_date=2026-11-07/seed.bin", []byte("seed"))
}

// lakeCalls is every exported method that reaches storage. The writes use
// names the seed does not, so a write that happened shows as a new file
// (WriteProgress, which has one file per partition, moves it forward).
func lakeCalls(t *testing.T) []lakeCall {
	gate := testGate(t)
	recs := []RawRecord{{Offset: 20, Timestamp: testStart, Value: envelope(20, "sensor.suhu.terbaca", testStart, `{"id_perangkat":"sensor-07","suhu_c":1}`)}}
	return []lakeCall{
		{"WriteRaw", func(ctx context.Context, l *Lake) error {
			_, err := l.WriteRaw(ctx, topic, 0, 10, 19, genRows(10, 1, 2, 0, 10, 6))
			return err
		}},
		{"RawWriter.WriteBatch", func(ctx context.Context, l *Lake) error {
			w, err := l.NewRawWriter(RawTable{Topic: topic, KeyPath: "data.id_perangkat", ValuePath: "data.suhu_c"}, gate)
			if err != nil {
				return err
			}
			_, err = w.WriteBatch(ctx, 0, recs)
			return err
		}},
		{"WriteProgress", func(ctx context.Context, l *Lake) error {
			_, err := l.WriteProgress(ctx, Progress{Topic: topic, Partition: 0, NextOffset: 30, ArchivedThrough: testStart.Add(2 * time.Hour)})
			return err
		}},
		{"ReadProgress", func(ctx context.Context, l *Lake) error {
			_, err := l.ReadProgress(ctx, topic, 0)
			return err
		}},
		{"TopicProgress", func(ctx context.Context, l *Lake) error {
			_, err := l.TopicProgress(ctx, topic)
			return err
		}},
		{"WritePanes", func(ctx context.Context, l *Lake) error {
			_, err := l.WritePanes(ctx, "payments", "cancelled", cancelPanes)
			return err
		}},
		{"ReadPanes", func(ctx context.Context, l *Lake) error {
			_, err := l.ReadPanes(ctx, "payments", testStart, testStart.Add(time.Hour))
			return err
		}},
		{"WriteTruth", func(ctx context.Context, l *Lake) error {
			_, err := l.WriteTruth(ctx, "payments", "cancelled", cancelPanes)
			return err
		}},
		{"ReadTruth", func(ctx context.Context, l *Lake) error {
			_, err := l.ReadTruth(ctx, "payments", testStart, testStart.Add(time.Hour))
			return err
		}},
		{"WriteReport", func(ctx context.Context, l *Lake) error {
			_, err := l.WriteReport(ctx, "reconcile", "cancelled", []byte("{}\n"))
			return err
		}},
		{"ReadReport", func(ctx context.Context, l *Lake) error {
			_, err := l.ReadReport(ctx, "reconcile", "seed")
			return err
		}},
		{"WriteFile", func(ctx context.Context, l *Lake) error {
			_, err := l.WriteFile(ctx, "zreports/close_date=2026-11-07/cancelled.bin", func(w io.Writer) error {
				_, err := io.WriteString(w, "cancelled")
				return err
			})
			return err
		}},
		{"ReadFile", func(ctx context.Context, l *Lake) error {
			_, err := l.ReadFile(ctx, "zreports/close_date=2026-11-07/seed.bin")
			return err
		}},
		{"Files", func(ctx context.Context, l *Lake) error {
			_, err := l.Files(ctx, "zreports/close_date=2026-11-07")
			return err
		}},
		{"List", func(ctx context.Context, l *Lake) error {
			_, err := l.List(ctx)
			return err
		}},
		{"RawHours", func(ctx context.Context, l *Lake) error {
			_, err := l.RawHours(ctx, topic, testStart, testStart.Add(time.Hour))
			return err
		}},
		{"Aggregate", func(ctx context.Context, l *Lake) error {
			_, _, err := l.Aggregate(ctx, Query{Topic: topic, From: testStart, To: testStart.Add(time.Hour)}, time.Hour)
			return err
		}},
		{"Compact", func(ctx context.Context, l *Lake) error {
			_, err := l.Compact(ctx, topic, testStart)
			return err
		}},
	}
}

// TestCancelledContext: on either storage, every method called with a
// cancelled ctx returns an error wrapping context.Canceled, reads return
// no data and writes change nothing.
func TestCancelledContext(t *testing.T) {
	forEachStore(t, func(t *testing.T, opts Options) {
		l := mustOpen(t, opts)
		seedCancelLake(t, l)
		before := listFiles(t, l)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		for _, c := range lakeCalls(t) {
			if err := c.call(ctx, l); !errors.Is(err, context.Canceled) {
				t.Errorf("%s with a cancelled ctx: %v, want context.Canceled", c.name, err)
			}
		}
		if after := listFiles(t, l); !slices.Equal(after, before) {
			t.Errorf("cancelled calls changed the lake:\nbefore %q\nafter  %q", before, after)
		}
		if p, err := l.ReadProgress(t.Context(), topic, 0); err != nil || p.NextOffset != 10 {
			t.Errorf("progress after a cancelled write: %+v, %v", p, err)
		}
		if _, ok := l.base().(*storage.S3); ok {
			if ups := uploads(t, l); len(ups) != 0 {
				t.Errorf("unfinished uploads: %q", ups)
			}
		}
	})
}

// TestDirectoryCancelledBeforeFirstWrite: a lake directory that does not
// exist yet is not even created by a write whose ctx is done.
func TestDirectoryCancelledBeforeFirstWrite(t *testing.T) {
	root := filepath.Join(t.TempDir(), "lake")
	l := mustOpen(t, Options{Root: root})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, c := range lakeCalls(t) {
		if err := c.call(ctx, l); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled ctx: %v, want context.Canceled", c.name, err)
		}
	}
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cancelled writes created the lake directory: %v", err)
	}
}

// TestWriteCancelledMidway: a write whose ctx is cancelled while it writes
// fails with context.Canceled, leaves no file or temporary file, and keeps
// the earlier version of the file.
func TestWriteCancelledMidway(t *testing.T) {
	forEachStore(t, func(t *testing.T, opts Options) {
		l := mustOpen(t, opts)
		const key = "reports/big/file.bin"
		putFile(t, l, key, []byte("v1"))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		chunk := make([]byte, 3<<20/2) // more than the directory store's write buffer
		_, err := l.WriteFile(ctx, key, func(w io.Writer) error {
			if _, err := w.Write(chunk); err != nil {
				return err
			}
			cancel()
			_, err := w.Write(chunk)
			return err
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("write cancelled midway: %v, want context.Canceled", err)
		}
		if got := listFiles(t, l); !slices.Equal(got, []string{key}) {
			t.Errorf("files after a cancelled write: %q", got)
		}
		if b, err := l.ReadFile(t.Context(), key); err != nil || string(b) != "v1" {
			t.Errorf("file after a cancelled rewrite: %q, %v", b, err)
		}
	})
}

// hangHandler passes requests to next until hang is set; then it takes
// each request (its body read), reports it on arrived and answers nothing
// until the client goes away (or the test ends).
type hangHandler struct {
	next    http.Handler
	hang    atomic.Bool
	arrived chan string   // method and path of each hung request
	gone    atomic.Int64  // hung requests whose client went away
	release chan struct{} // closed when the test ends
}

func (h *hangHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.hang.Load() {
		h.next.ServeHTTP(w, r)
		return
	}
	// The server notices a closed connection only once the body is read.
	io.Copy(io.Discard, r.Body)
	select {
	case h.arrived <- r.Method + " " + r.URL.Path:
	default:
	}
	select {
	case <-r.Context().Done():
		h.gone.Add(1)
	case <-h.release:
	}
}

// TestS3CancelAbortsHungRequest: with the S3 endpoint hanging on every
// request, each method returns promptly once its ctx is cancelled or past
// its deadline, with an error wrapping context.Canceled or
// context.DeadlineExceeded, and the request is aborted on the wire (the
// server sees its client go away).
func TestS3CancelAbortsHungRequest(t *testing.T) {
	h := &hangHandler{arrived: make(chan string, 16), release: make(chan struct{})}
	f := newS3FakeWrapped(t, func(next http.Handler) http.Handler { h.next = next; return h })
	t.Cleanup(func() { close(h.release) }) // before the server's Close, which waits for handlers
	l := mustOpen(t, f.options())
	seedCancelLake(t, l)
	h.hang.Store(true)

	const bound = 10 * time.Second // "promptly": without ctx a call hangs until the test ends
	var aborted int64
	// run starts c and waits until one of its requests hangs.
	run := func(ctx context.Context, c lakeCall) <-chan error {
		t.Helper()
		for len(h.arrived) > 0 {
			<-h.arrived
		}
		done := make(chan error, 1)
		go func() { done <- c.call(ctx, l) }()
		select {
		case <-h.arrived:
		case err := <-done:
			t.Fatalf("%s returned before any request hung: %v", c.name, err)
		case <-time.After(bound):
			t.Fatalf("%s sent no request within %v", c.name, bound)
		}
		return done
	}
	// finish waits for c's result and for the server to see the abort.
	finish := func(c lakeCall, done <-chan error, want error) {
		t.Helper()
		select {
		case err := <-done:
			if !errors.Is(err, want) {
				t.Errorf("%s: %v, want an error wrapping %v", c.name, err, want)
			}
		case <-time.After(bound):
			t.Fatalf("%s still hangs %v after its ctx ended", c.name, bound)
		}
		aborted++
		deadline := time.Now().Add(bound)
		for h.gone.Load() < aborted {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the server saw %d aborted requests, want %d", c.name, h.gone.Load(), aborted)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	for _, c := range lakeCalls(t) {
		ctx, cancel := context.WithCancel(t.Context())
		done := run(ctx, c)
		cancel()
		finish(c, done, context.Canceled)
	}
	for _, c := range lakeCalls(t)[:4] { // a write, the raw writer, a read-then-write, a read
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		done := run(ctx, c)
		finish(c, done, context.DeadlineExceeded)
		cancel()
	}
}
