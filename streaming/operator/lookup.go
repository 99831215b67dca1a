package operator

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"reckon/internal/event"
)

// Lookup is a read-only copy of one operator's rolling buffers, for
// answering "what are this key's features as of t" from outside the
// partition's goroutine (docs/adr/0040-feature-lookups.md). The shell
// publishes into it (Operator.PublishTo) only after the transaction that
// made the state committed, so a lookup never counts an event an abort
// could take back. Its methods are safe for concurrent use; the publisher
// holds the write lock only to swap in the keys the last transaction
// touched.
type Lookup struct {
	mu       sync.RWMutex
	from     *Operator // the operator last published (a new one: full copy)
	sweep    int64     // its sweepAt at the last publish
	size     int64
	lateness int64
	hasWM    bool
	wm       int64
	keys     map[string][]point
}

// NewLookup returns an empty Lookup: every key unknown, no watermark.
func NewLookup() *Lookup { return &Lookup{keys: map[string][]point{}} }

// ErrBeforeLive is returned for an instant whose rolling window reaches
// behind what the live state still holds (before watermark − allowed
// lateness − rolling size): the operator has pruned those events.
var ErrBeforeLive = errors.New("before what the live state holds")

// LookupResult is a key's rolling features as of an instant.
type LookupResult struct {
	// Known: the key has feature-accepted events held in the live state
	// (at any event time); false answers count 0.
	Known bool
	// Agg is count and sum over (at − size, at], folded in event-time
	// order exactly as the operator and RollingTruth fold them.
	Agg event.Agg
	// Watermark is the operator's watermark at the commit the copy is of;
	// HasWatermark is false before its first record.
	Watermark    time.Time
	HasWatermark bool
}

// At returns key's rolling features over (at − size, at].
func (l *Lookup) At(key string, at time.Time) (LookupResult, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var r LookupResult
	if l.hasWM {
		r.Watermark, r.HasWatermark = ts(l.wm), true
	}
	t := at.UnixNano()
	if l.hasWM && l.lateness != int64(Forever) && t < subSat(l.wm, l.lateness) {
		return r, ErrBeforeLive
	}
	pts, ok := l.keys[key]
	r.Known = ok
	r.Agg = rollAgg(pts, t, l.size)
	return r, nil
}

// Keys is how many keys the copy holds.
func (l *Lookup) Keys() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.keys)
}

