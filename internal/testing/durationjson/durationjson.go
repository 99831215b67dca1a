// Package durationjson checks that payload types write their durations as
// strings for the Temporal UI and still read the nanoseconds that recorded
// histories hold (event.MarshalDurations).
package durationjson

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
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

// Check fails t unless every duration of each payload (pointers to
// structs) is written as a string ("1m30s") and reads back both from that
// and from nanoseconds.
func Check(t *testing.T, payloads ...any) {
	t.Helper()
	const d = 90 * time.Second
	for _, v := range payloads {
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
