package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
)

// SettingsDigest identifies the settings that decide which window an event
// lands in and when a window closes: topic, event types, key and value
// fields, window size, out-of-orderness and allowed lateness. The stream
// publishes it with its progress; a batch whose own digest differs must not
// correct the stream's panes with its windows (docs/adr/0015). The
// rolling feature size joins it only when set (docs/adr/0038): a batch
// must not compare served features with truths of another size, and the
// digest of a stream without features stays what it was; so does the
// hop, for hopping streams only (docs/adr/0041). Settings that
// only change when panes are emitted (idle timeout, emit interval) are
// left out.
func (s Stream) SettingsDigest() string {
	types := slices.Clone(s.EventTypes)
	slices.Sort(types)
	b := fmt.Appendf(nil, "v1\x00%s\x00%s\x00%s\x00%s\x00%d\x00%d\x00%d",
		s.Topic, strings.Join(types, ","), s.KeyField, s.ValueField, s.Window, s.OutOfOrderness, s.AllowedLateness)
	if s.Rolling > 0 {
		b = fmt.Appendf(b, "\x00rolling=%d", s.Rolling)
	}
	if s.Hopping() {
		// Hopping streams only, as rolling: a tumbling stream's digest stays
		// the one its published progress carries.
		b = fmt.Appendf(b, "\x00hop=%d", s.Hop)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// Hopping reports whether the stream's windows hop: 0 < Hop < Window.
func (s Stream) Hopping() bool { return s.Hop > 0 && s.Hop < s.Window }

// Step is the distance between window starts: Hop for a hopping stream,
// Window otherwise.
func (s Stream) Step() time.Duration {
	if s.Hopping() {
		return s.Hop
	}
	return s.Window
}
