package lakecheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"reckon/lake"
	"reckon/verify/generate"
)

// ErrNotAccounted makes `reckon verify --lake` exit non-zero.
var ErrNotAccounted = errors.New("lake: not every archived offset is held exactly once in raw, rejected or raw_dropped")

// Account is where the lake holds a topic's offsets
// (docs/adr/0018-continuous-compaction.md): every offset the archive has
// reached is in exactly one of raw, rejected and raw_dropped.
type Account struct {
	// Held counts the distinct offsets the lake holds, ByTable the
	// tables holding them, Below the offsets below the archive progress
	// (Held equals it unless the topic has offsets without a record:
	// transaction markers).
	Held, Below int64
	ByTable     map[string]int64
	// Archived counts the manifest's listed records (every record that
	// is not on time: late, redelivered, poison, ...) below their
	// partition's archive progress; Pending those not archived yet.
	Archived, Pending int64
	// Missing lists archived listed records held by no table, Twice any
	// offset held more than once ("partition/offset"), at most 10 each;
	// NMissing and NTwice count them all.
	Missing, Twice   []string
	NMissing, NTwice int64
}

// Exact reports whether every archived record is held exactly once.
func (a Account) Exact() bool { return a.NMissing == 0 && a.NTwice == 0 }

// Check checks the manifest's records of its topic against the lake.
// A record held twice is one an unfinished compaction (or overlapping
// archive batches) left beside its copy; the next compaction of its hour
// repairs it.
func Check(ctx context.Context, lk *lake.Lake, m *generate.Manifest) (Account, error) {
	acc := Account{ByTable: map[string]int64{}}
	prog, err := lk.TopicProgress(ctx, m.Topic)
	if err != nil {
		return acc, err
	}
	next := map[int32]int64{}
	for _, p := range prog {
		next[p.Partition] = p.NextOffset
	}
	type po struct {
		p int32
		o int64
	}
	held := map[po][]string{}
	if err := lk.Offsets(ctx, m.Topic, func(table string, p int32, o int64) error {
		held[po{p, o}] = append(held[po{p, o}], table)
		return nil
	}); err != nil {
		return acc, err
	}
	for _, n := range next {
		acc.Below += n
	}
	for k, tables := range held {
		acc.Held++
		acc.ByTable[tables[0]]++
		if len(tables) > 1 {
			if acc.NTwice++; len(acc.Twice) < 10 {
				acc.Twice = append(acc.Twice, fmt.Sprintf("%d/%d %v", k.p, k.o, tables))
			}
		}
	}
	slices.Sort(acc.Twice)
	for _, e := range m.Listed {
		if e.Partition == nil || e.Offset == nil {
			continue
		}
		k := po{*e.Partition, *e.Offset}
		if k.o >= next[k.p] {
			acc.Pending++
			continue
		}
		acc.Archived++
		if len(held[k]) == 0 {
			if acc.NMissing++; len(acc.Missing) < 10 {
				acc.Missing = append(acc.Missing, fmt.Sprintf("%d/%d", k.p, k.o))
			}
		}
	}
	return acc, nil
}

func (a Account) Print(w io.Writer, topic string) {
	fmt.Fprintf(w, "lake %s: %d offsets held (%d below the archive progress): raw %d, rejected %d, raw_dropped %d; held twice %d; listed records archived %d (%d not yet), missing %d\n",
		topic, a.Held, a.Below, a.ByTable[lake.RawDir], a.ByTable[lake.RejectedDir], a.ByTable[lake.DroppedDir], a.NTwice, a.Archived, a.Pending, a.NMissing)
	if len(a.Missing) > 0 {
		fmt.Fprintf(w, "  missing: %v\n", a.Missing)
	}
	if len(a.Twice) > 0 {
		fmt.Fprintf(w, "  held twice (an unfinished compaction; the next one repairs it): %v\n", a.Twice)
	}
}
