package zreport

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Policy is the timing of an entity. The zero value of each field means its
// default; it maps onto the `zreport:` section of reckon.yaml.
type Policy struct {
	// OFDRequestAfter: at shift_closed_at + this, a missing OFD document is
	// requested from the operator. Default 144h (day six).
	OFDRequestAfter time.Duration `json:"ofd_request_after"`
	// OFDRetry: after the operator answered "not yet" (or failed), ask
	// again this much later, while before the retention. Default 24h.
	OFDRetry time.Duration `json:"ofd_retry"`
	// Retention: at shift_closed_at + this, a key still waiting becomes
	// final incomplete. Default 720h (30 days).
	Retention time.Duration `json:"retention"`
	// Linger: a final entity stays open until shift_closed_at + Retention
	// and at least this long after its last change, so late parts become
	// new versions of the same run. Default 1h.
	Linger time.Duration `json:"linger"`
}

// Policy defaults.
const (
	DefaultOFDRequestAfter = 144 * time.Hour
	DefaultOFDRetry        = 24 * time.Hour
	DefaultRetention       = 720 * time.Hour
	DefaultLinger          = time.Hour
)

// WithDefaults returns p with zero fields set to their defaults.
func (p Policy) WithDefaults() Policy {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&p.OFDRequestAfter, DefaultOFDRequestAfter)
	def(&p.OFDRetry, DefaultOFDRetry)
	def(&p.Retention, DefaultRetention)
	def(&p.Linger, DefaultLinger)
	return p
}

// Validate reports every problem at once.
func (p Policy) Validate() error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"ofd_request_after", p.OFDRequestAfter}, {"ofd_retry", p.OFDRetry}, {"retention", p.Retention}, {"linger",
		p.Linger}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("zreport: %s must not be negative", d.name))
		}
	}
	return errors.Join(errs...)
}

// Status is where a key stands.
type Status string

// Statuses. Waiting is the only non-final one.
const (
	StatusWaiting    Status = "waiting"
	StatusMatched    Status = "matched"
	StatusMismatched Status = "mismatched"
	StatusIncomplete Status = "incomplete"
)

// Tolerance is how far totals may differ and still match.
const Tolerance = 0.005

// Bounds on what a State remembers, so it stays small enough to carry
// through continue-as-new however badly a source misbehaves.
const (
	// MaxSeenIDs per source: the oldest ids are forgotten beyond it (a
	// redelivery that old would count as a correction).
	MaxSeenIDs = 1000
	// MaxRevisions per source: older replaced figures are dropped from the
	// record; Corrections still counts them.
	MaxRevisions = 32
)

// SourceState is what a State knows about one source.
type SourceState struct {
	Source  Source `json:"source"`
	Present bool   `json:"present"`
	// EventID, Figures and ShiftClosedAt are the applied part's.
	EventID string `json:"event_id,omitempty"`
	Figures
	ShiftClosedAt time.Time `json:"shift_closed_at,omitzero"`
	// AppliedAt is when the current part was applied.
	AppliedAt time.Time `json:"applied_at,omitzero"`
	Origin    string    `json:"origin,omitempty"`
	// Duplicates counts parts whose event_id was already applied: the
	// source sent the part again.
	Duplicates int64 `json:"duplicates"`
	// Redeliveries counts the applied part's own record delivered again
	// (same event_id and same Origin, e.g. the bridge re-reading a record
	// whose offset commit a broker outage lost): transport, not the
	// source, so not a duplicate of the business record.
	Redeliveries int64 `json:"redeliveries,omitempty"`
	// Corrections counts parts that replaced an earlier one (new event_id).
	Corrections int64 `json:"corrections"`
	// Revisions are the replaced parts, oldest first (at most MaxRevisions).
	Revisions []Revision `json:"revisions,omitempty"`
	// Seen are the event_ids applied so far (at most MaxSeenIDs).
	Seen []string `json:"seen,omitempty"`
}

// Revision records a part replaced by a corrected resend.
type Revision struct {
	EventID string `json:"event_id"`
	Figures
	ReplacedAt time.Time `json:"replaced_at"`
	ReplacedBy string    `json:"replaced_by"`
}

// OFDRequests tracks asking the operator for the OFD document.
type OFDRequests struct {
	Requests int64 `json:"requests"`
	NotFound int64 `json:"not_found"`
	Failures int64 `json:"failures"`
	// InFlight is set between Fire(TimerOFDRequest) and OFDAnswer/OFDFailed.
	InFlight bool `json:"in_flight"`
	// NextAt is the next request time; zero means shift_closed_at +
	// OFDRequestAfter.
	NextAt     time.Time `json:"next_at,omitzero"`
	LastAt     time.Time `json:"last_at,omitzero"`
	LastResult string    `json:"last_result,omitempty"`
}

