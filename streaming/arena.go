package streaming

import "github.com/twmb/franz-go/pkg/kgo"

// outArena hands out a partition's output records and their key and value
// bytes from blocks, instead of three allocations per output: a record
// stays valid (and keeps its block alive) until the producer is done with
// it; a block is never reused, only replaced when full. Not safe for
// concurrent use: one per partition.
type outArena struct {
	recs []kgo.Record
	b    []byte
}

const (
	arenaRecords = 256
	arenaBytes   = 64 << 10
	// maxOutputJSON is the room reserved before encoding a pane or a
	// feature: a larger one still encodes correctly, by copying the block.
	maxOutputJSON = 2 << 10
)

// record returns a new record of the arena for topic.
func (a *outArena) record(topic string) *kgo.Record {
	if len(a.recs) == cap(a.recs) {
		a.recs = make([]kgo.Record, 0, arenaRecords)
	}
	a.recs = a.recs[:len(a.recs)+1]
	r := &a.recs[len(a.recs)-1]
	r.Topic = topic
	return r
}

// reserve makes room for n more bytes in the current block.
func (a *outArena) reserve(n int) {
	if cap(a.b)-len(a.b) < n {
		a.b = make([]byte, 0, max(arenaBytes, n))
	}
}

// since returns the bytes appended to a.b from start on, capped so that
// nothing appended later reaches into them.
func (a *outArena) since(start int) []byte {
	return a.b[start:len(a.b):len(a.b)]
}

// appendString copies s into the arena.
func (a *outArena) appendString(s string) []byte {
	a.reserve(len(s))
	start := len(a.b)
	a.b = append(a.b, s...)
	return a.since(start)
}
