package event

import (
	"strconv"
	"strings"
	"time"
)

// DeadLetter describes a record that reckon refused or could not process.
// The dead-letter topic carries the original bytes unchanged as the value,
// the original key, and these fields as headers (see Headers), so nothing
// about the source is lost; Record builds that record, cut to the topic's
// size limit when the source is near it.
type DeadLetter struct {
	Reason          string    // machine-readable first reason, e.g. "data.suhu_c: above max 60"
	Reasons         []string  // every reason found
	Fields          []string  // failing fields: envelope names, data.<name>
	SourceTopic     string    //
	SourcePartition int32     //
	SourceOffset    int64     //
	SourceTimestamp time.Time // the record's Kafka timestamp (arrival)
	DeadAt          time.Time // when reckon dead-lettered it
	Attempts        int       // processing attempts before giving up (1 for gate rejections)
	Stage           string    // "gate" or "process"
}

// Dead-letter header names.
const (
	HeaderReason          = "reckon.reason"
	HeaderReasons         = "reckon.reasons"
	HeaderFields          = "reckon.fields"
	HeaderSourceTopic     = "reckon.source.topic"
	HeaderSourcePartition = "reckon.source.partition"
	HeaderSourceOffset    = "reckon.source.offset"
	HeaderSourceTimestamp = "reckon.source.timestamp"
	HeaderDeadAt          = "reckon.dead_at"
	HeaderAttempts        = "reckon.attempts"
	HeaderStage           = "reckon.stage"
	// HeaderTruncated marks a dead letter whose key or value was cut to fit
	// the broker's record limit (the original stays at the source offset).
	HeaderTruncated = "reckon.truncated"
)

// Header is a transport-neutral key/value header.
type Header struct {
	Key   string
	Value []byte
}

// Headers renders d as record headers. Lists are joined with "; " for
// reasons and "," for fields.
func (d DeadLetter) Headers() []Header {
	h := []Header{
		{HeaderReason, []byte(d.Reason)},
		{HeaderReasons, []byte(strings.Join(d.Reasons, "; "))},
		{HeaderFields, []byte(strings.Join(d.Fields, ","))},
		{HeaderSourceTopic, []byte(d.SourceTopic)},
		{HeaderSourcePartition, []byte(strconv.FormatInt(int64(d.SourcePartition), 10))},
		{HeaderSourceOffset, []byte(strconv.FormatInt(d.SourceOffset, 10))},
		{HeaderSourceTimestamp, []byte(d.SourceTimestamp.UTC().Format(time.RFC3339Nano))},
		{HeaderDeadAt, []byte(d.DeadAt.UTC().Format(time.RFC3339Nano))},
		{HeaderAttempts, []byte(strconv.Itoa(d.Attempts))},
		{HeaderStage, []byte(d.Stage)},
	}
	return h
}

// SourceRecord is the record a dead letter is made of, transport-neutral:
// its coordinates, its bytes and the headers to carry over.
type SourceRecord struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time // the record's Kafka timestamp (arrival)
	Key       []byte
	Value     []byte
	// Headers are carried into the dead letter after reckon's own; nil
	// carries none.
	Headers []Header
}

// DeadLetterRecord is a dead letter as the dead-letter topic carries it;
// callers turn it into their transport's record.
type DeadLetterRecord struct {
	Key     []byte
	Value   []byte
	Headers []Header
}

// MaxKeptPrefix is how much of an over-long key, and in the lake's
// rejected table of an over-long value, a refused record keeps: its first
// 64 KiB, described by a Truncated note (the original stays in its topic).
const MaxKeptPrefix = 64 << 10

// Truncated is the note of a cut: what was cut (key, value), its size and
// how much was kept, e.g. "value: 1049000 bytes, first 65536 kept". Dead
// letters carry it as HeaderTruncated, the lake's rejected table as its
// truncated column.
func Truncated(what string, n, kept int) string {
	return what + ": " + strconv.Itoa(n) + " bytes, first " + strconv.Itoa(kept) + " kept"
}

// Dead-letter size bounds (see DeadLetter.Record).
const (
	// MaxDeadLetterKey bounds the source key a dead letter keeps.
	MaxDeadLetterKey = MaxKeptPrefix
	// DeadLetterOverhead is the room a dead letter leaves below the
	// topic's record limit: half for headers (headers beyond it take their
	// excess from the value), half for record and batch framing and the
	// HeaderTruncated notes.
	DeadLetterOverhead = 64 << 10
)

// Record builds the dead-letter topic's record of src: src's key and value
// unchanged, d's headers with its source fields taken from src, then src's
// headers.
//
// maxBytes is the dead-letter topic's record limit (max.message.bytes). A
// source near that limit does not fit once headers are added, and a broker
// refuses the whole record, so Record cuts: the key to its first
// MaxDeadLetterKey bytes, the source headers when they alone leave no room
// for the value, and the value to a prefix that fits. Each cut adds a
// HeaderTruncated header saying what was cut ("value: N bytes, first M
// kept"); the original stays in its topic at the source offset.
//
// The record shares src's byte slices.
func (d DeadLetter) Record(src SourceRecord, maxBytes int) DeadLetterRecord {
	d.SourceTopic, d.SourcePartition, d.SourceOffset, d.SourceTimestamp = src.Topic, src.Partition, src.Offset, src.Timestamp
	hs := d.Headers()
	key, value, carry := src.Key, src.Value, src.Headers
	var cuts []Header
	if len(key) > MaxDeadLetterKey {
		cuts = append(cuts, cutHeader("key", len(key), MaxDeadLetterKey))
		key = key[:MaxDeadLetterKey]
	}
	room := func() int {
		excess := max(0, headerBytes(hs)+headerBytes(carry)-DeadLetterOverhead/2)
		return maxBytes - DeadLetterOverhead - len(key) - excess
	}
	if room() < 0 && len(carry) > 0 {
		cuts = append(cuts, Header{HeaderTruncated, []byte("headers: " + strconv.Itoa(len(carry)) + " source headers of " +
			strconv.Itoa(headerBytes(carry)) + " bytes dropped")})
		carry = nil
	}
	if limit := max(0, room()); len(value) > limit {
		cuts = append(cuts, cutHeader("value", len(value), limit))
		value = value[:limit]
	}
	out := make([]Header, 0, len(hs)+len(cuts)+len(carry))
	out = append(append(append(out, hs...), cuts...), carry...)
	return DeadLetterRecord{Key: key, Value: value, Headers: out}
}

func cutHeader(what string, n, kept int) Header {
	return Header{HeaderTruncated, []byte(Truncated(what, n, kept))}
}

// headerBytes is the size of hs in a record: each header's key and value
// and their two length varints (at most 5 bytes each).
func headerBytes(hs []Header) int {
	n := 0
	for _, h := range hs {
		n += len(h.Key) + len(h.Value) + 10
	}
	return n
}
