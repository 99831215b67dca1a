package zreport

import (
	"encoding/json"
	"time"

	"reckon/internal/event"
)

// MarshalJSON writes p with its durations as strings ("144h0m0s"), as the
// Temporal UI then shows a Z-report entity's input.
func (p Policy) MarshalJSON() ([]byte, error) {
	type plain Policy
	return json.Marshal(struct {
		plain
		OFDRequestAfter event.Duration `json:"ofd_request_after"`
		OFDRetry        event.Duration `json:"ofd_retry"`
		Retention       event.Duration `json:"retention"`
		Linger          event.Duration `json:"linger"`
	}{plain(p), event.Duration(p.OFDRequestAfter), event.Duration(p.OFDRetry), event.Duration(p.Retention),
		event.Duration(p.Linger)})
}

// UnmarshalJSON reads p with its durations as strings or as the
// nanoseconds recorded before (event.Duration), so histories replay.
func (p *Policy) UnmarshalJSON(b []byte) error {
	type plain Policy
	var v struct {
		plain
		OFDRequestAfter event.Duration `json:"ofd_request_after"`
		OFDRetry        event.Duration `json:"ofd_retry"`
		Retention       event.Duration `json:"retention"`
		Linger          event.Duration `json:"linger"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = Policy(v.plain)
	p.OFDRequestAfter, p.OFDRetry, p.Retention, p.Linger = time.Duration(v.OFDRequestAfter), time.Duration(v.OFDRetry),
		time.Duration(v.Retention), time.Duration(v.Linger)
	return nil
}
