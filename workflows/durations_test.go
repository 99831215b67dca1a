package workflows_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"reckon/workflows"
)

// setDurations sets every time.Duration field reachable in v (through
// nested structs, not pointers or slices) to d and returns how many.
func setDurations(v reflect.Value, d time.Duration) int {
	n := 0
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case !v.Type().Field(i).IsExported():
		case f.Type() == reflect.TypeFor[time.Duration]():
			f.SetInt(int64(d))
			n++
		case f.Kind() == reflect.Struct && f.Type() != reflect.TypeFor[time.Time]():
			n += setDurations(f, d)
		}
	}
	return n
}

// TestWorkflowPayloadDurationsReadable: every duration of the workflows'
// inputs and carried states is written as a string ("1m30s"), for the
// Temporal UI, and reads back from that and from the nanoseconds recorded
// histories hold (the replay tests replay those histories).
func TestWorkflowPayloadDurationsReadable(t *testing.T) {
	const d = 90 * time.Second
	for _, v := range []any{
		&workflows.RecomputeParams{}, &workflows.ReconcileParams{}, &workflows.ReplayParams{},
		&workflows.CorrectParams{}, &workflows.LateWatchState{}, &workflows.CompactionState{},
		&workflows.PaneArchiveState{}, &workflows.ArchiveState{}, &workflows.ZReportInput{},
		&workflows.FinalizeState{},
	} {
		rv := reflect.ValueOf(v).Elem()
		name := rv.Type().Name()
		n := setDurations(rv, d)
		if n == 0 {
			t.Errorf("%s: no duration field", name)
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := strings.Count(string(b), `"1m30s"`); got != n || strings.Contains(string(b), "90000000000") {
			t.Errorf("%s: %d of %d durations as strings: %s", name, got, n, b)
		}
		for form, js := range map[string]string{
			"strings": string(b), "nanoseconds": strings.ReplaceAll(string(b), `"1m30s"`, "90000000000"),
		} {
			back := reflect.New(rv.Type())
			if err := json.Unmarshal([]byte(js), back.Interface()); err != nil {
				t.Errorf("%s from %s: %v", name, form, err)
				continue
			}
			if !reflect.DeepEqual(back.Elem().Interface(), rv.Interface()) {
				t.Errorf("%s from %s:\n got %+v\nwant %+v", name, form, back.Elem().Interface(), rv.Interface())
			}
		}
	}
}
