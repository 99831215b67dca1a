package lake

import (
	"slices"
	"testing"
	"time"

	"reckon/lake/storage"
	"reckon/lake/storage/errorfs"
)

// Compaction under injected storage faults: kept apart from
// faultstore_test.go so changes to Compact merge on their own.

// TestCompactUnderFaults: Compact of an hour of many small files under
// faults at faultRate, retried until it succeeds. After every failed
// attempt every visible file reads back whole and a query returns the
// answer it gave before compaction (inputs and output may stand side by
// side; the reader counts each event once); at the end each offset is in
// exactly one file: the hour's 600 rows compacted as closed into one
// file (docs/adr/0018-continuous-compaction.md). The lake retries each
// storage call once (Retry.MaxAttempts 2), so a call drawing two faults in
// a row fails the attempt, and a lock whose answer was lost is taken by
// the lake's retry as its own (the lock names its taker): the clock stays
// the real one, no attempt waits TempMaxAge for a lock it holds itself.
func TestCompactUnderFaults(t *testing.T) {
	forEachStore(t, func(t *testing.T, opts Options) {
		opts.Retry = storage.RetryOptions{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}
		var log faultLog
		f := errorfs.UniformFaults(33, 5*faultRate) // a compaction makes few calls: a higher rate fails some twice in a row
		f.OnFault = log.add
		l, clean := faultLake(t, opts, f)
		const files, per = 12, 50
		for i := range files {
			p := int32(i % 2)
			first := int64(i/2) * per
			if _, err := clean.WriteRaw(t.Context(), topic, p, first, first+per-1, genRows(per, 1, 8, p, first, uint64(i))); err != nil {
				t.Fatal(err)
			}
		}
		q := Query{Topic: topic, From: testStart, To: testStart.Add(time.Hour)}
		want, _, err := clean.Aggregate(t.Context(), q, 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		sameAnswer := func(when string) {
			got, _, err := clean.Aggregate(t.Context(), q, 5*time.Minute)
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("%s: query answers %d windows (%v), want the %d of before", when, len(got), err, len(want))
			}
		}
		attempts := retry(t, "Compact", func() error {
			_, err := l.Compact(t.Context(), topic, testStart)
			return err
		}, func() {
			checkVisible(t, clean)
			sameAnswer("after a failed compaction")
		})
		checkVisible(t, clean)
		sameAnswer("after compaction")
		for p := range int32(2) {
			seen := archivedOffsets(t, clean, p)
			for o := range int64(files / 2 * per) {
				if seen[o] != 1 {
					t.Errorf("partition %d offset %d in %d files, want 1", p, o, seen[o])
				}
			}
		}
		if got := dirNames(t, clean, rawHourKey(topic, testStart)); len(visibleFiles(entriesOf(got), ".parquet")) != 1 {
			t.Errorf("hour after compaction holds %q, want one file (closed hour, under max rows)", got)
		}
		t.Logf("compacted in %d attempts; faults injected %d: %v", attempts, l.FaultsInjected(), log.kinds())
		if attempts < 2 {
			t.Errorf("compaction met no failing fault in %d attempt(s): the test proves nothing (seed %d)", attempts, f.Seed)
		}
	})
}

func entriesOf(names []string) []storage.Entry {
	es := make([]storage.Entry, len(names))
	for i, n := range names {
		es[i] = storage.Entry{Name: n}
	}
	return es
}
