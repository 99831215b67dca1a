package zreport

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// TestSimulateGolden runs the fixture through Simulate with the default
// policy (day six, 30 days, 24h retry) and compares with the golden output.
// Regenerate with: go test ./zreport -run TestSimulateGolden -update
func TestSimulateGolden(t *testing.T) {
	parts, err := os.Open(filepath.Join("testdata", "simulate_parts.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer parts.Close()
	docs, err := os.Open(filepath.Join("testdata", "simulate_ofd.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer docs.Close()
	var out, errs bytes.Buffer
	tot, err := Simulate(parts, docs, &out, &errs, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "simulate_out.golden.jsonl")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("output differs from %s (run with -update after checking):\n%s", golden, out.String())
	}
	wantTot := SimTotals{Type: "totals", Parts: 19, Duplicates: 2, Invalid: 1, Keys: 6, Matched: 4, Mismatched: 1, Incomplete: 1}
	if tot != wantTot {
		t.Errorf("totals = %+v, want %+v", tot, wantTot)
	}
	if !strings.Contains(errs.String(), "line 7:") || !strings.Contains(errs.String(), "fiscal_drive") {
		t.Errorf("errs = %q", errs.String())
	}

	// Properties that do not depend on the golden file.
	type line struct {
		Type, FiscalDrive, At, Status string
		Shift, Version                int64
		Found                         bool
		Missing                       []string
	}
	var lines []line
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var raw map[string]any
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			t.Fatal(err)
		}
		var l line
		b, _ := json.Marshal(raw)
		_ = json.Unmarshal(b, &struct {
			Type        *string   `json:"type"`
			FiscalDrive *string   `json:"fiscal_drive"`
			At          *string   `json:"at"`
			Status      *string   `json:"status"`
			Shift       *int64    `json:"shift"`
			Version     *int64    `json:"version"`
			Found       *bool     `json:"found"`
			Missing     *[]string `json:"missing"`
		}{&l.Type, &l.FiscalDrive, &l.At, &l.Status, &l.Shift, &l.Version, &l.Found, &l.Missing})
		lines = append(lines, l)
	}
	find := func(drive, typ string) []line {
		var out []line
		for _, l := range lines {
			if l.FiscalDrive == drive && l.Type == typ {
				out = append(out, l)
			}
		}
		return out
	}
	// C: requested on day six, found.
	if r := find("9960440300000003", "ofd_request"); len(r) != 1 || !r[0].Found || r[0].At != "2026-01-07T23:00:00Z" {
		t.Errorf("C requests = %+v", r)
	}
	// D: day six and every 24h while before day 30 → 24 requests, then incomplete.
	if r := find("9960440300000004", "ofd_request"); len(r) != 24 || r[23].At != "2026-01-30T23:00:00Z" {
		t.Errorf("D requests = %d, last %+v", len(r), r[len(r)-1])
	}
	if f := find("9960440300000004", "final"); len(f) != 1 || f[0].Status != "incomplete" || f[0].At != "2026-01-31T23:00:00Z" || strings.Join(f[0].Missing, ",") != "OFD" {
		t.Errorf("D finals = %+v", f)
	}
	// E: incomplete at the retention, version 2 matched when DWH arrives.
	if f := find("9960440300000005", "final"); len(f) != 2 || f[0].Status != "incomplete" || f[1].Version != 2 || f[1].Status != "matched" {
		t.Errorf("E finals = %+v", f)
	}
	if f := find("9960440300000006", "final"); len(f) != 1 || f[0].Status != "mismatched" {
		t.Errorf("F finals = %+v", f)
	}
}

// TestSimulateOverdueTimers: a key whose first part arrives after its
// retention is finalized right away, at the arrival.
func TestSimulateOverdueTimers(t *testing.T) {
	in := `{"event_id":"a","event_type":"zreport.part.received","occurred_at":"2026-01-01T23:00:00Z","arrived_at":"2026-03-01T00:00:00Z","data":{"source":"DWH","fiscal_drive":"9960440300000001","shift":1,"shift_closed_at":"2026-01-01T23:00:00Z","receipts_count":1,"total_amount":1}}`
	var out bytes.Buffer
	if _, err := Simulate(strings.NewReader(in), nil, &out, nil, Policy{OFDRequestAfter: time.Hour, Retention: 2 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	want := `{"type":"state","fiscal_drive":"9960440300000001","shift":1,"at":"2026-03-01T00:00:00Z","present":["DWH"],"missing":["OFD","RMS"]}
{"type":"ofd_request","fiscal_drive":"9960440300000001","shift":1,"at":"2026-03-01T00:00:00Z","found":false}
{"type":"final","fiscal_drive":"9960440300000001","shift":1,"at":"2026-03-01T00:00:00Z","version":1,"status":"incomplete","sources":{"DWH":{"receipts_count":1,"total_amount":1}},"missing":["OFD","RMS"],"duplicates":{"OFD":0,"DWH":0,"RMS":0}}
{"type":"totals","parts":1,"duplicates":0,"invalid":0,"keys":1,"matched":0,"mismatched":0,"incomplete":1}
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}