// State is one business key's aggregate. The zero State with Key set is an
// empty entity. It is plain data (JSON round-trips exactly), so a workflow
// can carry it through continue-as-new and return it from a query.
type State struct {
	Key Key `json:"key"`
	// ShiftClosedAt is the first applied part's: every deadline derives
	// from it.
	ShiftClosedAt time.Time      `json:"shift_closed_at,omitzero"`
	Sources       [3]SourceState `json:"sources"`
	// Version counts final versions published; Final is the latest.
	Version int64      `json:"version"`
	Final   *Aggregate `json:"final,omitempty"`
	// Seq counts applied parts (the changelog sequence).
	Seq          int64       `json:"seq"`
	LastChangeAt time.Time   `json:"last_change_at,omitzero"`
	OFD          OFDRequests `json:"ofd"`
	// Policy is fixed when the entity starts (defaults filled), so a
	// configuration change never moves the deadlines of a running entity.
	Policy Policy `json:"policy"`
}

// New returns the empty state of k under p.
func New(k Key, p Policy) *State {
	s := &State{Key: k, Policy: p.WithDefaults()}
	for i, src := range Sources {
		s.Sources[i].Source = src
	}
	return s
}

// Status returns the latest final status, or waiting.
func (s *State) Status() Status {
	if s.Final == nil {
		return StatusWaiting
	}
	return s.Final.Status
}

// Present lists the present sources in canonical order.
func (s *State) Present() []Source {
	out := []Source{}
	for i := range s.Sources {
		if s.Sources[i].Present {
			out = append(out, s.Sources[i].Source)
		}
	}
	return out
}

// Missing lists the absent sources in canonical order.
func (s *State) Missing() []Source {
	out := []Source{}
	for i := range s.Sources {
		if !s.Sources[i].Present {
			out = append(out, s.Sources[i].Source)
		}
	}
	return out
}

func (s *State) complete() bool { return len(s.Missing()) == 0 }

// Outcome is what a step asks its driver to do, in this order: publish
// Changelog (the key is still waiting), publish Final (a new version),
// request the OFD document.
type Outcome struct {
	// Applied: the part changed the state (first part of its source or a
	// correction). Duplicate: its event_id was seen before; only counted.
	Applied, Duplicate, Correction bool
	Changelog                      *Changelog
	Final                          *Aggregate
	// RequestOFD: ask the operator now; report back with OFDAnswer or
	// OFDFailed.
	RequestOFD bool
}

// Apply applies part p at now. A part for another key is an error
// (ErrWrongKey), as is an invalid part (ErrInvalidPart); the state is then
// unchanged.
func (s *State) Apply(p Part, now time.Time) (Outcome, error) {
	if err := p.Validate(); err != nil {
		return Outcome{}, err
	}
	if p.Key != s.Key {
		return Outcome{}, fmt.Errorf("%w: part for %s applied to %s", ErrWrongKey, p.Key, s.Key)
	}
	now = now.UTC()
	src := &s.Sources[p.Source.index()]
	if slices.Contains(src.Seen, p.EventID) {
		if p.Origin != "" && p.Origin == src.Origin && p.EventID == src.EventID {
			src.Redeliveries++
		} else {
			src.Duplicates++
		}
		return Outcome{Duplicate: true}, nil
	}
	if s.ShiftClosedAt.IsZero() {
		s.ShiftClosedAt = p.ShiftClosedAt.UTC()
	}
	out := Outcome{Applied: true, Correction: src.Present}
	if src.Present {
		src.Corrections++
		src.Revisions = append(src.Revisions,
			Revision{EventID: src.EventID, Figures: src.Figures, ReplacedAt: now, ReplacedBy: p.EventID})
		if len(src.Revisions) > MaxRevisions {
			src.Revisions = slices.Delete(src.Revisions, 0, len(src.Revisions)-MaxRevisions)
		}
	}
	src.Present = true
	src.EventID, src.Figures, src.ShiftClosedAt = p.EventID, p.Figures, p.ShiftClosedAt.UTC()
	src.AppliedAt, src.Origin = now, p.Origin
	src.Seen = append(src.Seen, p.EventID)
	if len(src.Seen) > MaxSeenIDs {
		src.Seen = slices.Delete(src.Seen, 0, len(src.Seen)-MaxSeenIDs)
	}
	s.Seq++
	s.LastChangeAt = now
	cause := string(p.Source) + " part " + p.EventID
	if out.Correction {
		cause = string(p.Source) + " correction " + p.EventID
	}
	switch {
	case s.Final != nil:
		out.Final = s.finalize(now, "part after finalization: "+cause)
	case s.complete():
		out.Final = s.finalize(now, "all sources present")
	default:
		cl := s.changelog(now, cause)
		out.Changelog = &cl
	}
	return out, nil
}

// TimerKind names the deadlines of an entity.
type TimerKind string

// Timer kinds.
const (
	// TimerOFDRequest: ask the operator for the missing OFD document.
	TimerOFDRequest TimerKind = "ofd_request"
	// TimerRetention: stop waiting, finalize incomplete.
	TimerRetention TimerKind = "retention"
	// TimerClose: a final entity may end (Linger after its last change and
	// not before the retention).
	TimerClose TimerKind = "close"
)

// Timer is the next deadline of an entity.
type Timer struct {
	Kind TimerKind `json:"kind"`
	At   time.Time `json:"at"`
}

