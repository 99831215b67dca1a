package workflows

import (
	"slices"
	"strings"
	"testing"
	"time"

	sdkpb "go.temporal.io/api/sdk/v1"

	"reckon/zreport"
)

// TestZReportDetailsNameMissingAndDifferences: the entity's details in the
// Temporal UI name the missing source while it waits (no "missing []"),
// and once final a table names each differing figure with both values and
// the difference, as `reckon zreport show` prints them.
func TestZReportDetailsNameMissingAndDifferences(t *testing.T) {
	z := newZEnv(t, "http://127.0.0.1:1")
	z.signalAt(time.Minute, zPart(zreport.OFD, "o", 120, 2974500.5))
	z.signalAt(2*time.Minute, zPart(zreport.DWH, "d", 120, 2974500.5))
	z.signalAt(3*time.Minute, zPart(zreport.RMS, "r", 119, 2973500))
	details := func() string {
		v, err := z.QueryWorkflow("__temporal_workflow_metadata")
		if err != nil {
			t.Errorf("metadata query: %v", err)
			return ""
		}
		var md sdkpb.WorkflowMetadata
		if err := v.Get(&md); err != nil {
			t.Errorf("metadata: %v", err)
		}
		return md.GetCurrentDetails()
	}
	var waiting, final string
	z.RegisterDelayedCallback(func() { waiting = details() }, 150*time.Second)
	z.RegisterDelayedCallback(func() { final = details() }, 5*time.Minute)
	z.run(t, ZReportInput{ClosedHint: zClosed})

	lines := strings.Split(waiting, "\n")
	if !strings.Contains(lines[0], "waiting for RMS; present OFD, DWH") || strings.Contains(waiting, "[]") {
		t.Errorf("details while RMS is missing:\n%s", waiting)
	}
	if !slices.Contains(lines, "- RMS: **missing**") || !slices.Contains(lines, "- OFD: 120 receipts, total 2,974,500.50 (duplicates 0, corrections 0)") {
		t.Errorf("details while RMS is missing, one line per source:\n%s", waiting)
	}
	lines = strings.Split(final, "\n")
	if !strings.Contains(lines[0], "mismatched v1") || strings.Contains(lines[0], "missing") {
		t.Errorf("final details' first line: %q", lines[0])
	}
	for _, want := range []string{
		"| differs | source | value | reference | value | delta |",
		"| receipts_count | RMS | 119 | OFD | 120 | -1 |",
		"| total_amount | RMS | 2,973,500 | OFD | 2,974,500.5 | -1,000.5 |",
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("final details lack the line %q:\n%s", want, final)
		}
	}
}
