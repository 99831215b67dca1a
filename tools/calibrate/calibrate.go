package calibrate

import (
	"encoding/json"
	"time"
)

// Chain runs n steps of one dependent multiply-add chain and returns its
// value (so the work cannot be optimized away).
func Chain(n int, x uint64) uint64 {
	for range n {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

// ILP runs n steps of eight independent chains.
func ILP(n int, x uint64) uint64 {
	a, b, c, d := x, x+1, x+2, x+3
	e, f, g, h := x+4, x+5, x+6, x+7
	const m, k = 6364136223846793005, 1442695040888963407
	for range n {
		a, b, c, d = a*m+k, b*m+k, c*m+k, d*m+k
		e, f, g, h = e*m+k, f*m+k, g*m+k, h*m+k
	}
	return a ^ b ^ c ^ d ^ e ^ f ^ g ^ h
}

// Table is the random-read workload's memory: a single cycle through
// every slot in a random order, so each read depends on the one before.
type Table []uint32

// TableBytes is the size of NewTable's table: well past any cache.
const TableBytes = 64 << 20

// NewTable builds the table (Sattolo's shuffle with a fixed seed: the same
// cycle on every machine).
func NewTable() Table { return newTable(TableBytes / 4) }

func newTable(n int) Table {
	t := make(Table, n)
	for i := range t {
		t[i] = uint32(i)
	}
	s := uint64(42)
	for i := n - 1; i > 0; i-- {
		s = s*6364136223846793005 + 1442695040888963407
		j := int((s >> 33) % uint64(i))
		t[i], t[j] = t[j], t[i]
	}
	return t
}

// Chase follows the cycle n steps from slot at and returns where it ends.
func (t Table) Chase(n int, at uint32) uint32 {
	for range n {
		at = t[at]
	}
	return at
}

// Envelope is the decoding workload's target: the shape of a reckon event.
type Envelope struct {
	EventID    string    `json:"event_id"`
	EventType  string    `json:"event_type"`
	OccurredAt time.Time `json:"occurred_at"`
	Data       struct {
		UserID   string  `json:"user_id"`
		Amount   float64 `json:"amount"`
		Currency string  `json:"currency"`
		Items    []struct {
			SKU string `json:"sku"`
			Qty int    `json:"qty"`
		} `json:"items"`
	} `json:"data"`
}

// EnvelopeJSON is the fixed document Decode reads.
var EnvelopeJSON = []byte(`{"event_id":"c0ffee00-0000-4000-8000-000000000001","event_type":"payment.checkout.completed",` +
	`"occurred_at":"2026-11-07T12:00:10.123456Z","data":{"user_id":"Budi","amount":120000.5,"currency":"IDR",` +
	`"items":[{"sku":"kopi-susu","qty":2},{"sku":"roti-bakar","qty":1}]}}`)

// Decode decodes EnvelopeJSON n times.
func Decode(n int) (Envelope, error) {
	var e Envelope
	for range n {
		e = Envelope{}
		if err := json.Unmarshal(EnvelopeJSON, &e); err != nil {
			return e, err
		}
	}
	return e, nil
}
