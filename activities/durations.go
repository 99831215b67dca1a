package activities

import "reckon/internal/event"

// Activity inputs carry their durations as strings ("1s") rather than
// nanoseconds, so the Temporal UI's event history shows wait_up_to "30s",
// not 30000000000; the readers also take the nanoseconds recorded before
// (event.MarshalDurations). activities/durations_test.go checks every
// activity input with a duration is covered.

// MarshalJSON writes v with its durations as strings.
func (v HorizonInput) MarshalJSON() ([]byte, error) { return event.MarshalDurations(v) }

// UnmarshalJSON reads v with its durations as strings or nanoseconds.
func (v *HorizonInput) UnmarshalJSON(b []byte) error { return event.UnmarshalDurations(b, v) }

// MarshalJSON writes v with its durations as strings.
func (v ArchiveRangeInput) MarshalJSON() ([]byte, error) { return event.MarshalDurations(v) }

// UnmarshalJSON reads v with its durations as strings or nanoseconds.
func (v *ArchiveRangeInput) UnmarshalJSON(b []byte) error { return event.UnmarshalDurations(b, v) }

// MarshalJSON writes v with its durations as strings.
func (v ReadLateInput) MarshalJSON() ([]byte, error) { return event.MarshalDurations(v) }

// UnmarshalJSON reads v with its durations as strings or nanoseconds.
func (v *ReadLateInput) UnmarshalJSON(b []byte) error { return event.UnmarshalDurations(b, v) }
