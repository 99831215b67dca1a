package badinput

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// Dir is the corpus directory of the source tree this package was built
// from (found from this file's path, so it works from any package's tests).
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "testdata", "badinput")
}

// Case is one line of cases.json.
type Case struct {
	File string `json:"file"`
	What string `json:"what"`
	// Fields is the exact Result.Fields the gate returns for the record, in
	// order; empty for a control the gate accepts.
	Fields []string `json:"fields"`
	// Generate marks a case whose file is a spec of parts (see README.md)
	// rather than the record itself.
	Generate bool `json:"generate"`
}

// Manifest is cases.json; "about" and "rules" are documentation.
type Manifest struct {
	// Dir is where the manifest was read from; Record reads case files
	// relative to it.
	Dir string `json:"-"`
	// Arrival is the arrival time (Kafka record timestamp) the expected
	// fields assume.
	Arrival time.Time `json:"arrival"`
	Cases   []Case    `json:"cases"`
}

// Load reads dir/cases.json. It fails on a manifest without cases or
// arrival.
func Load(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	if err != nil {
		return nil, fmt.Errorf("badinput: %w", err)
	}
	m := &Manifest{Dir: dir}
	if err := json.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("badinput: cases.json: %w", err)
	}
	if len(m.Cases) == 0 || m.Arrival.IsZero() {
		return nil, errors.New("badinput: cases.json: no cases or no arrival")
	}
	return m, nil
}

// Record returns the bytes of case c, generating the large ones from their
// spec: the concatenation of parts, each a text, a text repeated or hex
// bytes repeated.
func (m *Manifest) Record(c Case) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(m.Dir, c.File))
	if err != nil {
		return nil, fmt.Errorf("badinput: %w", err)
	}
	if !c.Generate {
		return b, nil
	}
	var spec struct {
		Parts []struct {
			Text      string `json:"text"`
			Repeat    string `json:"repeat"`
			RepeatHex string `json:"repeat_hex"`
			Times     int    `json:"times"`
		} `json:"parts"`
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		return nil, fmt.Errorf("badinput: %s: %w", c.File, err)
	}
	var out []byte
	for _, p := range spec.Parts {
		unit := []byte(p.Repeat)
		if p.RepeatHex != "" {
			if unit, err = hex.DecodeString(p.RepeatHex); err != nil {
				return nil, fmt.Errorf("badinput: %s: %w", c.File, err)
			}
		}
		if p.Times < 0 {
			return nil, fmt.Errorf("badinput: %s: negative times", c.File)
		}
		out = append(out, p.Text...)
		out = append(out, bytes.Repeat(unit, p.Times)...)
	}
	return out, nil
}
