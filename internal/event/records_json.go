package event

import (
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends p as the JSON object published on the summaries topic.
// It produces what encoding/json would for Pane (same field names and
// order, times in RFC 3339 with nanoseconds, UTC) without reflection, since
// panes and features are encoded on the stream's hot path.
func (p *Pane) AppendJSON(b []byte) []byte {
	b = append(b, `{"stream":`...)
	b = appendString(b, p.Stream)
	b = append(b, `,"key":`...)
	b = appendString(b, p.Key)
	b = append(b, `,"window_start":`...)
	b = appendTime(b, p.WindowStart)
	b = append(b, `,"window_end":`...)
	b = appendTime(b, p.WindowEnd)
	b = append(b, `,"count":`...)
	b = strconv.AppendInt(b, p.Count, 10)
	b = append(b, `,"sum":`...)
	b = appendFloat(b, p.Sum)
	b = append(b, `,"min":`...)
	b = appendFloat(b, p.Min)
	b = append(b, `,"max":`...)
	b = appendFloat(b, p.Max)
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, p.Version, 10)
	b = append(b, `,"timing":`...)
	b = appendString(b, string(p.Timing))
	b = append(b, `,"computed_by":`...)
	b = appendString(b, p.ComputedBy)
	b = append(b, `,"watermark":`...)
	b = appendTime(b, p.Watermark)
	b = append(b, `,"emitted_at":`...)
	b = appendTime(b, p.EmittedAt)
	b = append(b, `,"processed_at":`...)
	b = appendTime(b, p.ProcessedAt)
	if p.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendString(b, p.Reason)
	}
	return append(b, '}')
}

// AppendJSON appends f as the JSON object published on the features topic,
// matching encoding/json's rendering of Feature.
func (f *Feature) AppendJSON(b []byte) []byte {
	b = append(b, `{"stream":`...)
	b = appendString(b, f.Stream)
	b = append(b, `,"key":`...)
	b = appendString(b, f.Key)
	b = append(b, `,"event_id":`...)
	b = appendString(b, f.EventID)
	b = append(b, `,"event_time":`...)
	b = appendTime(b, f.EventTime)
	b = append(b, `,"size_ns":`...)
	b = strconv.AppendInt(b, int64(f.Size), 10)
	b = append(b, `,"count":`...)
	b = strconv.AppendInt(b, f.Count, 10)
	b = append(b, `,"sum":`...)
	b = appendFloat(b, f.Sum)
	b = append(b, `,"watermark":`...)
	b = appendTime(b, f.Watermark)
	b = append(b, `,"emitted_at":`...)
	b = appendTime(b, f.EmittedAt)
	b = append(b, `,"arrived_at":`...)
	b = appendTime(b, f.ArrivedAt)
	b = append(b, `,"source_topic":`...)
	b = appendString(b, f.SourceTopic)
	b = append(b, `,"source_partition":`...)
	b = strconv.AppendInt(b, int64(f.SourcePartition), 10)
	b = append(b, `,"source_offset":`...)
	b = strconv.AppendInt(b, f.SourceOffset, 10)
	return append(b, '}')
}

func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendFloat renders like encoding/json: shortest representation, 'e'
// notation only for very small or large magnitudes. Non-finite values, which
// the gate never lets through, render as null rather than invalid JSON.
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendString appends s as a JSON string, escaping what JSON requires and
// replacing invalid UTF-8 with U+FFFD, as encoding/json does (without its
// HTML escaping, which only matters for HTML embedding).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
