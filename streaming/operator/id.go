package operator

import "reckon/internal/event"

// EventID is an event's dedup identity: the 16 bytes of its canonical UUID.
// Sixteen bytes instead of the 36-character text keep dedup entries small.
type EventID [16]byte

// ParseEventID parses a lowercase canonical UUID
// (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx), the only form the quality gate lets
// through. It reports false for anything else.
func ParseEventID(s string) (EventID, bool) {
	id, ok := event.ParseUUID(s)
	return EventID(id), ok
}

// String renders id as a lowercase canonical UUID.
func (id EventID) String() string {
	const hexdig = "0123456789abcdef"
	var b [36]byte
	j := 0
	for i, v := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b[j] = '-'
			j++
		}
		b[j] = hexdig[v>>4]
		b[j+1] = hexdig[v&0xf]
		j += 2
	}
	return string(b[:])
}
