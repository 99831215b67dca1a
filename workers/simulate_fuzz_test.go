package workers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"reckon/streaming/operator"
)

// FuzzSimulate runs `reckon simulate` (its line decoder and the operator)
// on arbitrary JSONL with the window options chosen by sel. A bad line is
// a diagnostic, never an error; every output line is JSON; the totals line
// comes last and accounts every non-blank input line once, as accepted,
// late, duplicate or invalid, with one diagnostic per invalid line; the run
// is deterministic; and when nothing was late, every window's last stream
// pane agrees with the full recompute (--compare).
//
//	go test ./workers -run '^$' -fuzz '^FuzzSimulate$' -fuzztime 60s
func FuzzSimulate(f *testing.F) {
	for _, c := range simulateCases {
		b, err := os.ReadFile(filepath.Join(simulateDir, c.name+".jsonl"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(len(c.name)))
	}
	f.Add([]byte(`{"event_id":"e0e0e0e0-0000-4000-8000-000000000001","occurred_at":"2262-04-11T23:47:16.854775807Z","data":{"user":"a","nilai":1e308},"arrived_at":"1677-09-21T00:12:43.145224192Z"}`+"\n"+
		`{"event_id":"e0e0e0e0-0000-4000-8000-000000000002","occurred_at":"2026-11-07T12:00:45+14:00","data":{"user":"","nilai":-1e308},"arrived_at":"2026-11-07T12:00:51Z"}`), uint8(0))
	f.Fuzz(func(t *testing.T, in []byte, sel uint8) {
		windows := []time.Duration{0, time.Minute, 5 * time.Minute, time.Hour}
		s := simulateOptions{
			opts: operator.Options{
				Window:          windows[sel%4],
				Rolling:         []time.Duration{0, 30 * time.Second}[sel>>2%2],
				OutOfOrderness:  []time.Duration{0, 5 * time.Second}[sel>>3%2],
				AllowedLateness: []time.Duration{0, 5 * time.Minute}[sel>>4%2],
			},
			keyPath: "data.user", valuePath: "data.nilai", compare: true,
		}
		out, diag := runSim(t, s, in)
		lines := bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n"))
		for _, l := range lines {
			if !json.Valid(l) {
				t.Fatalf("output line is not JSON: %q", l)
			}
		}
		var tot totalsLine
		if err := json.Unmarshal(lines[len(lines)-1], &tot); err != nil || tot.Type != "totals" {
			t.Fatalf("last line is not the totals: %s (%v)", lines[len(lines)-1], err)
		}
		var n int
		for l := range bytes.SplitSeq(in, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 {
				n++
			}
		}
		if tot.Events != n || tot.Accepted+tot.Late+tot.Duplicates+tot.Invalid != n {
			t.Fatalf("%d lines, totals %+v", n, tot)
		}
		if got := bytes.Count(diag, []byte("reckon simulate: line ")); got != tot.Invalid {
			t.Fatalf("%d diagnostics for %d invalid lines:\n%s", got, tot.Invalid, diag)
		}
		if again, _ := runSim(t, s, in); !bytes.Equal(again, out) {
			t.Fatal("second run differs")
		}
		if tot.Late > 0 {
			return
		}
		for _, l := range lines {
			var c struct {
				Type      string
				WindowEnd time.Time `json:"window_end"`
				Match     *bool
			}
			// A window ending past the last representable instant (int64
			// nanoseconds, 2262-04-11T23:47:16.854775807Z) is left out: the
			// operator saturates its end, and Truth's "Forever" lateness
			// then purges it at once (reported; streaming/operator).
			if json.Unmarshal(l, &c) == nil && c.Type == "compare" && !c.WindowEnd.IsZero() && !c.WindowEnd.After(lastInstant) && (c.Match == nil || !*c.Match) {
				t.Fatalf("nothing was late, yet a window's stream answer differs from the recompute: %s", l)
			}
		}
	})
}

// lastInstant is the last time the operator represents.
var lastInstant = time.Unix(0, math.MaxInt64)

func runSim(t *testing.T, s simulateOptions, in []byte) (out, diag []byte) {
	t.Helper()
	var o, d bytes.Buffer
	w := bufio.NewWriter(&o)
	if err := s.run(context.Background(), bytes.NewReader(in), w, &d); err != nil {
		t.Fatalf("simulate: %v", err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return o.Bytes(), d.Bytes()
}
