package lake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"reckon/internal/event"
	"reckon/lake/storage"
	"reckon/lake/storage/errorfs"
)

// The lake under injected storage faults (docs/adr/0022-lake-fault-injection.md):
// every path runs to completion at a set fault rate, retried as its
// activity's retry policy would, and the lake it leaves is checked through a
// second handle on the same root without faults.

// faultRate is the share of storage calls that draw a fault in the
// path tests: high enough that every path meets several.
const faultRate = 0.1

// retryBound is the most attempts a step may take, as a retry policy's
// MaximumAttempts would bound it; at faultRate a step of a dozen calls
// needs ~3 on average.
const retryBound = 40

// faultLake opens two handles on one lake: faulty, whose storage injects
// f, and clean, without faults, to check what readers see. Unless
// opts.Retry says otherwise, faulty does not retry (Retry.MaxAttempts 1):
// every fault drawn reaches the caller, as when the lake's retries are
// exhausted, so the path tests prove that a failure the lake gives up on
// leaves nothing partial and that its activity's retry gets past it.
// TestRetriesAtFaultRate runs the same paths with the lake's retries.
func faultLake(t *testing.T, opts Options, f *errorfs.Faults) (faulty, clean *Lake) {
	t.Helper()
	if opts.Retry == (storage.RetryOptions{}) {
		opts.Retry.MaxAttempts = 1
	}
	if f.Timeout == 0 {
		f.Timeout = 30 * time.Millisecond
	}
	if f.Latency == 0 {
		f.Latency = 5 * time.Millisecond
	}
	clean = mustOpen(t, opts)
	opts.Wrap = f.Wrap
	return mustOpen(t, opts), clean
}

// faultLog collects injected faults (Faults.OnFault) per kind.
type faultLog struct {
	mu     sync.Mutex
	faults []errorfs.Fault
}

func (fl *faultLog) add(f errorfs.Fault) {
	fl.mu.Lock()
	fl.faults = append(fl.faults, f)
	fl.mu.Unlock()
}

func (fl *faultLog) kinds() map[errorfs.FaultKind]int {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	m := map[errorfs.FaultKind]int{}
	for _, f := range fl.faults {
		m[f.Kind]++
	}
	return m
}

// retry calls step until it returns nil, at most retryBound times, as a
// retry policy would; after every failed attempt it runs check. A
// permanent error, an error that does not name the injected fault, or
// running out of attempts fails the test. It returns
// the attempts made.
func retry(t *testing.T, what string, step func() error, check func()) int {
	t.Helper()
	var errs []error
	for attempt := 1; attempt <= retryBound; attempt++ {
		err := step()
		if err == nil {
			return attempt
		}
		if storage.IsPermanent(err) {
			t.Fatalf("%s: attempt %d: a transient fault gave a permanent error: %v", what, attempt, err)
		}
		var ie *errorfs.InjectedError
		if !errors.As(err, &ie) && !strings.Contains(err.Error(), "lake: injected ") {
			t.Fatalf("%s: attempt %d: %v, want an error naming the injected fault", what, attempt, err)
		}
		errs = append(errs, err)
		if check != nil {
			check()
		}
	}
	t.Fatalf("%s: still failing after %d attempts: %v", what, retryBound, errors.Join(errs...))
	return 0
}

// checkVisible opens and decodes every visible Parquet file of the lake
// through clean and fails on any that does not read back whole: no reader
// may ever see a partial or corrupt file. It also checks that no write
// left debris behind (a temporary file, an unfinished upload).
func checkVisible(t *testing.T, clean *Lake) {
	t.Helper()
	for _, key := range listFiles(t, clean) {
		base := filepath.Base(key)
		if storage.IsTemp(base) {
			t.Errorf("temporary file left behind: %s", key)
			continue
		}
		if hidden(base) || !strings.HasSuffix(key, ".parquet") {
			continue
		}
		switch {
		case strings.HasPrefix(key, RejectedDir+"/"):
			if _, err := readRows[RejectedRow](t.Context(), clean, key, -1); err != nil {
				t.Errorf("visible file does not read: %v", err)
			}
		case strings.HasPrefix(key, RawDir+"/"):
			if _, err := readRows[RawRow](t.Context(), clean, key, -1); err != nil {
				t.Errorf("visible file does not read: %v", err)
			}
		case strings.HasPrefix(key, SummariesDir+"/"), strings.HasPrefix(key, TruthDir+"/"):
			if _, err := readRows[SummaryRow](t.Context(), clean, key, -1); err != nil {
				t.Errorf("visible file does not read: %v", err)
			}
		}
	}
	if _, ok := clean.base().(*storage.S3); ok {
		if ups := uploads(t, clean); len(ups) != 0 {
			t.Errorf("unfinished uploads left behind: %q", ups)
		}
	}
}