// Deadlines are the absolute times that drive an entity.
type Deadlines struct {
	OFDRequestAt time.Time `json:"ofd_request_at,omitzero"` // zero when not pending
	RetentionAt  time.Time `json:"retention_at,omitzero"`
	CloseAt      time.Time `json:"close_at,omitzero"` // set once final
}

// Deadlines returns the entity's deadlines (zero before the first part).
func (s *State) Deadlines() Deadlines {
	p := s.Policy.WithDefaults()
	if s.ShiftClosedAt.IsZero() {
		return Deadlines{}
	}
	d := Deadlines{RetentionAt: s.ShiftClosedAt.Add(p.Retention)}
	if s.Final == nil && !s.Sources[0].Present && !s.OFD.InFlight {
		at := s.OFD.NextAt
		if at.IsZero() {
			at = s.ShiftClosedAt.Add(p.OFDRequestAfter)
		}
		if at.Before(d.RetentionAt) {
			d.OFDRequestAt = at
		}
	}
	if s.Final != nil {
		d.CloseAt = d.RetentionAt
		if l := s.LastChangeAt.Add(p.Linger); l.After(d.CloseAt) {
			d.CloseAt = l
		}
	}
	return d
}

// NextTimer returns the earliest pending deadline; ok is false before the
// first part. A final entity's only timer is TimerClose.
func (s *State) NextTimer() (t Timer, ok bool) {
	d := s.Deadlines()
	switch {
	case s.ShiftClosedAt.IsZero():
		return Timer{}, false
	case s.Final != nil:
		return Timer{TimerClose, d.CloseAt}, true
	case !d.OFDRequestAt.IsZero():
		// OFDRequestAt < RetentionAt by construction.
		return Timer{TimerOFDRequest, d.OFDRequestAt}, true
	default:
		return Timer{TimerRetention, d.RetentionAt}, true
	}
}

// Fire handles timer kind k at now. Firing a timer that is no longer
// pending (the state moved on) does nothing. TimerClose needs no state
// change: the driver ends the entity when nothing else is pending.
func (s *State) Fire(k TimerKind, now time.Time) Outcome {
	now = now.UTC()
	t, ok := s.NextTimer()
	if !ok || t.Kind != k || now.Before(t.At) {
		return Outcome{}
	}
	switch k {
	case TimerOFDRequest:
		s.OFD.InFlight = true
		s.OFD.Requests++
		s.OFD.LastAt = now
		return Outcome{RequestOFD: true}
	case TimerRetention:
		return Outcome{Final: s.finalize(now, "retention expired")}
	}
	return Outcome{}
}

// OFDAnswer records the operator's answer to a request made at Fire:
// doc is nil for "not found yet" (asked again after OFDRetry, while before
// the retention). A found document is applied like any OFD part unless an
// OFD part arrived meanwhile.
func (s *State) OFDAnswer(doc *Part, now time.Time) (Outcome, error) {
	p := s.Policy.WithDefaults()
	now = now.UTC()
	s.OFD.InFlight = false
	s.OFD.LastAt = now
	if doc == nil {
		s.OFD.NotFound++
		s.OFD.LastResult = "not_found"
		s.OFD.NextAt = now.Add(p.OFDRetry)
		return Outcome{}, nil
	}
	if s.Sources[0].Present {
		s.OFD.LastResult = "found (OFD part already present, document not applied)"
		return Outcome{}, nil
	}
	d := *doc
	d.Source = OFD
	out, err := s.Apply(d, now)
	if err != nil {
		s.OFD.Failures++
		s.OFD.LastResult = "invalid document: " + err.Error()
		s.OFD.NextAt = now.Add(p.OFDRetry)
		return Outcome{}, err
	}
	s.OFD.LastResult = "found"
	return out, nil
}

// OFDFailed records a request that failed for good (retries exhausted or a
// non-retryable answer); the next request is OFDRetry later.
func (s *State) OFDFailed(reason string, now time.Time) {
	p := s.Policy.WithDefaults()
	now = now.UTC()
	s.OFD.InFlight = false
	s.OFD.Failures++
	s.OFD.LastAt = now
	s.OFD.LastResult = "error: " + reason
	s.OFD.NextAt = now.Add(p.OFDRetry)
}

// finalize publishes a new version.
func (s *State) finalize(now time.Time, reason string) *Aggregate {
	s.Version++
	a := s.aggregate(now, reason)
	s.Final = &a
	return &a
}

// compare decides matched or mismatched for a complete state: the three
// receipt counts equal and the three totals within Tolerance of each other.
func compare(f [3]Figures) Status {
	lo, hi := f[0].Total, f[0].Total
	for _, x := range f[1:] {
		if x.Receipts != f[0].Receipts {
			return StatusMismatched
		}
		lo, hi = math.Min(lo, x.Total), math.Max(hi, x.Total)
	}
	// The epsilon absorbs binary representation (100.005 - 100 is not
	// exactly 0.005).
	if hi-lo > Tolerance+1e-9 {
		return StatusMismatched
	}
	return StatusMatched
}
