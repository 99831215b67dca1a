package zreport

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// addLines adds every line of the testdata files as a seed.
func addLines(f *testing.F, files ...string) {
	f.Helper()
	for _, name := range files {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		for l := range bytes.SplitSeq(b, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 {
				f.Add(l)
			}
		}
	}
}

// FuzzParseLine feeds ParseLine, the decoder of `reckon zreport simulate`
// parts and of the OFD simulator's documents. Every error wraps
// ErrInvalidPart; a part it returns without error is valid, its key
// round-trips through String and WorkflowID, it applies to a fresh entity
// (the simulator relies on that: "validated by ParseLine; cannot happen"),
// applying it again is a duplicate, and it survives a JSON round trip.
//
//	go test ./zreport -run '^$' -fuzz '^FuzzParseLine$' -fuzztime 60s
func FuzzParseLine(f *testing.F) {
	addLines(f, "simulate_parts.jsonl", "simulate_ofd.jsonl")
	f.Add([]byte(`{"event_id":"x","event_type":"zreport.dwh.computed","occurred_at":"2026-01-01T23:00:00+03:00","data":{"fiscal_drive":"9960440300000001","shift":1,"receipts":0,"total":0,"shift_closed_at":"2026-01-01T23:00:00.5-01:00"},"arrived_at":"2026-01-02T00:00:00Z"}`))
	f.Add([]byte(`{"event_id":"x","event_type":"zreport.part.received","data":{"source":"ofd","fiscal_drive":"9960440300000001","shift":1e3,"receipts_count":9007199254740993,"total_amount":1e308,"shift_closed_at":"9999-12-31T23:59:59Z"}}`))
	f.Add([]byte(`{"event_id":"","data":null}`))
	f.Add([]byte(`{"data":{"shift":-0.0,"total":"1"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, arrived, err := ParseLine(b)
		if err != nil {
			if !errors.Is(err, ErrInvalidPart) {
				t.Fatalf("error does not wrap ErrInvalidPart: %v", err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("ParseLine returned an invalid part: %v", err)
		}
		if !arrived.Equal(p.ArrivedAt) {
			t.Fatalf("arrival %v, part says %v", arrived, p.ArrivedAt)
		}
		for _, s := range []string{p.Key.String(), p.Key.WorkflowID()} {
			if k, err := ParseKey(s); err != nil || k != p.Key {
				t.Fatalf("ParseKey(%q) = %v, %v; want %v", s, k, err, p.Key)
			}
		}
		now := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
		st := New(p.Key, Policy{})
		if out, err := st.Apply(p, now); err != nil || !out.Applied {
			t.Fatalf("a parsed part does not apply: %+v %v", out, err)
		}
		if out, err := st.Apply(p, now.Add(time.Minute)); err != nil || !out.Duplicate {
			t.Fatalf("the same part again is not a duplicate: %+v %v", out, err)
		}
		j, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("marshal %+v: %v", p, err)
		}
		var back Part
		if err := json.Unmarshal(j, &back); err != nil {
			t.Fatalf("unmarshal %s: %v", j, err)
		}
		if back.EventID != p.EventID || back.Source != p.Source || back.Key != p.Key || back.Figures != p.Figures ||
			!back.ShiftClosedAt.Equal(p.ShiftClosedAt) || !back.OccurredAt.Equal(p.OccurredAt) || !back.ArrivedAt.Equal(p.ArrivedAt) {
			t.Fatalf("JSON round trip:\n got %+v\nwant %+v", back, p)
		}
	})
}

// keyForm is what a valid key renders as: workflow ids and lake file names
// are built from it, so it must hold no path element but the one slash.
var keyForm = regexp.MustCompile(`^[0-9]{16}/[1-9][0-9]{0,9}$`)

// FuzzParseKey: a key ParseKey accepts is valid, renders in the one safe
// form, and parses back to itself.
//
//	go test ./zreport -run '^$' -fuzz '^FuzzParseKey$' -fuzztime 60s
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"9960440300000001/142", "zreport/9960440300000001/7", "9960440300000001/+07", "../../etc/passwd/1",
		"9960440300000001/0", "9960440300000001/1000000001", "996044030000000١/1", "zreport/zreport/9960440300000001/1", "9960440300000001/1/2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidPart) {
				t.Fatalf("error does not wrap ErrInvalidPart: %v", err)
			}
			return
		}
		if err := k.Validate(); err != nil {
			t.Fatalf("ParseKey(%q) accepted an invalid key: %v", s, err)
		}
		if !keyForm.MatchString(k.String()) {
			t.Fatalf("key %q renders as %q", s, k.String())
		}
		if k2, err := ParseKey(k.String()); err != nil || k2 != k {
			t.Fatalf("ParseKey(%q) = %v, %v; want %v", k.String(), k2, err, k)
		}
	})
}

// FuzzSimulate runs `reckon zreport simulate` on arbitrary parts and OFD
// documents. Invalid parts are counted, never fatal; only an invalid
// document line fails the run. Every output line is JSON, the last is the
// totals, every input part line is counted once (valid or invalid), every
// key ends final, and the run is deterministic.
//
//	go test ./zreport -run '^$' -fuzz '^FuzzSimulate$' -fuzztime 60s
func FuzzSimulate(f *testing.F) {
	parts, err := os.ReadFile(filepath.Join("testdata", "simulate_parts.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	docs, err := os.ReadFile(filepath.Join("testdata", "simulate_ofd.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(parts, docs)
	f.Add(parts, []byte{})
	f.Add([]byte("not json\n\n  \r\n{}\n"), []byte(""))
	f.Add(parts[:len(parts)/2], []byte(`{"event_type":"zreport.dwh.computed"}`))
	f.Fuzz(func(t *testing.T, parts, docs []byte) {
		var out, errs bytes.Buffer
		tot, err := Simulate(bytes.NewReader(parts), bytes.NewReader(docs), &out, &errs, Policy{})
		if err != nil {
			if !errors.Is(err, ErrInvalidPart) && !errors.Is(err, bufio.ErrTooLong) {
				t.Fatalf("Simulate failed on its input: %v", err)
			}
			return
		}
		var lines int64
		for l := range bytes.SplitSeq(parts, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 {
				lines++
			}
		}
		if tot.Parts+tot.Invalid != lines {
			t.Fatalf("%d part lines, totals count %d parts + %d invalid", lines, tot.Parts, tot.Invalid)
		}
		if tot.Matched+tot.Mismatched+tot.Incomplete != tot.Keys {
			t.Fatalf("not every key is final: %+v", tot)
		}
		outLines := bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n"))
		for _, l := range outLines {
			if !json.Valid(l) {
				t.Fatalf("output line is not JSON: %s", l)
			}
		}
		var last SimTotals
		if err := json.Unmarshal(outLines[len(outLines)-1], &last); err != nil || last != tot {
			t.Fatalf("last line %s, totals %+v (%v)", outLines[len(outLines)-1], tot, err)
		}
		var out2 bytes.Buffer
		if _, err := Simulate(bytes.NewReader(parts), bytes.NewReader(docs), &out2, nil, Policy{}); err != nil || !bytes.Equal(out.Bytes(), out2.Bytes()) {
			t.Fatalf("second run differs (%v)", err)
		}
	})
}