// archivedOffsets returns how many times each offset of partition p is in
// the raw and rejected tables of clean.
func archivedOffsets(t *testing.T, clean *Lake, p int32) map[int64]int {
	t.Helper()
	seen := map[int64]int{}
	for _, key := range listFiles(t, clean) {
		if hidden(filepath.Base(key)) || !strings.HasSuffix(key, ".parquet") {
			continue
		}
		switch {
		case strings.HasPrefix(key, RawDir+"/"):
			for _, r := range readParquet[RawRow](t, clean, key) {
				if r.KafkaPartition == p {
					seen[r.KafkaOffset]++
				}
			}
		case strings.HasPrefix(key, RejectedDir+"/"):
			for _, r := range readParquet[RejectedRow](t, clean, key) {
				if r.KafkaPartition == p {
					seen[r.KafkaOffset]++
				}
			}
		}
	}
	return seen
}

// archiveRecords makes n records of a sensor topic from offset 0, spread
// over three event hours and two ingest days, every seventh one invalid
// (rejected).
func archiveRecords(n int) []RawRecord {
	recs := make([]RawRecord, n)
	for i := range recs {
		at := testStart.Add(time.Duration(i) * 3 * time.Hour / time.Duration(n))
		arrival := at.Add(time.Duration(i%2) * 24 * time.Hour)
		v := envelope(i, "sensor.suhu.terbaca", at, fmt.Sprintf(`{"id_perangkat":"sensor-%02d","suhu_c":%d}`, i%5, i%40))
		if i%7 == 3 {
			v = []byte(`{"event_id":"not a uuid"}`)
		}
		recs[i] = RawRecord{Offset: int64(i), Timestamp: arrival, Value: v}
	}
	return recs
}

// TestArchiveUnderFaults: the archive path (RawWriter.WriteRange, then
// WriteProgress, step after step) under faults at faultRate, each step
// retried until it succeeds; a retried step sometimes reads a wider range,
// as the archive activity does when more records arrived, and supersedes
// the narrower files. At the end every offset is archived exactly once (raw
// or rejected), the progress file says so, and after every failed attempt
// every visible file read back whole.
func TestArchiveUnderFaults(t *testing.T) {
	forEachStore(t, func(t *testing.T, opts Options) {
		var log faultLog
		f := errorfs.UniformFaults(11, faultRate)
		f.OnFault = log.add
		l, clean := faultLake(t, opts, f)
		w, err := l.NewRawWriter(RawTable{Topic: topic, KeyPath: "data.id_perangkat", ValuePath: "data.suhu_c"}, testGate(t))
		if err != nil {
			t.Fatal(err)
		}
		const n, step = 1000, 40
		recs := archiveRecords(n)
		attempts, steps := 0, 0
		for next := int64(0); next < n; steps++ {
			from := next
			try := 0
			attempts += retry(t, fmt.Sprintf("archive from %d", from), func() error {
				// A retry reads up to step/4 more records each time, as if
				// they had arrived meanwhile.
				last := min(from+step-1+int64(try*step/4), n-1)
				try++
				res, err := w.WriteRange(t.Context(), 0, from, last, recs[from:last+1])
				if err != nil {
					return err
				}
				if _, err := l.WriteProgress(t.Context(), Progress{Topic: topic, Partition: 0, NextOffset: res.NextOffset,
					ArchivedThrough: testStart.Add(time.Duration(res.NextOffset) * time.Second)}); err != nil {
					return err
				}
				next = res.NextOffset
				return nil
			}, func() { checkVisible(t, clean) })
		}
		checkVisible(t, clean)
		seen := archivedOffsets(t, clean, 0)
		for o := range int64(n) {
			if seen[o] != 1 {
				t.Errorf("offset %d archived %d times, want once", o, seen[o])
			}
		}
		if len(seen) != n {
			t.Errorf("%d distinct offsets archived, want %d", len(seen), n)
		}
		p, err := clean.ReadProgress(t.Context(), topic, 0)
		if err != nil || p.NextOffset != n {
			t.Errorf("progress after the archive: %+v, %v; want next offset %d", p, err, n)
		}
		kinds := log.kinds()
		t.Logf("%d steps in %d attempts; faults injected %d: %v", steps, attempts, l.FaultsInjected(), kinds)
		if kinds[errorfs.FaultError] == 0 || kinds[errorfs.FaultLost] == 0 || kinds[errorfs.FaultNoSpace] == 0 {
			t.Errorf("the archive met too few kinds of fault to prove anything: %v", kinds)
		}
	})
}

