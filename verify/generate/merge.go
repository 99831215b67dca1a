package generate

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrMerge prefixes every reason Merge refuses its manifests.
var ErrMerge = errors.New("generate: manifests cannot be merged")

// Merge accounts runs that went to the same topic side by side (each on
// keys of its own, Options.KeyPrefix) as one run, so the conservation
// ledger can check the topic's whole traffic: the counts add up, the listed
// records and the truth windows are joined (each listed record keeps its
// run's Seq), the arrivals span every run, and the result is complete only
// when every run is. The options and seed are the first manifest's.
//
// It fails, naming every problem, when the runs' scenarios, topics or
// streams differ, for fiscal runs (their Z-reports are not merged), and
// when two runs share a (stream, key, window): joined, the truth of such a
// window would be counted twice. The inputs are not modified.
func Merge(ms ...*Manifest) (*Manifest, error) {
	if len(ms) == 0 {
		return nil, fmt.Errorf("%w: no manifest", ErrMerge)
	}
	if len(ms) == 1 {
		return ms[0], nil
	}
	first := ms[0]
	out := *first
	out.Command = nil
	out.Counts = Counts{ByCategory: map[Category]int64{}, PoisonByKind: map[PoisonKind]map[string]int64{}}
	out.Listed, out.Truth = nil, nil
	var errs []error
	windows := map[string]int{} // stream|key|start → manifest index
	for i, m := range ms {
		if m.Scenario != first.Scenario || m.Topic != first.Topic || m.Options.Stream != first.Options.Stream {
			errs = append(errs, fmt.Errorf("%w: manifest %d is %s traffic to %s (stream %q), manifest 1 %s to %s (stream %q)",
				ErrMerge, i+1, m.Scenario, m.Topic, m.Options.Stream, first.Scenario, first.Topic, first.Options.Stream))
		}
		if m.Scenario == Fiscal {
			errs = append(errs, fmt.Errorf("%w: manifest %d is fiscal: Z-reports are not merged", ErrMerge, i+1))
		}
		out.Complete = out.Complete && m.Complete
		if out.FirstArrival == "" || (m.FirstArrival != "" && m.FirstArrival < out.FirstArrival) {
			out.FirstArrival = m.FirstArrival // TimeLayout in UTC: the strings sort as the times
		}
		out.LastArrival = max(out.LastArrival, m.LastArrival)
		c := &out.Counts
		c.Records += m.Counts.Records
		c.JSONLRecords += m.Counts.JSONLRecords
		c.ValidUnique += m.Counts.ValidUnique
		for k, n := range m.Counts.ByCategory {
			c.ByCategory[k] += n
		}
		for k, byField := range m.Counts.PoisonByKind {
			if c.PoisonByKind[k] == nil {
				c.PoisonByKind[k] = map[string]int64{}
			}
			for f, n := range byField {
				c.PoisonByKind[k][f] += n
			}
		}
		out.Listed = append(out.Listed, m.Listed...)
		shared := 0
		for _, w := range m.Truth {
			k := w.Stream + "|" + w.Key + "|" + w.WindowStart
			if j, ok := windows[k]; ok && j != i {
				if shared++; shared == 1 {
					errs = append(errs, fmt.Errorf("%w: manifests %d and %d both hold window %s %s of key %s "+
						"(runs side by side need keys of their own: --key-prefix)", ErrMerge, j+1, i+1, w.Stream, w.WindowStart, w.Key))
				}
				continue
			}
			windows[k] = i
			out.Truth = append(out.Truth, w)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	slices.SortFunc(out.Truth, func(a, b Window) int {
		return cmpChain(strings.Compare(a.Stream, b.Stream), strings.Compare(a.Key, b.Key), strings.Compare(a.WindowStart, b.WindowStart))
	})
	return &out, nil
}
