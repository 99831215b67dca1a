package event

import "time"

// parseRFC3339 parses an RFC 3339 date-time strictly and returns it in UTC:
//
//	YYYY-MM-DD "T" hh:mm:ss [ "." 1-9 digits ] ( "Z" | ("+" | "-") hh:mm )
//
// Unlike time.Parse with time.RFC3339Nano it rejects what RFC 3339 does not
// allow or time.Time cannot hold: a comma before the fraction, more than nine
// fractional digits, offsets of 24h or more, leap seconds. Lowercase 't' and
// 'z' are rejected too, as Go's parser does. It does not allocate.
func parseRFC3339(b []byte) (time.Time, bool) {
	if len(b) < 20 || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
		return time.Time{}, false
	}
	year, ok1 := digits(b[0:4])
	month, ok2 := digits(b[5:7])
	day, ok3 := digits(b[8:10])
	hour, ok4 := digits(b[11:13])
	minute, ok5 := digits(b[14:16])
	sec, ok6 := digits(b[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) ||
		month < 1 || month > 12 || day < 1 || day > daysIn(month, year) ||
		hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	rest := b[19:]
	nsec := 0
	if rest[0] == '.' {
		i := 1
		for i < len(rest) && isDigit(rest[i]) {
			i++
		}
		if i == 1 || i > 10 {
			return time.Time{}, false
		}
		frac, _ := digits(rest[1:i])
		for k := i; k < 10; k++ {
			frac *= 10
		}
		nsec = frac
		rest = rest[i:]
	}
	var offset int
	switch {
	case len(rest) == 1 && rest[0] == 'Z':
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, ok1 := digits(rest[1:3])
		om, ok2 := digits(rest[4:6])
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return time.Time{}, false
		}
		offset = (oh*60 + om) * 60
		if rest[0] == '-' {
			offset = -offset
		}
	default:
		return time.Time{}, false
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)
	if offset != 0 {
		t = t.Add(-time.Duration(offset) * time.Second)
	}
	return t, true
}

// digits parses a short run of ASCII digits.
func digits(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
