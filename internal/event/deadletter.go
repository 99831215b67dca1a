package event

import (
	"strconv"
	"strings"
	"time"
)

// DeadLetter describes a record that reckon refused or could not process.
// The dead-letter topic carries the original bytes unchanged as the value,
// the original key, and these fields as headers (see Headers), so nothing
// about the source is lost.
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
