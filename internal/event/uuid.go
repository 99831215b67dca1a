package event

import (
	"encoding/binary"
	"unsafe"
)

// ParseUUID decodes a lowercase canonical UUID (8-4-4-4-12 hex digits,
// the only event_id form the gate accepts) into its 16 bytes. ok is false
// for anything else. It does not allocate.
func ParseUUID(s string) (id [16]byte, ok bool) {
	return parseUUID(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// isUUID reports whether s is a lowercase canonical UUID, 8-4-4-4-12 hex.
func isUUID(s []byte) bool {
	_, ok := parseUUID(s)
	return ok
}

// parseUUID checks and decodes eight hex digits at a time (SWAR): the
// gate runs it on every record.
func parseUUID(s []byte) (id [16]byte, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, false
	}
	le32 := func(b []byte) uint64 { return uint64(binary.LittleEndian.Uint32(b)) }
	n0, ok0 := hexNibbles(binary.LittleEndian.Uint64(s[0:8]))
	n1, ok1 := hexNibbles(le32(s[9:13]) | le32(s[14:18])<<32)
	n2, ok2 := hexNibbles(le32(s[19:23]) | le32(s[24:28])<<32)
	n3, ok3 := hexNibbles(binary.LittleEndian.Uint64(s[28:36]))
	if !(ok0 && ok1 && ok2 && ok3) {
		return id, false
	}
	binary.LittleEndian.PutUint32(id[0:4], packNibbles(n0))
	binary.LittleEndian.PutUint32(id[4:8], packNibbles(n1))
	binary.LittleEndian.PutUint32(id[8:12], packNibbles(n2))
	binary.LittleEndian.PutUint32(id[12:16], packNibbles(n3))
	return id, true
}

const (
	swarOnes  = 0x0101010101010101
	swarHighs = 0x8080808080808080
)

// hexNibbles checks that each byte of x is a lowercase hex digit
// ('0'–'9', 'a'–'f') and returns the digits' values, one per byte.
func hexNibbles(x uint64) (uint64, bool) {
	if x&swarHighs != 0 {
		return 0, false
	}
	// With every byte below 0x80, adding 0x80−lo to each sets its high bit
	// iff the byte is ≥ lo, and carries into no other byte.
	geq := func(lo byte) uint64 { return (x + swarOnes*uint64(0x80-lo)) & swarHighs }
	digit := geq('0') &^ geq('9'+1)
	letter := geq('a') &^ geq('f'+1)
	if digit|letter != swarHighs {
		return 0, false
	}
	// '0'–'9' have their value in the low nibble; 'a'–'f' have 1–6 there.
	return x&(swarOnes*0x0f) + (letter>>7)*9, true
}

// packNibbles packs eight digit values (first digit in the low byte) into
// four bytes, first byte in the low byte.
func packNibbles(n uint64) uint32 {
	const lanes16 = 0x00ff00ff00ff00ff
	w := (n&lanes16)<<4 | (n>>8)&lanes16
	w = (w | w>>8) & 0x0000ffff0000ffff
	return uint32(w | w>>16)
}