// paneSet makes panes of stream over a day, two versions of some.
func paneSet(stream string, n int) []event.Pane {
	var ps []event.Pane
	for i := range n {
		start := testStart.Add(time.Duration(i) * 5 * time.Minute)
		p := event.Pane{Stream: stream, Key: fmt.Sprintf("u%d", i%7), WindowStart: start, WindowEnd: start.Add(5 * time.Minute),
			Count: int64(1 + i%4), Sum: float64(i), Min: 0, Max: float64(i), Version: int64(1 + i%2), Timing: "on_time",
			ComputedBy: event.ComputedByBatch, EmittedAt: start.Add(6 * time.Minute)}
		ps = append(ps, p)
	}
	return ps
}

func samePanes(a, b []event.Pane) bool {
	return slices.EqualFunc(a, b, func(x, y event.Pane) bool {
		return x.Stream == y.Stream && x.Key == y.Key && x.WindowStart.Equal(y.WindowStart) && x.WindowEnd.Equal(y.WindowEnd) &&
			x.Count == y.Count && x.Sum == y.Sum && x.Min == y.Min && x.Max == y.Max && x.Version == y.Version && x.Timing == y.Timing
	})
}

// TestTablesUnderFaults: the pane archive (WritePanes), the truth and
// recompute writes (WriteTruth, WriteReport), the Z-report files
// (WriteFile) and the progress files under faults, each write retried until
// it succeeds, and each read (ReadPanes, ReadTruth, ReadReport, ReadFile,
// Files, TopicProgress) retried until it answers: what is read back, through
// the faulty handle and a clean one, is exactly what was written, each pane
// once; no partial file is ever visible.
func TestTablesUnderFaults(t *testing.T) {
	forEachStore(t, func(t *testing.T, opts Options) {
		var log faultLog
		f := errorfs.UniformFaults(23, 3*faultRate) // few calls per write: a higher rate meets every kind
		f.OnFault = log.add
		l, clean := faultLake(t, opts, f)
		ctx := t.Context()
		check := func() { checkVisible(t, clean) }
		from, to := testStart, testStart.Add(24*time.Hour)

		panes := paneSet("payments", 60)
		truth := paneSet("payments", 30)
		report := []byte(`{"stream":"payments","corrected":3}` + "\n")
		const zkey = "zreports/close_date=2026-11-07/0001-2-v1.parquet"
		zdata := []byte("z-report bytes")
		// Every write three times, as activities retried after their
		// write landed do: the same files, the same content.
		for range 3 {
			for i := 0; i < len(panes); i += 20 { // three archive steps, as the pane archive takes them
				retry(t, "WritePanes", func() error {
					_, err := l.WritePanes(ctx, "payments", fmt.Sprintf("payments-0-%d-%d", i, i+19), panes[i:i+20])
					return err
				}, check)
			}
			retry(t, "WriteTruth", func() error { _, err := l.WriteTruth(ctx, "payments", "recompute-1", truth); return err }, check)
			retry(t, "WriteReport", func() error { _, err := l.WriteReport(ctx, "reconcile", "2026-11-07", report); return err }, check)
			retry(t, "WriteFile", func() error {
				_, err := l.WriteFile(ctx, zkey, func(w io.Writer) error { _, err := w.Write(zdata); return err })
				return err
			}, check)
			for p := range int32(3) {
				retry(t, "WriteProgress", func() error {
					_, err := l.WriteProgress(ctx, Progress{Topic: topic, Partition: p, NextOffset: 100 + int64(p), ArchivedThrough: testStart})
					return err
				}, check)
			}
		}
		checkVisible(t, clean)

		for _, h := range []*Lake{l, clean} {
			var gotPanes, gotTruth []event.Pane
			var gotReport, gotZ []byte
			var files []string
			var prog []Progress
			retry(t, "ReadPanes", func() (err error) { gotPanes, err = h.ReadPanes(ctx, "payments", from, to); return err }, nil)
			retry(t, "ReadTruth", func() (err error) { gotTruth, err = h.ReadTruth(ctx, "payments", from, to); return err }, nil)
			retry(t, "ReadReport", func() (err error) { gotReport, err = h.ReadReport(ctx, "reconcile", "2026-11-07"); return err }, nil)
			retry(t, "ReadFile", func() (err error) { gotZ, err = h.ReadFile(ctx, zkey); return err }, nil)
			retry(t, "Files", func() (err error) { files, err = h.Files(ctx, "zreports/close_date=2026-11-07"); return err }, nil)
			retry(t, "TopicProgress", func() (err error) { prog, err = h.TopicProgress(ctx, topic); return err }, nil)
			sortPanes(gotPanes)
			sortPanes(gotTruth)
			if want := sortPanes(slices.Clone(panes)); !samePanes(gotPanes, want) {
				t.Errorf("panes read back: %d, want the %d written, each once", len(gotPanes), len(want))
			}
			if want := sortPanes(slices.Clone(truth)); !samePanes(gotTruth, want) {
				t.Errorf("truth read back: %d, want the %d written, each once", len(gotTruth), len(want))
			}
			if string(gotReport) != string(report) || string(gotZ) != string(zdata) {
				t.Errorf("report %q, Z-report %q: not what was written", gotReport, gotZ)
			}
			if !slices.Equal(files, []string{"0001-2-v1.parquet"}) {
				t.Errorf("Z-report files: %q", files)
			}
			if len(prog) != 3 || prog[0].NextOffset != 100 || prog[2].NextOffset != 102 {
				t.Errorf("progress read back: %+v", prog)
			}
		}
		kinds := log.kinds()
		t.Logf("faults injected %d: %v", l.FaultsInjected(), kinds)
		if kinds[errorfs.FaultError] == 0 || kinds[errorfs.FaultLost] == 0 || kinds[errorfs.FaultTimeout] == 0 {
			t.Errorf("the writes and reads met too few kinds of fault to prove anything: %v", kinds)
		}
	})
}

