package errorfs_test

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"reckon/lake/storage"
	"reckon/lake/storage/errorfs"
)

// readFiles reads key n times through s and returns which calls failed.
func readFiles(t *testing.T, s storage.Store, key string, n int) []bool {
	t.Helper()
	failed := make([]bool, n)
	for i := range failed {
		_, err := s.ReadFile(t.Context(), key)
		if err != nil && !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("read %d: %v, want nil or an injected fault", i, err)
		}
		failed[i] = err != nil
	}
	return failed
}

func local(t *testing.T) storage.Store {
	t.Helper()
	st := storage.NewLocal(t.TempDir())
	if _, err := st.Put(t.Context(), "d/f", func(w io.Writer) error { _, err := w.Write([]byte("x")); return err }); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestSameSeedSameFaults: a seed decides which calls of an operation on a
// key fail, whatever else runs; another seed fails others.
func TestSameSeedSameFaults(t *testing.T) {
	f := errorfs.Faults{Seed: 3, Rules: []errorfs.FaultRule{{Op: storage.OpReadFile, Kind: errorfs.FaultError, Rate: 0.5}}}
	a := readFiles(t, errorfs.New(local(t), f), "d/f", 64)
	b := errorfs.New(local(t), f)
	b.ReadFile(t.Context(), "d/other") // calls on another key do not shift this key's draws
	if got := readFiles(t, b, "d/f", 64); !slices.Equal(a, got) {
		t.Errorf("same seed, other interleaving: faults %v, then %v", a, got)
	}
	n := 0
	for _, x := range a {
		if x {
			n++
		}
	}
	if n == 0 || n == len(a) {
		t.Fatalf("rate 0.5: %d of %d reads failed", n, len(a))
	}
	f.Seed = 4
	if c := readFiles(t, errorfs.New(local(t), f), "d/f", 64); slices.Equal(a, c) {
		t.Error("another seed failed the same calls")
	}
}

// TestInjectedAndSetRules: Injected counts the faults; SetRules(nil) stops
// them, and Wrap copies the Faults it was called on.
func TestInjectedAndSetRules(t *testing.T) {
	f := &errorfs.Faults{Rules: []errorfs.FaultRule{{Op: storage.OpReadFile, Kind: errorfs.FaultLost, Rate: 1}}}
	st := f.Wrap(local(t)).(*errorfs.Store)
	f.Rules = nil // the store keeps its copy
	if failed := readFiles(t, st, "d/f", 5); slices.Contains(failed, false) {
		t.Errorf("rate 1: reads %v, want every one failed", failed)
	}
	if st.Injected() != 5 {
		t.Errorf("Injected %d after 5 faults", st.Injected())
	}
	st.SetRules(nil)
	if failed := readFiles(t, st, "d/f", 5); slices.Contains(failed, true) {
		t.Errorf("no rules: reads %v, want none failed", failed)
	}
	if st.Injected() != 5 {
		t.Errorf("Injected %d, want still 5", st.Injected())
	}
	if next := st.Unwrap(); next == nil {
		t.Error("Unwrap: nil, want the wrapped store")
	}
}

// TestValidate names every bad rule at once.
func TestValidate(t *testing.T) {
	ok := errorfs.UniformFaults(1, 0.1)
	if err := ok.Validate(); err != nil {
		t.Errorf("UniformFaults: %v", err)
	}
	bad := errorfs.Faults{Rules: []errorfs.FaultRule{
		{Op: "fly", Kind: errorfs.FaultError, Rate: 0.1},
		{Op: storage.OpList, Kind: errorfs.FaultShortRead, Rate: 0.1},
		{Op: storage.OpPut, Kind: errorfs.FaultError, Rate: 2},
	}}
	err := bad.Validate()
	if err == nil {
		t.Fatal("bad rules: no error")
	}
	for _, want := range []string{`unknown op "fly"`, `kind "short_read" does not apply to op "list"`, "rate 2 outside 0..1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v; want it to say %s", err, want)
		}
	}
}
