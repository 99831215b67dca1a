package workers

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The golden files are regenerated with `go test ./workers -run
// TestSimulateGolden -update`. Another test file of this package may own
// the -update flag; register it only if nobody has.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

const simulateDir = "../testdata/simulate"

// simulateCases are the golden runs: input <name>.jsonl, stdout <name>.golden.
var simulateCases = []struct {
	name string
	args []string
}{
	// The fraud-features example (docs/requirements.md R-ROLL-3): 60s rolling
	// features, watermark = max et − 5s, lateness 0.
	{"seed000", []string{"--rolling", "60s", "--out-of-orderness", "5s", "--key", "data.user", "--value", "data.nilai", "--compare"}},
	// The lateness example (docs/requirements.md R-WIN-6 to R-WIN-8): 5-minute
	// windows, 5-minute allowed lateness.
	{"seed001", []string{"--window", "5m", "--allowed-lateness", "5m", "--key", "data.kassa", "--value", "data.summa", "--compare"}},
	// Windows and features together, every kind of invalid line, a duplicate.
	{"edge", []string{"--window", "1m", "--rolling", "30s", "--key", "data.user", "--value", "data.nilai", "--compare"}},
	// The hopping example (docs/requirements.md R-WIN-5a): 5-minute windows
	// advancing every minute, 1-minute lateness; a late event, events late
	// for some of their windows only, a duplicate.
	{"hop000", []string{"--window", "5m", "--hop", "1m", "--allowed-lateness", "1m", "--key", "data.kassa", "--value", "data.summa", "--compare"}},
}

func simulate(t *testing.T, name string, args []string) (stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	full := append([]string{"simulate", "--input", filepath.Join(simulateDir, name+".jsonl")}, args...)
	if code := Main(context.Background(), full, strings.NewReader(""), &out, &errb, nil); code != 0 {
		t.Fatalf("reckon %v: exit %d\n%s", full, code, errb.String())
	}
	return out.String(), errb.String()
}

func TestSimulateGolden(t *testing.T) {
	for _, c := range simulateCases {
		t.Run(c.name, func(t *testing.T) {
			got, _ := simulate(t, c.name, c.args)
			golden := filepath.Join(simulateDir, c.name+".golden")
			if updating() {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s (run with -update after checking):\n%s", golden, simLineDiff(got, string(want)))
			}
			// Same input, same output: the run is deterministic.
			if again, _ := simulate(t, c.name, c.args); again != got {
				t.Error("second run differs")
			}
		})
	}
}

func simLineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return "line " + strconv.Itoa(i+1) + ":\n got " + g[i] + "\nwant " + w[i]
		}
	}
	return "got " + strconv.Itoa(len(g)) + " lines, want " + strconv.Itoa(len(w))
}

// simLine is any output line, decoded loosely for the explicit checks.
type simLine struct {
	Type        string  `json:"type"`
	Key         string  `json:"key"`
	EventID     string  `json:"event_id"`
	EventTime   string  `json:"event_time"`
	Watermark   *string `json:"watermark"`
	Count       int64   `json:"count"`
	Sum         float64 `json:"sum"`
	Min         float64 `json:"min"`
	Max         float64 `json:"max"`
	WindowStart string  `json:"window_start"`
	WindowEnd   string  `json:"window_end"`
	Version     int64   `json:"version"`
	Timing      string  `json:"timing"`
	At          string  `json:"at"`
	Stream      *simAgg `json:"stream"`
	Batch       *simAgg `json:"batch"`
	Match       *bool   `json:"match"`
	Events      int     `json:"events"`
	Accepted    int     `json:"accepted"`
	Late        int     `json:"late"`
	Duplicates  int     `json:"duplicates"`
	Invalid     int     `json:"invalid"`
	raw         string
}

type simAgg struct {
	Count int64   `json:"count"`
	Sum   float64 `json:"sum"`
}