func sortPanes(ps []event.Pane) []event.Pane {
	slices.SortFunc(ps, func(a, b event.Pane) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		if c := a.WindowStart.Compare(b.WindowStart); c != 0 {
			return c
		}
		return cmpInt64(a.Version, b.Version)
	})
	return ps
}

// TestReaderUnderFaults: queries (Aggregate, Scan, RawHours, List) on a
// lake of several files whose storage fails, stalls and cuts reads short:
// every attempt either fails with an error naming the injected fault or
// returns exactly the answer of a clean read, never a different one.
func TestReaderUnderFaults(t *testing.T) {
	forEachStore(t, func(t *testing.T, opts Options) {
		seed := mustOpen(t, opts)
		for i := range 6 {
			if _, err := seed.WriteRaw(t.Context(), topic, int32(i%2), int64(i*500), int64(i*500+499), genRows(500, 3, 20, int32(i%2), int64(i*500), uint64(i))); err != nil {
				t.Fatal(err)
			}
		}
		q := Query{Topic: topic, From: testStart, To: testStart.Add(3 * time.Hour)}
		want, _, err := seed.Aggregate(t.Context(), q, 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		var log faultLog
		f := &errorfs.Faults{Seed: 5, OnFault: log.add}
		for _, op := range []storage.Op{storage.OpOpen, storage.OpRead, storage.OpList} {
			for _, k := range []errorfs.FaultKind{errorfs.FaultError, errorfs.FaultTimeout, errorfs.FaultLost, errorfs.FaultLatency} {
				f.Rules = append(f.Rules, errorfs.FaultRule{Op: op, Kind: k, Rate: 0.001})
			}
		}
		f.Rules = append(f.Rules, errorfs.FaultRule{Op: storage.OpRead, Kind: errorfs.FaultShortRead, Rate: 0.002})
		l, _ := faultLake(t, opts, f)

		var ok, failed int
		for range 12 {
			got, _, err := l.Aggregate(t.Context(), q, 5*time.Minute)
			if err != nil {
				if !errors.Is(err, errorfs.ErrInjected) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, os.ErrDeadlineExceeded) && !strings.Contains(err.Error(), "injected") {
					t.Errorf("a failed query does not name the fault: %v", err)
				}
				if errors.Is(err, ErrBadFile) {
					t.Errorf("a storage failure is reported as a bad file: %v", err)
				}
				failed++
				continue
			}
			ok++
			if !slices.Equal(got, want) {
				t.Fatalf("a query under faults returned a different answer: %d windows, want %d", len(got), len(want))
			}
		}
		var rows int64
		retry(t, "Scan", func() error {
			rows = 0
			_, err := l.Scan(t.Context(), q, ColKafkaOffset, func(*RawRow) error { rows++; return nil })
			return err
		}, nil)
		if rows != 3000 {
			t.Errorf("scan under faults: %d rows, want 3000", rows)
		}
		var hours []time.Time
		retry(t, "RawHours", func() (err error) { hours, err = l.RawHours(t.Context(), topic, q.From, q.To); return err }, nil)
		if len(hours) != 3 {
			t.Errorf("raw hours under faults: %v", hours)
		}
		var inv Inventory
		retry(t, "List", func() (err error) { inv, err = l.List(t.Context()); return err }, nil)
		t.Logf("queries: %d answered, %d failed; faults injected %d: %v", ok, failed, l.FaultsInjected(), log.kinds())
		if failed == 0 || ok == 0 {
			t.Errorf("queries: %d answered, %d failed: want both, or the test proves nothing", ok, failed)
		}
		_ = inv
	})
}

