package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// SettingsDigest identifies the settings that decide which window an event
// lands in and when a window closes: topic, event types, key and value
// fields, window size, out-of-orderness and allowed lateness. The stream
// publishes it with its progress; a batch whose own digest differs must not
// correct the stream's panes with its windows (docs/adr/0015). Settings
// that only change when panes are emitted (idle timeout, emit interval,
// rolling features) are left out.
func (s Stream) SettingsDigest() string {
	types := slices.Clone(s.EventTypes)
	slices.Sort(types)
	h := sha256.Sum256(fmt.Appendf(nil, "v1\x00%s\x00%s\x00%s\x00%s\x00%d\x00%d\x00%d",
		s.Topic, strings.Join(types, ","), s.KeyField, s.ValueField, s.Window, s.OutOfOrderness, s.AllowedLateness))
	return hex.EncodeToString(h[:8])
}