func simParse(t *testing.T, out string) []simLine {
	t.Helper()
	var ls []simLine
	for _, s := range strings.Split(strings.TrimSpace(out), "\n") {
		var l simLine
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("line %q: %v", s, err)
		}
		l.raw = s
		ls = append(ls, l)
	}
	return ls
}

func simOfType(ls []simLine, typ string) []simLine {
	var r []simLine
	for _, l := range ls {
		if l.Type == typ {
			r = append(r, l)
		}
	}
	return r
}

// TestSimulateSeed000 checks the golden run against the fraud-features
// table (docs/requirements.md R-ROLL-3),
// so the golden file cannot silently encode a wrong answer.
func TestSimulateSeed000(t *testing.T) {
	out, _ := simulate(t, "seed000", simulateCases[0].args)
	ls := simParse(t, out)
	at := func(s int) string { return "2026-11-07T12:" + simTwo(s/60) + ":" + simTwo(s%60) + "Z" }
	// The fraud-features table: et, user, wm (-1: none), count_60s, sum_60s.
	table := []struct {
		et    int
		user  string
		wm    int
		count int64
		sum   float64
	}{
		{10, "Budi", -1, 1, 120000}, {18, "Siti", 5, 1, 75000}, {25, "Budi", 13, 2, 330000},
		{33, "Dewi", 20, 1, 45000}, {40, "Siti", 28, 2, 195000}, {48, "Budi", 35, 3, 405000},
		{55, "Dewi", 43, 2, 395000}, {60, "Siti", 50, 3, 240000}, {70, "Budi", 55, 3, 405000},
		{78, "Dewi", 65, 3, 605000},
		// et=52 Budi: DIBUANG at wm=73 (checked below)
		{90, "Siti", 73, 3, 375000}, {95, "Dewi", 85, 3, 635000}, {99, "Budi", 90, 3, 240000},
	}
	features := simOfType(ls, "feature")
	if len(features) != len(table) {
		t.Fatalf("%d features, want %d", len(features), len(table))
	}
	for i, w := range table {
		f := features[i]
		if f.Key != w.user || f.EventTime != at(w.et) || f.Count != w.count || f.Sum != w.sum {
			t.Errorf("feature %d: %s\nwant %s et=%s count=%d sum=%v", i, f.raw, w.user, at(w.et), w.count, w.sum)
		}
		if (w.wm < 0) != (f.Watermark == nil) || (w.wm >= 0 && *f.Watermark != at(w.wm)) {
			t.Errorf("feature %d: watermark in %s, want %d", i, f.raw, w.wm)
		}
	}
	late := simOfType(ls, "late")
	if len(late) != 1 || late[0].Key != "Budi" || late[0].EventTime != at(52) || *late[0].Watermark != at(73) {
		t.Errorf("late lines %+v, want Budi et=52 at wm=73", late)
	}
	// The late line comes where the fraud-features table prints DIBUANG
	// (dropped): after Dewi et=78.
	for i, l := range ls {
		if l.Type == "late" && (ls[i-1].EventTime != at(78) || ls[i+1].EventTime != at(90)) {
			t.Errorf("late line out of order at line %d", i+1)
		}
	}
	want := map[string][5]float64{ // stream count, sum, batch count, sum, match
		"Budi": {3, 240000, 4, 590000, 0},
		"Dewi": {3, 635000, 3, 635000, 1},
		"Siti": {3, 375000, 3, 375000, 1},
	}
	cmp := simOfType(ls, "compare")
	if len(cmp) != 3 {
		t.Fatalf("compare rows %d, want 3", len(cmp))
	}
	for _, c := range cmp {
		w := want[c.Key]
		if c.Stream == nil || c.Batch == nil || c.Match == nil ||
			float64(c.Stream.Count) != w[0] || c.Stream.Sum != w[1] || float64(c.Batch.Count) != w[2] || c.Batch.Sum != w[3] || *c.Match != (w[4] == 1) {
			t.Errorf("compare %s, want %v", c.raw, w)
		}
	}
	if cmp[0].Key != "Budi" || cmp[0].At != at(99) {
		t.Errorf("first compare row %s, want Budi at 12:01:39", cmp[0].raw)
	}
	tot := ls[len(ls)-1]
	if tot.Type != "totals" || tot.Events != 14 || tot.Accepted != 13 || tot.Late != 1 || tot.Duplicates != 0 || tot.Invalid != 0 {
		t.Errorf("totals %s", tot.raw)
	}
	if len(simOfType(ls, "pane")) != 0 {
		t.Error("panes without --window")
	}
}

