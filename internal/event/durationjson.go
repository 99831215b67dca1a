package event

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"time"
)

// MarshalDurations marshals the struct v as encoding/json would, except
// that its time.Duration fields are written as Duration strings ("6h0m0s").
// A payload type opts in with two one-line methods:
//
//	func (v T) MarshalJSON() ([]byte, error)  { return event.MarshalDurations(v) }
//	func (p *T) UnmarshalJSON(b []byte) error { return event.UnmarshalDurations(b, p) }
//
// It works through a shadow struct type (same fields, names and tags, with
// Duration in place of time.Duration) built once per type: the shadow has no
// methods, so encoding/json does not recurse into the payload's own
// MarshalJSON. Nested struct fields keep their own type (and their own JSON
// methods); unexported fields are not written, as encoding/json does.
func MarshalDurations(v any) ([]byte, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	sh, err := shadowOf(rv.Type())
	if err != nil {
		return nil, err
	}
	out := reflect.New(sh.typ).Elem()
	for i, src := range sh.fields {
		out.Field(i).Set(rv.Field(src).Convert(sh.typ.Field(i).Type))
	}
	return json.Marshal(out.Interface())
}

// UnmarshalDurations reads b into the struct *p, accepting each
// time.Duration field as a Duration string or as the JSON number of
// nanoseconds time.Duration marshals as (so payloads recorded before a type
// opted in still decode: a workflow history replays). Fields absent from b
// keep their value, as with encoding/json.
func UnmarshalDurations(b []byte, p any) error {
	rv := reflect.ValueOf(p)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("event: UnmarshalDurations needs a non-nil pointer, got %T", p)
	}
	rv = rv.Elem()
	sh, err := shadowOf(rv.Type())
	if err != nil {
		return err
	}
	tmp := reflect.New(sh.typ).Elem()
	for i, src := range sh.fields {
		tmp.Field(i).Set(rv.Field(src).Convert(sh.typ.Field(i).Type))
	}
	if err := json.Unmarshal(b, tmp.Addr().Interface()); err != nil {
		return err
	}
	for i, src := range sh.fields {
		rv.Field(src).Set(tmp.Field(i).Convert(rv.Field(src).Type()))
	}
	return nil
}

type shadow struct {
	typ    reflect.Type
	fields []int // shadow field i is the payload's field fields[i]
}

var shadows sync.Map // reflect.Type → *shadow

var (
	durationType = reflect.TypeFor[time.Duration]()
	jsonDuration = reflect.TypeFor[Duration]()
)

func shadowOf(t reflect.Type) (*shadow, error) {
	if s, ok := shadows.Load(t); ok {
		return s.(*shadow), nil
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("event: durations JSON of %v: not a struct", t)
	}
	s := &shadow{}
	var fields []reflect.StructField
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Anonymous {
			// An embedded field's promoted JSON methods would be lost in
			// the shadow; no payload embeds one today.
			return nil, fmt.Errorf("event: durations JSON of %v: embedded field %s is not supported", t, f.Name)
		}
		sf := reflect.StructField{Name: f.Name, Type: f.Type, Tag: f.Tag}
		if f.Type == durationType {
			sf.Type = jsonDuration
		}
		fields = append(fields, sf)
		s.fields = append(s.fields, i)
	}
	s.typ = reflect.StructOf(fields)
	got, _ := shadows.LoadOrStore(t, s)
	return got.(*shadow), nil
}
