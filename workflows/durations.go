package workflows

import "reckon/internal/event"

// Workflow inputs, results and continue-as-new states carry their
// durations as strings ("6h0m0s") rather than nanoseconds, so the Temporal
// UI shows horizon_wait: "6h0m0s", not 21600000000000. The fields stay
// time.Duration; event.MarshalDurations writes them as event.Duration,
// whose reader also takes the nanoseconds recorded before, so histories
// replay and a payload written by an older caller decodes
// (docs/ARCHITECTURE.md, "Workflow payloads"). workflows/durations_test.go
// checks every duration field of these types is covered.

// MarshalJSON writes v with its durations as strings.
func (v RecomputeParams) MarshalJSON() ([]byte, error) { return event.MarshalDurations(v) }

// UnmarshalJSON reads v with its durations as strings or nanoseconds.
func (v *RecomputeParams) UnmarshalJSON(b []byte) error { return event.UnmarshalDurations(b, v) }

// MarshalJSON writes v with its durations as strings.
func (v ReconcileParams) MarshalJSON() ([]byte, error) { return event.MarshalDurations(v) }

// UnmarshalJSON reads v with its durations as strings or nanoseconds.
func (v *ReconcileParams) UnmarshalJSON(b []byte) error { return event.UnmarshalDurations(b, v) }

// MarshalJSON writes v with its durations as strings.
func (v ReplayParams) MarshalJSON() ([]byte, error) { return event.MarshalDurations(v) }

// UnmarshalJSON reads v with its durations as strings or nanoseconds.
func (v *ReplayParams) UnmarshalJSON(b []byte) error { return event.UnmarshalDurations(b, v) }

// MarshalJSON writes v with its durations as strings.
func (v CorrectParams) MarshalJSON() ([]byte, error) { return event.MarshalDurations(v) }

// UnmarshalJSON reads v with its durations as strings or nanoseconds.
func (v *CorrectParams) UnmarshalJSON(b []byte) error { return event.UnmarshalDurations(b, v) }

// MarshalJSON writes v with its durations as strings.
func (v LateWatchState) MarshalJSON() ([]byte, error) { return event.MarshalDurations(v) }

// UnmarshalJSON reads v with its durations as strings or nanoseconds.
func (v *LateWatchState) UnmarshalJSON(b []byte) error { return event.UnmarshalDurations(b, v) }

// MarshalJSON writes v with its durations as strings.
func (v CompactionState) MarshalJSON() ([]byte, error) { return event.MarshalDurations(v) }

// UnmarshalJSON reads v with its durations as strings or nanoseconds.
func (v *CompactionState) UnmarshalJSON(b []byte) error { return event.UnmarshalDurations(b, v) }

// MarshalJSON writes v with its durations as strings.
func (v PaneArchiveState) MarshalJSON() ([]byte, error) { return event.MarshalDurations(v) }

// UnmarshalJSON reads v with its durations as strings or nanoseconds.
func (v *PaneArchiveState) UnmarshalJSON(b []byte) error { return event.UnmarshalDurations(b, v) }

// MarshalJSON writes v with its durations as strings.
func (v FeatureArchiveState) MarshalJSON() ([]byte, error) { return event.MarshalDurations(v) }

// UnmarshalJSON reads v with its durations as strings or nanoseconds.
func (v *FeatureArchiveState) UnmarshalJSON(b []byte) error { return event.UnmarshalDurations(b, v) }

// MarshalJSON writes v with its durations as strings.
func (v ArchiveState) MarshalJSON() ([]byte, error) { return event.MarshalDurations(v) }

// UnmarshalJSON reads v with its durations as strings or nanoseconds.
func (v *ArchiveState) UnmarshalJSON(b []byte) error { return event.UnmarshalDurations(b, v) }

// MarshalJSON writes v with its durations as strings.
func (v ZReportOFDOptions) MarshalJSON() ([]byte, error) { return event.MarshalDurations(v) }

// UnmarshalJSON reads v with its durations as strings or nanoseconds.
func (v *ZReportOFDOptions) UnmarshalJSON(b []byte) error { return event.UnmarshalDurations(b, v) }

// MarshalJSON writes v with its durations as strings.
func (v FinalizeState) MarshalJSON() ([]byte, error) { return event.MarshalDurations(v) }

// UnmarshalJSON reads v with its durations as strings or nanoseconds.
func (v *FinalizeState) UnmarshalJSON(b []byte) error { return event.UnmarshalDurations(b, v) }
