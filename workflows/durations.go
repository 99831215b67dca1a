package workflows

import (
	"encoding/json"
	"time"

	"reckon/internal/event"
)

// Workflow inputs, results and continue-as-new states carry their
// durations as strings ("6h0m0s") rather than nanoseconds, so the Temporal
// UI shows horizon_wait: "6h0m0s", not 21600000000000. The fields stay
// time.Duration; these methods shadow them with event.Duration, which also
// reads the nanoseconds recorded before, so histories replay and a payload
// written by an older caller decodes (docs/ARCHITECTURE.md, "Workflow
// payloads"). workflows/durations_test.go checks every duration field of
// these types is covered.

// MarshalJSON writes v with its durations as strings.
func (v RecomputeParams) MarshalJSON() ([]byte, error) {
	type plain RecomputeParams
	return json.Marshal(struct {
		plain
		HorizonWait event.Duration `json:"horizon_wait"`
		HorizonPoll event.Duration `json:"horizon_poll"`
	}{plain(v), event.Duration(v.HorizonWait), event.Duration(v.HorizonPoll)})
}

// UnmarshalJSON reads v with its durations as strings or nanoseconds.
func (p *RecomputeParams) UnmarshalJSON(b []byte) error {
	type plain RecomputeParams
	var v struct {
		plain
		HorizonWait event.Duration `json:"horizon_wait"`
		HorizonPoll event.Duration `json:"horizon_poll"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = RecomputeParams(v.plain)
	p.HorizonWait, p.HorizonPoll = time.Duration(v.HorizonWait), time.Duration(v.HorizonPoll)
	return nil
}

// MarshalJSON writes v with its durations as strings.
func (v ReconcileParams) MarshalJSON() ([]byte, error) {
	type plain ReconcileParams
	return json.Marshal(struct {
		plain
		HorizonWait event.Duration `json:"horizon_wait"`
		HorizonPoll event.Duration `json:"horizon_poll"`
	}{plain(v), event.Duration(v.HorizonWait), event.Duration(v.HorizonPoll)})
}

// UnmarshalJSON reads v with its durations as strings or nanoseconds.
func (p *ReconcileParams) UnmarshalJSON(b []byte) error {
	type plain ReconcileParams
	var v struct {
		plain
		HorizonWait event.Duration `json:"horizon_wait"`
		HorizonPoll event.Duration `json:"horizon_poll"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = ReconcileParams(v.plain)
	p.HorizonWait, p.HorizonPoll = time.Duration(v.HorizonWait), time.Duration(v.HorizonPoll)
	return nil
}

// MarshalJSON writes v with its durations as strings.
func (v ReplayParams) MarshalJSON() ([]byte, error) {
	type plain ReplayParams
	return json.Marshal(struct {
		plain
		HorizonWait event.Duration `json:"horizon_wait"`
		HorizonPoll event.Duration `json:"horizon_poll"`
	}{plain(v), event.Duration(v.HorizonWait), event.Duration(v.HorizonPoll)})
}

// UnmarshalJSON reads v with its durations as strings or nanoseconds.
func (p *ReplayParams) UnmarshalJSON(b []byte) error {
	type plain ReplayParams
	var v struct {
		plain
		HorizonWait event.Duration `json:"horizon_wait"`
		HorizonPoll event.Duration `json:"horizon_poll"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = ReplayParams(v.plain)
	p.HorizonWait, p.HorizonPoll = time.Duration(v.HorizonWait), time.Duration(v.HorizonPoll)
	return nil
}

// MarshalJSON writes v with its durations as strings.
func (v CorrectParams) MarshalJSON() ([]byte, error) {
	type plain CorrectParams
	return json.Marshal(struct {
		plain
		Debounce    event.Duration `json:"debounce"`
		MaxDelay    event.Duration `json:"max_delay"`
		IdleClose   event.Duration `json:"idle_close"`
		HorizonWait event.Duration `json:"horizon_wait"`
		HorizonPoll event.Duration `json:"horizon_poll"`
	}{plain(v), event.Duration(v.Debounce), event.Duration(v.MaxDelay), event.Duration(v.IdleClose),
		event.Duration(v.HorizonWait), event.Duration(v.HorizonPoll)})
}

// UnmarshalJSON reads v with its durations as strings or nanoseconds.
func (p *CorrectParams) UnmarshalJSON(b []byte) error {
	type plain CorrectParams
	var v struct {
		plain
		Debounce    event.Duration `json:"debounce"`
		MaxDelay    event.Duration `json:"max_delay"`
		IdleClose   event.Duration `json:"idle_close"`
		HorizonWait event.Duration `json:"horizon_wait"`
		HorizonPoll event.Duration `json:"horizon_poll"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = CorrectParams(v.plain)
	p.Debounce, p.MaxDelay, p.IdleClose = time.Duration(v.Debounce), time.Duration(v.MaxDelay), time.Duration(v.IdleClose)
	p.HorizonWait, p.HorizonPoll = time.Duration(v.HorizonWait), time.Duration(v.HorizonPoll)
	return nil
}

// MarshalJSON writes v with its durations as strings.
func (v LateWatchState) MarshalJSON() ([]byte, error) {
	type plain LateWatchState
	return json.Marshal(struct {
		plain
		Wait event.Duration `json:"wait"`
	}{plain(v), event.Duration(v.Wait)})
}

// UnmarshalJSON reads v with its durations as strings or nanoseconds.
func (p *LateWatchState) UnmarshalJSON(b []byte) error {
	type plain LateWatchState
	var v struct {
		plain
		Wait event.Duration `json:"wait"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = LateWatchState(v.plain)
	p.Wait = time.Duration(v.Wait)
	return nil
}

// MarshalJSON writes v with its durations as strings.
func (v CompactionState) MarshalJSON() ([]byte, error) {
	type plain CompactionState
	return json.Marshal(struct {
		plain
		Poll event.Duration `json:"poll"`
	}{plain(v), event.Duration(v.Poll)})
}

// UnmarshalJSON reads v with its durations as strings or nanoseconds.
func (p *CompactionState) UnmarshalJSON(b []byte) error {
	type plain CompactionState
	var v struct {
		plain
		Poll event.Duration `json:"poll"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = CompactionState(v.plain)
	p.Poll = time.Duration(v.Poll)
	return nil
}

// MarshalJSON writes v with its durations as strings.
func (v PaneArchiveState) MarshalJSON() ([]byte, error) {
	type plain PaneArchiveState
	return json.Marshal(struct {
		plain
		Idle event.Duration `json:"idle"`
	}{plain(v), event.Duration(v.Idle)})
}

// UnmarshalJSON reads v with its durations as strings or nanoseconds.
func (p *PaneArchiveState) UnmarshalJSON(b []byte) error {
	type plain PaneArchiveState
	var v struct {
		plain
		Idle event.Duration `json:"idle"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = PaneArchiveState(v.plain)
	p.Idle = time.Duration(v.Idle)
	return nil
}

// MarshalJSON writes v with its durations as strings.
func (v ArchiveState) MarshalJSON() ([]byte, error) {
	type plain ArchiveState
	return json.Marshal(struct {
		plain
		Idle event.Duration `json:"Idle"`
	}{plain(v), event.Duration(v.Idle)})
}

// UnmarshalJSON reads v with its durations as strings or nanoseconds.
func (p *ArchiveState) UnmarshalJSON(b []byte) error {
	type plain ArchiveState
	var v struct {
		plain
		Idle event.Duration `json:"Idle"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = ArchiveState(v.plain)
	p.Idle = time.Duration(v.Idle)
	return nil
}

// MarshalJSON writes v with its durations as strings.
func (v ZReportOFDOptions) MarshalJSON() ([]byte, error) {
	type plain ZReportOFDOptions
	return json.Marshal(struct {
		plain
		Timeout event.Duration `json:"timeout"`
		Backoff event.Duration `json:"backoff"`
	}{plain(v), event.Duration(v.Timeout), event.Duration(v.Backoff)})
}

// UnmarshalJSON reads v with its durations as strings or nanoseconds.
func (p *ZReportOFDOptions) UnmarshalJSON(b []byte) error {
	type plain ZReportOFDOptions
	var v struct {
		plain
		Timeout event.Duration `json:"timeout"`
		Backoff event.Duration `json:"backoff"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = ZReportOFDOptions(v.plain)
	p.Timeout, p.Backoff = time.Duration(v.Timeout), time.Duration(v.Backoff)
	return nil
}

// MarshalJSON writes v with its durations as strings.
func (v FinalizeState) MarshalJSON() ([]byte, error) {
	type plain FinalizeState
	return json.Marshal(struct {
		plain
		Window      event.Duration `json:"window"`
		Every       event.Duration `json:"every"`
		HorizonPoll event.Duration `json:"horizon_poll"`
	}{plain(v), event.Duration(v.Window), event.Duration(v.Every), event.Duration(v.HorizonPoll)})
}

// UnmarshalJSON reads v with its durations as strings or nanoseconds.
func (p *FinalizeState) UnmarshalJSON(b []byte) error {
	type plain FinalizeState
	var v struct {
		plain
		Window      event.Duration `json:"window"`
		Every       event.Duration `json:"every"`
		HorizonPoll event.Duration `json:"horizon_poll"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = FinalizeState(v.plain)
	p.Window, p.Every, p.HorizonPoll = time.Duration(v.Window), time.Duration(v.Every), time.Duration(v.HorizonPoll)
	return nil
}