func simTwo(n int) string { return string([]byte{byte('0' + n/10), byte('0' + n%10)}) }

// TestSimulateSeed001 checks the lateness example (docs/requirements.md
// R-WIN-6 to R-WIN-8): the 09:55–10:00 window fires
// on time, the 09:58 payment arriving before wm 10:05 fires a late pane
// version 2, the 09:59 one arriving after wm ≥ 10:05 goes to the late
// output, and the recompute shows what the stream missed.
func TestSimulateSeed001(t *testing.T) {
	out, _ := simulate(t, "seed001", simulateCases[1].args)
	ls := simParse(t, out)
	const w955, w1000 = "2026-11-07T09:55:00Z", "2026-11-07T10:00:00Z"
	var k1 []simLine
	for _, p := range simOfType(ls, "pane") {
		if p.Key == "kassa-1" && p.WindowStart == w955 {
			k1 = append(k1, p)
		}
	}
	if len(k1) != 2 {
		t.Fatalf("kassa-1 09:55 panes: %+v", k1)
	}
	if p := k1[0]; p.Timing != "on_time" || p.Version != 1 || p.Count != 2 || p.Sum != 300 || p.WindowEnd != w1000 {
		t.Errorf("on-time pane %s", p.raw)
	}
	if p := k1[1]; p.Timing != "late" || p.Version != 2 || p.Count != 3 || p.Sum != 800 || p.Min != 100 || p.Max != 500 {
		t.Errorf("late pane %s", p.raw)
	}
	late := simOfType(ls, "late")
	if len(late) != 1 || late[0].EventTime != "2026-11-07T09:59:00Z" || *late[0].Watermark != "2026-11-07T10:05:00Z" {
		t.Errorf("late lines %+v", late)
	}
	for _, c := range simOfType(ls, "compare") {
		if c.Key == "kassa-1" && c.WindowStart == w955 {
			if c.Stream.Count != 3 || c.Stream.Sum != 800 || c.Batch.Count != 4 || c.Batch.Sum != 1799 || *c.Match {
				t.Errorf("compare %s", c.raw)
			}
		} else if !*c.Match {
			t.Errorf("compare %s should match", c.raw)
		}
	}
	if tot := ls[len(ls)-1]; tot.Events != 8 || tot.Accepted != 7 || tot.Late != 1 {
		t.Errorf("totals %s", tot.raw)
	}
}

// TestSimulateEdge: every invalid kind is counted and explained on stderr,
// the redelivery is a duplicate, and an event too late for features but
// inside an open window still counts in that window.
func TestSimulateEdge(t *testing.T) {
	out, errs := simulate(t, "edge", simulateCases[2].args)
	ls := simParse(t, out)
	tot := ls[len(ls)-1]
	if tot.Events != 16 || tot.Accepted != 4 || tot.Late != 1 || tot.Duplicates != 1 || tot.Invalid != 10 {
		t.Errorf("totals %s", tot.raw)
	}
	diag := strings.Split(strings.TrimSpace(errs), "\n")
	if len(diag) != 10 {
		t.Errorf("stderr has %d lines, want one per invalid line:\n%s", len(diag), errs)
	}
	for i, n := range []string{"4", "5", "6", "7", "8", "9", "10", "11", "12", "13"} {
		if i < len(diag) && !strings.Contains(diag[i], "line "+n+": invalid") {
			t.Errorf("stderr line %d = %q, want line %s", i, diag[i], n)
		}
	}
	if f := simOfType(ls, "feature"); len(f) != 3 {
		t.Errorf("features %d, want 3 (a@50, b@70, a@75)", len(f))
	}
	on := simOfType(ls, "pane")[0]
	if on.Key != "a" || on.Timing != "on_time" || on.Count != 2 || on.Sum != 3 {
		t.Errorf("first pane %s: want a's [12:00,12:01) with the feature-late event", on.raw)
	}
}

