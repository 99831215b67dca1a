package event

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Duration is a time.Duration in JSON for people: it marshals as Go's
// duration string ("6h0m0s", as the Temporal UI then shows workflow inputs)
// and unmarshals that or a JSON number of nanoseconds (what time.Duration
// marshals as), so payloads recorded before the change still decode: a
// workflow history replays, an older caller's input is read. The zero value
// marshals as "0s"; null leaves the value alone.
type Duration time.Duration

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string ("90s", "1h30m") or a number of
// nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("event: duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("event: duration %s: want a string like \"6h\" or nanoseconds", b)
	}
	if i, err := n.Int64(); err == nil {
		*d = Duration(i)
		return nil
	}
	f, err := n.Float64() // 2.16e13 from a client that wrote a float
	if err != nil || f != math.Trunc(f) || math.Abs(f) >= math.MaxInt64 {
		return fmt.Errorf("event: duration %s: not a whole number of nanoseconds", b)
	}
	*d = Duration(int64(f))
	return nil
}