// TestFaultKinds: each kind of fault does what it says on every storage:
// a failed write leaves nothing (and the earlier version), a lost answer
// leaves the write done, ENOSPC and timeouts unwrap to what the real
// failure would, and only FaultDenied is permanent.
func TestFaultKinds(t *testing.T) {
	forEachStore(t, func(t *testing.T, opts Options) {
		opts.Retry = fastRetry // every call draws the fault: the retries give up
		const key = "reports/k/file.json"
		always := func(op storage.Op, k errorfs.FaultKind) *errorfs.Faults {
			return &errorfs.Faults{Rules: []errorfs.FaultRule{{Op: op, Kind: k, Rate: 1}}, Timeout: 20 * time.Millisecond, Latency: time.Millisecond}
		}
		write := func(l *Lake, s string) error {
			_, err := l.WriteFile(t.Context(), key, func(w io.Writer) error { _, err := io.WriteString(w, s); return err })
			return err
		}
		clean := mustOpen(t, opts)
		if err := write(clean, "v1"); err != nil {
			t.Fatal(err)
		}
		content := func() string {
			b, err := clean.ReadFile(t.Context(), key)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		for _, tc := range []struct {
			kind   errorfs.FaultKind
			wantIs error
			landed bool
		}{
			{errorfs.FaultError, errorfs.ErrInjected, false},
			{errorfs.FaultTimeout, os.ErrDeadlineExceeded, false},
			{errorfs.FaultNoSpace, syscall.ENOSPC, false},
			{errorfs.FaultDenied, fs.ErrPermission, false},
			{errorfs.FaultLatency, nil, true},
			{errorfs.FaultLost, errorfs.ErrInjected, true},
		} {
			o := opts
			o.Wrap = always(storage.OpPut, tc.kind).Wrap
			l := mustOpen(t, o)
			want := "v1"
			if tc.landed {
				want = "v-" + string(tc.kind)
			}
			err := write(l, "v-"+string(tc.kind))
			if tc.wantIs == nil && err != nil || tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("put with %s: %v, want %v", tc.kind, err, tc.wantIs)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("put with %s looks like the caller's deadline: %v", tc.kind, err)
			}
			if got := content(); got != want {
				t.Errorf("after a put with %s the file holds %q, want %q", tc.kind, got, want)
			}
			if storage.IsPermanent(err) != (tc.kind == errorfs.FaultDenied) {
				t.Errorf("put with %s: IsPermanent(%v) = %v", tc.kind, err, storage.IsPermanent(err))
			}
			if tc.landed && tc.wantIs != nil {
				write(clean, "v1")
			}
		}
		checkVisible(t, clean)

		o := opts
		o.Wrap = always(storage.OpReadFile, errorfs.FaultShortRead).Wrap
		if _, err := mustOpen(t, o).ReadFile(t.Context(), key); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("read with a short read: %v, want io.ErrUnexpectedEOF", err)
		}
		o.Wrap = always(storage.OpLock, errorfs.FaultLost).Wrap
		lost := mustOpen(t, o)
		putFile(t, clean, "raw/x/f.parquet", []byte("x")) // a directory to lock
		if _, err := lost.store.LockAs(t.Context(), "raw/x", "taker-1", time.Now(), time.Hour); !errors.Is(err, errorfs.ErrInjected) {
			t.Errorf("lock with a lost answer: %v", err)
		}
		if _, err := clean.store.Lock(t.Context(), "raw/x", time.Now(), time.Hour); err == nil || !strings.Contains(err.Error(), "another compaction") {
			t.Errorf("the lock whose answer was lost is not held: %v", err)
		}
		// Its taker, asking again, recognises the lock as its own.
		unlock, err := clean.store.LockAs(t.Context(), "raw/x", "taker-1", time.Now(), time.Hour)
		if err != nil {
			t.Fatalf("the taker of a lock whose answer was lost cannot take it: %v", err)
		}
		unlock()
		unlock, err = clean.store.Lock(t.Context(), "raw/x", time.Now(), time.Hour)
		if err != nil {
			t.Fatalf("lock after unlock: %v", err)
		}
		unlock()
	})
}

