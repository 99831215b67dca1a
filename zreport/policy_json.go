package zreport

import "reckon/internal/event"

// MarshalJSON writes p with its durations as strings ("144h0m0s"), as the
// Temporal UI then shows a Z-report entity's input.
func (p Policy) MarshalJSON() ([]byte, error) { return event.MarshalDurations(p) }

// UnmarshalJSON reads p with its durations as strings or as the
// nanoseconds recorded before (event.Duration), so histories replay.
func (p *Policy) UnmarshalJSON(b []byte) error { return event.UnmarshalDurations(b, p) }
