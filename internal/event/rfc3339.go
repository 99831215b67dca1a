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
	// Fixed positions, two digits at a time: this runs on every record.
	bad := false
	d2 := func(i int) int {
		hi, lo := b[i]-'0', b[i+1]-'0' // a non-digit wraps above 9
		bad = bad || hi > 9 || lo > 9
		return int(hi)*10 + int(lo)
	}
	year := d2(0)*100 + d2(2)
	month, day := d2(5), d2(8)
	hour, minute, sec := d2(11), d2(14), d2(17)
	if bad ||
		month < 1 || month > 12 || day < 1 || day > daysIn(month, year) ||
		hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	rest := b[19:]
	nsec := 0
	if rest[0] == '.' {
		i := 1
		for i < len(rest) && isDigit(rest[i]) {
			nsec = nsec*10 + int(rest[i]-'0')
			i++
		}
		if i == 1 || i > 10 {
			return time.Time{}, false
		}
		nsec *= int(pow10[10-i]) // i−1 digits given, 9 in a nanosecond count
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
	// time.Unix(…).UTC() is the same value time.Date(…, time.UTC) builds,
	// without its normalisation work: every field is in range here.
	unix := daysSinceEpoch(year, month, day)*86400 + int64(hour*3600+minute*60+sec-offset)
	return time.Unix(unix, int64(nsec)).UTC(), true
}

// daysSinceEpoch counts days from 1970-01-01 to a valid proleptic
// Gregorian date of year 0–9999 (Hinnant's days_from_civil, with years
// starting in March so the leap day comes last).
func daysSinceEpoch(year, month, day int) int64 {
	y := year
	if month <= 2 {
		y--
	}
	y += 400 // year −1 (January 0000 shifted) must not go negative
	era := y / 400
	yoe := y - era*400
	mp := (month + 9) % 12
	doy := (153*mp+2)/5 + day - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era-1)*146097 + int64(doe) - 719468
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
