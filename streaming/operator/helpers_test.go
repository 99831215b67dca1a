package operator

import (
	"encoding/binary"
	"testing"
	"time"
)

// t0 is 12:00 on the day of the fraud-features example
// (docs/requirements.md R-ROLL-3); sec(n) is n seconds after it.
var t0 = time.Date(2026, 11, 7, 12, 0, 0, 0, time.UTC)

func sec(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }

func testID(n int) EventID {
	var id EventID
	binary.BigEndian.PutUint64(id[8:], uint64(n))
	id[6] = 0x40
	return id
}

func rec(n int, key string, et, arrival time.Time, v float64) Record {
	return Record{ID: testID(n), Key: key, Value: v, EventTime: et, Arrival: arrival, Ref: int64(n)}
}

func mustNew(t testing.TB, opts Options) *Operator {
	t.Helper()
	o, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func process(t testing.TB, o *Operator, r Record, out *Out) Verdict {
	t.Helper()
	v, err := o.Process(r, out)
	if err != nil {
		t.Fatalf("Process(%v): %v", r.Ref, err)
	}
	return v
}
