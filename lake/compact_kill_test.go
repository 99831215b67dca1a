package lake

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"reckon/lake/storage"
)

// Environment of the killed compaction's child process.
const (
	envKillChild = "LAKE_TEST_KILL_CHILD"  // "1" in the child
	envKillRoot  = "LAKE_TEST_KILL_ROOT"   // the lake root (a directory or s3://)
	envKillS3    = "LAKE_TEST_KILL_S3"     // the S3 server's URL, for an s3:// root
	envKillS3Key = "LAKE_TEST_KILL_S3_KEY" // its access key id and secret, "id:secret"
	envKillAt    = "LAKE_TEST_KILL_AT"     // "<n>" or "<n>mid": where the child kills itself
)

// killMaxRows makes the killed compaction write several files.
const killMaxRows = 6_000

// TestCompactKilled: a closed hour's compaction SIGKILLed at any point
// leaves a lake that reads every event exactly once, loses no offset, and
// that the next compaction finishes with every offset exactly once in raw
// or raw_dropped, on a directory, on the S3 fake and on the real S3 server.
//
// The compaction runs in a child process that SIGKILLs itself at the n-th
// storage mutation (the lock, a file written, inputs removed, the unlock),
// either before it starts or in its middle (part of a file's bytes
// written; half of the removals done), for every n until a run completes.
// The lake's durable state changes only at those mutations, so this visits
// every state a kill at a random time can leave, and the interrupted writes
// besides.
func TestCompactKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process per kill point")
	}
	for _, store := range []string{"local", "s3", "s3-weed"} {
		t.Run(store, func(t *testing.T) {
			var f *s3Server
			switch store {
			case "s3":
				f = newS3Fake(t)
			case "s3-weed":
				f = newS3Weed(t)
			}
			for i := 1; ; i++ {
				done := false
				for _, mid := range []bool{false, true} {
					at := strconv.Itoa(i)
					if mid {
						at += "mid"
					}
					opts := Options{Root: t.TempDir()}
					if f != nil {
						opts = f.options()
						opts.Root += "/kill-" + at
					}
					if killedCompaction(t, f, opts, at) {
						done = true
					}
				}
				if done {
					if i < 8 {
						t.Fatalf("the compaction made only %d storage mutations; the seed is too small to test", i-1)
					}
					return
				}
			}
		})
	}
}