// TestFaultsAreDeterministic: the same seed injects the same faults into
// the same calls, another seed other faults; calls on other keys in
// between do not change which fault a key's n-th call draws.
func TestFaultsAreDeterministic(t *testing.T) {
	run := func(seed uint64, interleave bool) []errorfs.Fault {
		var log faultLog
		f := errorfs.UniformFaults(seed, 0.5)
		f.OnFault, f.Latency, f.Timeout = log.add, time.Microsecond, time.Microsecond
		l := mustOpen(t, Options{Root: t.TempDir(), Wrap: f.Wrap, Retry: storage.RetryOptions{MaxAttempts: 1}})
		for i := range 40 {
			if interleave {
				l.ReadFile(t.Context(), "other/key")
			}
			l.WriteFile(t.Context(), "a/b.json", func(w io.Writer) error { _, err := fmt.Fprint(w, i); return err })
			l.ReadFile(t.Context(), "a/b.json")
			l.Files(t.Context(), "a")
		}
		var out []errorfs.Fault
		for _, f := range log.faults {
			if f.Key != "other/key" {
				out = append(out, f)
			}
		}
		return out
	}
	a, b := run(1, false), run(1, true)
	if len(a) == 0 || !slices.Equal(a, b) {
		t.Errorf("seed 1 twice: %d and %d faults, or different ones", len(a), len(b))
	}
	if c := run(2, false); slices.Equal(a, c) {
		t.Error("seeds 1 and 2 inject the same faults")
	}
}