func TestSimulateUsage(t *testing.T) {
	for _, args := range [][]string{
		{"simulate"},
		{"simulate", "--input", "x.jsonl", "--key", "data.k"},
		{"simulate", "--input", "x.jsonl", "--key", "data.k", "--value", "data.v", "--window", "-5m"},
	} {
		var out, errb bytes.Buffer
		if code := Main(context.Background(), args, strings.NewReader(""), &out, &errb, nil); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errb.String())
		}
	}
	// stdin input, empty: just the totals.
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"simulate", "--input", "-", "--key", "data.k", "--value", "data.v", "--window", "1m"},
		strings.NewReader("\n\n"), &out, &errb, nil)
	if code != 0 || out.String() != `{"type":"totals","events":0,"accepted":0,"late":0,"duplicates":0,"invalid":0}`+"\n" {
		t.Errorf("empty stdin: exit %d out %q err %q", code, out.String(), errb.String())
	}
}

// TestSimulateHop000 checks the hopping golden run against the example's
// windows 12:00–12:05, 12:01–12:06 and 12:02–12:07, worked out by hand from
// the definition (an event counts in each window starting in (et − 5m, et]):
// K1's events are 12:00:30 (1), 12:01:30 (2), 12:02:30 (4), 12:06:10 (8),
// then at watermark 12:06:10 12:00:45 (16; late: its windows end by 12:05
// and are purged), 12:01:05 (32) and 12:03:00 (64).
func TestSimulateHop000(t *testing.T) {
	c := simulateCases[3]
	if c.name != "hop000" {
		t.Fatalf("simulateCases[3] is %s", c.name)
	}
	out, _ := simulate(t, c.name, c.args)
	ls := simParse(t, out)
	type fig struct{ count, sum, bcount, bsum float64 }
	want := map[string]fig{
		// 1+2+4 fired on time and was purged before 16, 32 and 64 came.
		"12:00": {3, 7, 6, 119},
		// 2+4 on time, then 32 and 64 as late panes (versions 2 and 3).
		"12:01": {4, 102, 4, 102},
		// 4+8+64, on time.
		"12:02": {3, 76, 3, 76},
	}
	seen := 0
	for _, l := range simOfType(ls, "compare") {
		if l.Key != "K1" {
			continue
		}
		start := strings.TrimSuffix(strings.TrimPrefix(l.WindowStart, "2026-11-07T"), ":00Z")
		w, ok := want[start]
		if !ok {
			continue
		}
		seen++
		if l.WindowEnd[11:16] != fmt.Sprintf("12:%02d", 5+seen-1) {
			t.Errorf("window %s ends %s", start, l.WindowEnd)
		}
		if float64(l.Stream.Count) != w.count || l.Stream.Sum != w.sum || float64(l.Batch.Count) != w.bcount || l.Batch.Sum != w.bsum {
			t.Errorf("window %s: %s, want stream %v/%v batch %v/%v", start, l.raw, w.count, w.sum, w.bcount, w.bsum)
		}
	}
	if seen != 3 {
		t.Fatalf("%d of the example's windows compared, want 3", seen)
	}
	var versions []int64
	for _, l := range simOfType(ls, "pane") {
		if l.Key == "K1" && l.WindowStart == "2026-11-07T12:01:00Z" {
			versions = append(versions, l.Version)
		}
	}
	if fmt.Sprint(versions) != "[1 2 3]" {
		t.Errorf("12:01–12:06 panes versions %v, want [1 2 3]", versions)
	}
	tot := simOfType(ls, "totals")[0]
	if tot.Events != 10 || tot.Accepted != 8 || tot.Late != 1 || tot.Duplicates != 1 {
		t.Errorf("totals %s", tot.raw)
	}
}