// killedCompaction seeds a lake at opts, runs the child compaction killed
// at at, and checks the lake after the kill and after a rerun. It reports
// whether the child finished without being killed.
func killedCompaction(t *testing.T, f *s3Server, opts Options, at string) (finished bool) {
	t.Helper()
	ctx := context.Background()
	l := mustOpen(t, opts)
	var all, redelivered []RawRow
	for p := int32(0); p < 3; p++ {
		rows := genRows(8_000, 1, 20, p, 0, 100+uint64(p))
		for lo := 0; lo < len(rows); lo += 1000 {
			if _, err := l.WriteRaw(ctx, topic, p, int64(lo), int64(lo+999), rows[lo:lo+1000]); err != nil {
				t.Fatal(err)
			}
		}
		all = append(all, rows...)
		redelivered = append(redelivered, redeliver(rows, 40, 3, int64(len(redelivered)), time.Second)...)
	}
	if _, err := l.WriteRaw(ctx, topic, 3, 0, int64(len(redelivered)-1), redelivered); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestCompactKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envKillChild+"=1", envKillRoot+"="+opts.Root, envKillAt+"="+at)
	if f != nil {
		cmd.Env = append(cmd.Env, envKillS3+"="+f.url, envKillS3Key+"="+f.key+":"+f.secret)
	}
	out, err := cmd.CombinedOutput()
	killed := false
	if ee, ok := err.(*exec.ExitError); ok {
		ws, _ := ee.Sys().(syscall.WaitStatus)
		killed = ws.Signaled() && ws.Signal() == syscall.SIGKILL
	}
	if err != nil && !killed {
		t.Fatalf("kill at %s: the child failed: %v\n%s", at, err, out)
	}

	// Killed or not: every event read exactly once, no offset lost.
	q := Query{Topic: topic, From: testStart, To: testStart.Add(time.Hour)}
	aggs, st, err := l.Aggregate(ctx, q, 10*time.Minute)
	if err != nil {
		t.Fatalf("kill at %s: the lake does not read: %v", at, err)
	}
	if st.Rows != int64(len(all)) {
		t.Errorf("kill at %s: %d events read, want %d", at, st.Rows, len(all))
	}
	checkAggs(t, aggs, all, 10*time.Minute)
	seen := map[[2]int64]int{}
	if err := l.Offsets(ctx, topic, func(_ string, p int32, o int64) error {
		seen[[2]int64{int64(p), o}]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, r := range append(all[:len(all):len(all)], redelivered...) {
		if seen[[2]int64{int64(r.KafkaPartition), r.KafkaOffset}] == 0 {
			t.Fatalf("kill at %s: offset %d/%d lost", at, r.KafkaPartition, r.KafkaOffset)
		}
	}

	// The next compaction (the killed one's lock is stale by then)
	// finishes the job: each offset once, no duplicate rows.
	l.opts.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if _, err := l.CompactHour(ctx, topic, testStart, CompactOptions{MaxRows: killMaxRows}); err != nil {
		t.Fatalf("kill at %s: rerun: %v", at, err)
	}
	checkCompacted(t, l, q, all, len(all), len(redelivered))
	if n := len(dirNames(t, l, rawHourKey(topic, testStart))); n > (len(all)+killMaxRows-1)/killMaxRows {
		t.Errorf("kill at %s: %d files after the rerun", at, n)
	}
	return !killed
}

// TestCompactKillChild is the child process of TestCompactKilled.
func TestCompactKillChild(t *testing.T) {
	if os.Getenv(envKillChild) != "1" {
		t.Skip("runs as TestCompactKilled's child")
	}
	opts := Options{Root: os.Getenv(envKillRoot)}
	if storage.IsS3Root(opts.Root) {
		key, secret, _ := strings.Cut(os.Getenv(envKillS3Key), ":")
		opts.S3 = storage.S3Options{Endpoint: os.Getenv(envKillS3), Region: "us-east-1", AccessKeyID: key, SecretAccessKey: secret}
	}
	l := mustOpen(t, opts)
	spec := os.Getenv(envKillAt)
	n, err := strconv.Atoi(strings.TrimSuffix(spec, "mid"))
	if err != nil {
		t.Fatalf("%s=%q", envKillAt, spec)
	}
	l.store = &killStore{Store: l.store, at: n, mid: strings.HasSuffix(spec, "mid")}
	if _, err := l.CompactHour(context.Background(), topic, testStart, CompactOptions{MaxRows: killMaxRows}); err != nil {
		t.Fatal(err)
	}
}

// killStore SIGKILLs its process at the at-th storage mutation: before it,
// or with mid in its middle.
type killStore struct {
	storage.Store
	at  int
	mid bool
	n   int
}

func die() {
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// due counts a mutation and reports whether it is the one to die at.
func (k *killStore) due() bool {
	k.n++
	return k.n == k.at
}

func (k *killStore) Put(ctx context.Context, key string, write func(w io.Writer) error) (int64, error) {
	if !k.due() {
		return k.Store.Put(ctx, key, write)
	}
	if !k.mid {
		die()
	}
	return k.Store.Put(ctx, key, func(w io.Writer) error {
		return write(&dieWriter{w: w})
	})
}

// dieWriter dies at its second write: part of the file is written.
type dieWriter struct {
	w      io.Writer
	writes int
}

func (d *dieWriter) Write(p []byte) (int, error) {
	if d.writes++; d.writes == 2 {
		die()
	}
	return d.w.Write(p)
}

func (k *killStore) Remove(ctx context.Context, dir string, names []string) error {
	if !k.due() {
		return k.Store.Remove(ctx, dir, names)
	}
	if k.mid && len(names) > 1 {
		if err := k.Store.Remove(ctx, dir, names[:len(names)/2]); err != nil {
			return err
		}
	}
	die()
	return nil
}

func (k *killStore) RemoveStale(ctx context.Context, dir string, now time.Time, maxAge time.Duration) ([]string, error) {
	if k.due() {
		die()
	}
	return k.Store.RemoveStale(ctx, dir, now, maxAge)
}

func (k *killStore) Lock(ctx context.Context, dir string, now time.Time, maxAge time.Duration) (func(), error) {
	if k.due() {
		die()
	}
	unlock, err := k.Store.Lock(ctx, dir, now, maxAge)
	if err != nil {
		return nil, err
	}
	return func() {
		if k.due() {
			die()
		}
		unlock()
	}, nil
}
