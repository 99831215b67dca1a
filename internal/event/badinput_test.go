package event_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"reckon/internal/config"
	"reckon/internal/event"
	"reckon/internal/testing/badinput"
)

var update = flag.Bool("update", false, "rewrite testdata/badinput.golden and the FuzzGate seed corpus from testdata/badinput")

// badInputDir is the repository's bad-input corpus (see its README.md).
var badInputDir = filepath.Join("..", "..", "testdata", "badinput")

type badInputCase = badinput.Case

func loadBadInput(t *testing.T) *badinput.Manifest {
	t.Helper()
	m, err := badinput.Load(badInputDir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// record returns the bytes of a case, generating the large ones.
func record(t *testing.T, m *badinput.Manifest, c badInputCase) []byte {
	t.Helper()
	b, err := m.Record(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBadInput checks every case of the corpus against the gate built from
// the real default configuration, and pins the reasons in
// testdata/badinput.golden (-update rewrites it).
func TestBadInput(t *testing.T) {
	cfg, err := config.Load("", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := event.NewGate(cfg.Gate)
	if err != nil {
		t.Fatal(err)
	}
	m := loadBadInput(t)
	files, _ := filepath.Glob(filepath.Join(badInputDir, "*"))
	listed := map[string]bool{"cases.json": true, "README.md": true}
	var golden bytes.Buffer
	golden.WriteString("# reasons per bad-input case; go test ./internal/event -run BadInput -update rewrites this file\n")
	for _, c := range m.Cases {
		if listed[c.File] {
			t.Errorf("%s listed twice", c.File)
		}
		listed[c.File] = true
		raw := record(t, m, c)
		e, r := g.Check(raw, m.Arrival)
		reasons, _ := json.Marshal(r.Reasons)
		fmt.Fprintf(&golden, "%s\t%s\n", c.File, reasons)
		t.Run(c.File, func(t *testing.T) {
			if r.Valid != (e != nil) || r.Valid != (len(r.Fields) == 0) || len(r.Fields) != len(r.Reasons) {
				t.Fatalf("inconsistent result %+v", r)
			}
			if !slices.Equal(r.Fields, c.Fields) && !(len(c.Fields) == 0 && r.Valid) {
				t.Fatalf("%s (%d bytes): fields %q, want %q\nreasons: %q", c.What, len(raw), r.Fields, c.Fields, r.Reasons)
			}
			for i, reason := range r.Reasons {
				if len(reason) > 512 {
					t.Errorf("reason %d is %d bytes long", i, len(reason))
				}
			}
			d := event.NewDeadLetter(r, "m8-suhu-kejadian", 0, 1, m.Arrival, m.Arrival)
			if !r.Valid && d.Reason == "" {
				t.Errorf("dead letter without a reason")
			}
		})
	}
	for _, f := range files {
		if !listed[filepath.Base(f)] {
			t.Errorf("%s is not listed in cases.json", filepath.Base(f))
		}
	}
	compareGolden(t, filepath.Join("testdata", "badinput.golden"), golden.Bytes())
}

func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Errorf("%s line %d:\n got: %s\nwant: %s", path, i+1, g, w)
			}
		}
		t.Errorf("%s differs (run with -update if the change is intended)", path)
	}
}

// TestFuzzSeedsMatchBadInput keeps the FuzzGate seed corpus equal to the
// committed (not generated) bad-input cases; -update rewrites it.
func TestFuzzSeedsMatchBadInput(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzGate")
	want := map[string][]byte{}
	m := loadBadInput(t)
	for _, c := range m.Cases {
		if c.Generate {
			continue
		}
		name := "badinput-" + strings.TrimSuffix(c.File, filepath.Ext(c.File))
		want[name] = []byte(fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", record(t, m, c)))
	}
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		old, _ := filepath.Glob(filepath.Join(dir, "badinput-*"))
		for _, f := range old {
			if _, ok := want[filepath.Base(f)]; !ok {
				os.Remove(f)
			}
		}
		for name, b := range want {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	have, _ := filepath.Glob(filepath.Join(dir, "badinput-*"))
	if len(have) != len(want) {
		t.Errorf("%d badinput seeds in %s, want %d (run with -update)", len(have), dir, len(want))
	}
	for name, b := range want {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("seed %s is missing or stale (run with -update)", name)
		}
	}
}
