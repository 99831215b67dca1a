package operator

// EventID is an event's dedup identity: the 16 bytes of its canonical UUID.
// Sixteen bytes instead of the 36-character text keep dedup entries small.
type EventID [16]byte

// ParseEventID parses a lowercase canonical UUID
// (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx), the only form the quality gate lets
// through. It reports false for anything else.
func ParseEventID(s string) (EventID, bool) {
	var id EventID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, false
	}
	j := 0
	for i := 0; i < 36; {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			i++
			continue
		}
		hi, ok1 := unhex(s[i])
		lo, ok2 := unhex(s[i+1])
		if !ok1 || !ok2 {
			return EventID{}, false
		}
		id[j] = hi<<4 | lo
		j++
		i += 2
	}
	return id, true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
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