// PublishTo brings l up to date with o's rolling buffers: the keys o
// touched since its last publish (all of them when l last held another
// operator: a new or restored partition). Call it only where o's state is
// committed (after the transaction, or right after a restore), on the
// goroutine that owns o.
func (o *Operator) PublishTo(l *Lookup) {
	full := l.from != o
	// Copies are made before the lock is taken: readers wait only for the
	// map updates.
	type upd struct {
		key string
		pts []point
	}
	var upds []upd
	var fresh map[string][]point
	if full {
		fresh = make(map[string][]point, len(o.keys))
		for k, rk := range o.keys {
			fresh[k] = slices.Clone(rk.live())
		}
	} else {
		upds = make([]upd, 0, len(o.dirty))
		for _, rk := range o.dirty {
			if cur := o.keys[rk.key]; cur != rk || len(rk.live()) == 0 {
				// Swept since. A key made again after the sweep is a
				// new buffer, in the list too: it sets the copy.
				if cur == nil {
					upds = append(upds, upd{key: rk.key})
				}
				continue
			}
			upds = append(upds, upd{rk.key, slices.Clone(rk.live())})
		}
	}
	for _, rk := range o.dirty {
		rk.dirty = false
	}
	clear(o.dirty)
	o.dirty = o.dirty[:0]
	if o.dirty == nil {
		o.dirty = make([]*rollKey, 0, 64) // tracking starts with the first publish
	}
	// A sweep (advance) dropped keys without marking them. Only this
	// goroutine writes l, so reading l.keys needs no lock. When most keys
	// went, a new map of the survivors (their published slices are
	// immutable, shared) replaces the copy's in one swap; else the gone
	// ones are found by a scan and deleted under the lock.
	var gone []string
	if !full && o.sweepAt != l.sweep {
		if len(o.keys) < len(l.keys)/2 {
			fresh = make(map[string][]point, len(o.keys))
			for k := range o.keys {
				if pts, ok := l.keys[k]; ok {
					fresh[k] = pts
				}
			}
			for _, u := range upds {
				if u.pts == nil {
					delete(fresh, u.key)
				} else {
					fresh[u.key] = u.pts
				}
			}
			full = true
		} else {
			for k := range l.keys {
				if o.keys[k] == nil {
					gone = append(gone, k)
				}
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.from, l.sweep, l.size, l.lateness = o, o.sweepAt, o.roll, o.lateness
	l.hasWM, l.wm = o.hasWM, o.wm
	if full {
		l.keys = fresh
		return
	}
	for _, u := range upds {
		if u.pts == nil {
			delete(l.keys, u.key)
		} else {
			l.keys[u.key] = u.pts
		}
	}
	for _, k := range gone {
		delete(l.keys, k)
	}
}

// markDirty records that k's buffer changed since the last publish.
// Nothing is tracked for an operator never published (lookups off).
func (o *Operator) markDirty(k *rollKey) {
	if o.dirty != nil && !k.dirty {
		k.dirty = true
		o.dirty = append(o.dirty, k)
	}
}

// RefreshVerdict says what Refresh did with a too-late event.
type RefreshVerdict int

const (
	// RefreshApplied: the event now counts in its key's rolling features.
	RefreshApplied RefreshVerdict = iota
	// RefreshDuplicate: an event of this id was folded back already.
	RefreshDuplicate
	// RefreshOutside: no live feature can count it any more (its event
	// time is at or before the rolling horizon), or the operator has no
	// rolling features.
	RefreshOutside
)

// Refresh folds a too-late event back into the rolling features: an event
// the operator refused as late (it went to the late topic) whose event
// time is still after the rolling horizon (watermark − allowed lateness −
// rolling size) is inserted into its key's buffer, so lookups and the
// features of later events count it (docs/adr/0040-feature-lookups.md).
// It is applied once per event id (the ids are kept, in snapshots too,
// until the horizon passes them). It emits nothing.
func (o *Operator) Refresh(id EventID, key string, eventTime time.Time, value float64) RefreshVerdict {
	if o.roll == 0 || !inRange(eventTime) || math.IsNaN(value) || math.IsInf(value, 0) || key == "" {
		return RefreshOutside
	}
	et := eventTime.UnixNano()
	h, ok := o.horizon()
	if ok {
		if h != o.refreshPruned { // the horizon only moves forward
			for x, t := range o.refreshed {
				if t <= h {
					delete(o.refreshed, x)
				}
			}
			o.refreshPruned = h
		}
		if et <= h {
			return RefreshOutside
		}
	}
	if _, dup := o.refreshed[id]; dup {
		return RefreshDuplicate
	}
	if o.refreshed == nil {
		o.refreshed = map[EventID]int64{}
	}
	o.refreshed[id] = et
	k := o.keys[key]
	if k == nil {
		k = &rollKey{key: strings.Clone(key)}
		o.keys[k.key] = k
	}
	k.insert(et, value)
	o.markDirty(k)
	return RefreshApplied
}

// appendRefreshed writes the refreshed ids in id order (deterministic).
func (o *Operator) appendRefreshed(b []byte) []byte {
	ids := make([]EventID, 0, len(o.refreshed))
	for id := range o.refreshed {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(x, y EventID) int { return bytes.Compare(x[:], y[:]) })
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		b = append(b, id[:]...)
		b = binary.AppendVarint(b, o.refreshed[id])
	}
	return b
}

func (o *Operator) readRefreshed(r *reader) {
	n := r.count(17)
	o.refreshed = make(map[EventID]int64, n)
	for range n {
		var id EventID
		copy(id[:], r.take(16))
		o.refreshed[id] = r.varint()
	}
}
