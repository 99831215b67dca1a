package operator

import (
	"math"
	"strings"
)

// Hopping windows (docs/adr/0041-hopping-windows.md): the record path of
// a stream whose windows start every Hop.

// applyHopping is apply for hopping windows: the lateness decision, the
// features and the update of every window covering et that is not purged
// (end + L > wm). Windows that are purged are skipped; the record is late
// only if it counts nowhere. Windows are updated in start order; a fired
// one emits its late pane at once, as in apply.
func (o *Operator) applyHopping(r *Record, et int64, out *Out) Verdict {
	featureIn := o.roll > 0 && (!o.hasWM || et >= subSat(o.wm, o.lateness))
	last := floorTo(et, o.hop) // the latest start covering et
	n := o.size/o.hop - 1      // earlier starts covering et
	for n > 0 && last < math.MinInt64+n*o.hop {
		n-- // starts before int64's range: no window
	}
	first := last - n*o.hop
	if o.hasWM {
		// Skip the purged ones: a window is held while end + L > wm.
		for first <= last && addSat(addSat(first, o.size), o.lateness) <= o.wm {
			first += o.hop
		}
	}
	windowIn := first <= last
	v := o.admit(r, et, featureIn, windowIn, out)
	if v == Late {
		return v
	}
	if !windowIn {
		return v
	}
	h := o.keyHash(r.Key)
	owned := "" // the key's copy held by a window already: new windows share it
	for s := first; ; s += o.hop {
		end := addSat(s, o.size)
		ref := o.peekWindow(r.Key, h, s)
		if ref.i >= 0 {
			owned = ref.b.wins[ref.i].key
		} else {
			if ref.b == nil {
				ref.b = o.bucketFor(s, end)
			}
			if owned == "" {
				owned = strings.Clone(r.Key)
			}
			ref.i = ref.b.add(window{key: owned, hash: h})
		}
		o.fold(r.Key, s, end, r.Value, ref, out)
		if s >= last {
			break
		}
	}
	return v | InWindow
}
