// Package numfmt formats numbers for people: plain notation (never
// 2.9745e+06) with the thousands grouped (2,974,500), for table output of
// the CLI and the details of workflows in the Temporal UI. Machine formats
// (CSV, JSON, Arrow) keep the exact values and do not use it.
package numfmt

import (
	"math"
	"strconv"
	"strings"
)

// Float formats v in plain notation with the shortest digits that read
// back as v, the integer part grouped by thousands with commas:
// 2974500 → "2,974,500", 1234.5 → "1,234.5", 1e-7 → "0.0000001". NaN and
// the infinities print as strconv does.
func Float(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return group(strconv.FormatFloat(v, 'f', -1, 64))
}

// Fixed formats v with exactly prec decimals, grouped: Fixed(2974500, 2)
// is "2,974,500.00".
func Fixed(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return group(strconv.FormatFloat(v, 'f', prec, 64))
}

// Int formats v grouped by thousands: 2974500 → "2,974,500".
func Int(v int64) string { return group(strconv.FormatInt(v, 10)) }

// Uint formats v grouped by thousands.
func Uint(v uint64) string { return group(strconv.FormatUint(v, 10)) }

// group inserts commas into the integer part of a plain decimal number.
func group(s string) string {
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	intPart, frac := s, ""
	if i := strings.IndexByte(s, '.'); i >= 0 {
		intPart, frac = s[:i], s[i:]
	}
	if len(intPart) <= 3 {
		return sign + s
	}
	var b strings.Builder
	b.Grow(len(s) + len(intPart)/3 + 1)
	b.WriteString(sign)
	head := len(intPart) % 3
	if head > 0 {
		b.WriteString(intPart[:head])
	}
	for i := head; i < len(intPart); i += 3 {
		if b.Len() > len(sign) {
			b.WriteByte(',')
		}
		b.WriteString(intPart[i : i+3])
	}
	b.WriteString(frac)
	return b.String()
}
