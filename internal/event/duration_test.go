package event

import (
	"encoding/json"
	"testing"
	"time"
)

func TestDurationJSON(t *testing.T) {
	b, err := json.Marshal(struct {
		W Duration `json:"w"`
		Z Duration `json:"z"`
	}{W: Duration(6 * time.Hour)})
	if err != nil || string(b) != `{"w":"6h0m0s","z":"0s"}` {
		t.Errorf("marshal: %s, %v", b, err)
	}
	for in, want := range map[string]time.Duration{
		`"6h0m0s"`: 6 * time.Hour, `21600000000000`: 6 * time.Hour, `"90s"`: 90 * time.Second,
		`2.16e13`: 6 * time.Hour, `"0s"`: 0, `0`: 0, `-5`: -5, `"-1m"`: -time.Minute,
	} {
		var d Duration
		if err := json.Unmarshal([]byte(in), &d); err != nil || time.Duration(d) != want {
			t.Errorf("unmarshal %s: %v, %v; want %v", in, time.Duration(d), err, want)
		}
	}
	d := Duration(time.Second)
	if err := json.Unmarshal([]byte("null"), &d); err != nil || d != Duration(time.Second) {
		t.Errorf("null: %v, %v", d, err)
	}
	for _, in := range []string{`"6 hours"`, `1.5`, `true`, `{}`, `1e30`} {
		if err := json.Unmarshal([]byte(in), &d); err == nil {
			t.Errorf("unmarshal %s: no error", in)
		}
	}
}

// FuzzDurationJSON: every duration reads back from its JSON, and from the
// number of nanoseconds time.Duration itself writes.
func FuzzDurationJSON(f *testing.F) {
	f.Add(int64(0))
	f.Add(int64(6 * time.Hour))
	f.Add(int64(-1))
	f.Add(int64(1<<63 - 1))
	f.Fuzz(func(t *testing.T, n int64) {
		for _, form := range []any{Duration(n), time.Duration(n)} {
			b, err := json.Marshal(form)
			if err != nil {
				t.Fatal(err)
			}
			var d Duration
			if err := json.Unmarshal(b, &d); err != nil || int64(d) != n {
				t.Fatalf("%T %d → %s → %d, %v", form, n, b, d, err)
			}
		}
	})
}