// TestPermanentStorageErrors: access denied and a bucket that is gone give
// errors IsPermanent reports, on every path, injected or real, so the
// activities fail at once (non-retryable) instead of retrying for hours;
// transient faults never do.
func TestPermanentStorageErrors(t *testing.T) {
	forEachStore(t, func(t *testing.T, opts Options) {
		l := mustOpen(t, opts)
		seedCancelLake(t, l)
		o := opts
		o.Wrap = (&errorfs.Faults{Rules: []errorfs.FaultRule{{Kind: errorfs.FaultDenied, Rate: 1}}}).Wrap
		denied := mustOpen(t, o)
		for _, c := range lakeCalls(t) {
			if err := c.call(t.Context(), denied); !storage.IsPermanent(err) {
				t.Errorf("%s with access denied: %v, want a permanent error", c.name, err)
			}
		}
	})
	t.Run("s3 bucket gone", func(t *testing.T) {
		forEachS3(t, func(t *testing.T, f *s3Server) {
			if f.backend == nil {
				f = newS3WeedBucket(t)
			}
			l := mustOpen(t, f.options())
			seedCancelLake(t, l)
			f.removeBucket(t)
			for _, c := range lakeCalls(t) {
				if err := c.call(t.Context(), l); !storage.IsPermanent(err) {
					t.Errorf("%s with the bucket gone: %v, want a permanent error", c.name, err)
				}
			}
		})
	})
	t.Run("local read-only directory", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root ignores directory permissions")
		}
		root := t.TempDir()
		l := mustOpen(t, Options{Root: root})
		putFile(t, l, "reports/r/x.json", []byte("{}"))
		if err := os.Chmod(filepath.Join(root, "reports", "r"), 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(filepath.Join(root, "reports", "r"), 0o755) })
		if _, err := l.WriteReport(t.Context(), "r", "y", []byte("{}")); !storage.IsPermanent(err) {
			t.Errorf("write into a read-only directory: %v, want a permanent error", err)
		}
	})
	for _, err := range []error{errorfs.ErrInjected, io.ErrUnexpectedEOF, os.ErrDeadlineExceeded, syscall.ENOSPC, context.Canceled} {
		if storage.IsPermanent(fmt.Errorf("lake: x: %w", err)) {
			t.Errorf("IsPermanent(%v) = true", err)
		}
	}
}

// TestReaderDuringFaultyArchive: a query running over and over on a clean
// handle while the archive writes under faults (TestArchiveUnderFaults'
// steps, retries reading wider ranges and superseding narrower files)
// never meets a partial or corrupt file, and the events it counts never
// go down or exceed the valid events archived. It may fail with
// fs.ErrNotExist when a superseded file it listed is removed before it
// opens it: that query is retried like any other.
func TestReaderDuringFaultyArchive(t *testing.T) {
	forEachStore(t, func(t *testing.T, opts Options) {
		l, clean := faultLake(t, opts, errorfs.UniformFaults(11, faultRate))
		w, err := l.NewRawWriter(RawTable{Topic: topic, KeyPath: "data.id_perangkat", ValuePath: "data.suhu_c"}, testGate(t))
		if err != nil {
			t.Fatal(err)
		}
		const n, step = 1000, 40
		recs := archiveRecords(n)
		valid := int64(0)
		for i := range recs {
			if i%7 != 3 {
				valid++
			}
		}
		ctx, cancel := context.WithCancel(t.Context())
		type tally struct {
			ok, gone int
			errs     []error // anything else
			last     int64   // events counted by the last answer
		}
		var tl tally
		done := make(chan struct{})
		go func() {
			defer close(done)
			q := Query{Topic: topic, From: testStart, To: testStart.Add(3 * time.Hour)}
			for ctx.Err() == nil {
				aggs, _, err := clean.Aggregate(ctx, q, 5*time.Minute)
				switch {
				case ctx.Err() != nil:
				case errors.Is(err, fs.ErrNotExist):
					tl.gone++
				case err != nil:
					tl.errs = append(tl.errs, err)
				default:
					tl.ok++
					var events int64
					for _, a := range aggs {
						events += a.Count
					}
					if events < tl.last || events > valid {
						tl.errs = append(tl.errs, fmt.Errorf("an answer counts %d events after one with %d (valid %d)", events, tl.last, valid))
					}
					tl.last = events
				}
			}
		}()
		for next := int64(0); next < n; {
			from, try := next, 0
			retry(t, fmt.Sprintf("archive from %d", from), func() error {
				last := min(from+step-1+int64(try*step/4), n-1)
				try++
				res, err := w.WriteRange(t.Context(), 0, from, last, recs[from:last+1])
				if err != nil {
					return err
				}
				next = res.NextOffset
				return nil
			}, nil)
		}
		cancel()
		<-done
		t.Logf("queries during the archive: %d answered, %d met a superseded file gone", tl.ok, tl.gone)
		for _, err := range tl.errs {
			t.Error(err)
		}
		if tl.ok == 0 {
			t.Error("no query answered during the archive")
		}
	})
}

// fastRetry is the lake's retries with short waits, for tests.
var fastRetry = storage.RetryOptions{InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}
