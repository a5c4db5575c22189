// Package numfield works on the number fields of counters structs by
// reflection: Add sums one struct into another, field by field, so that a
// counter added to such a struct is summed without a line of its own (a
// line that, forgotten, would drop it from every total); Find and Float
// read a named field as a float64, for the exporters' tables of series.
package numfield

import (
	"fmt"
	"reflect"
	"strings"
	"time"
)

// Add adds each field of *src into the same field of *dst: integers and
// floats summed (wrapping as the type does), arrays element by element,
// nested structs field by field. A field tagged `numfield:"max"` keeps the
// larger of the two instead (a high-water mark). Every field must be
// exported and of those kinds: T is a counters struct of the caller's,
// and any other field panics, the first time its tests sum one.
func Add[T any](dst, src *T) {
	add(reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem(), false)
}

func add(d, s reflect.Value, keepMax bool) {
	switch {
	case d.Kind() == reflect.Struct:
		t := d.Type()
		for i := range d.NumField() {
			add(d.Field(i), s.Field(i), t.Field(i).Tag.Get("numfield") == "max")
		}
	case d.Kind() == reflect.Array:
		for i := range d.Len() {
			add(d.Index(i), s.Index(i), keepMax)
		}
	case d.CanInt():
		if keepMax {
			d.SetInt(max(d.Int(), s.Int()))
		} else {
			d.SetInt(d.Int() + s.Int())
		}
	case d.CanUint():
		if keepMax {
			d.SetUint(max(d.Uint(), s.Uint()))
		} else {
			d.SetUint(d.Uint() + s.Uint())
		}
	case d.CanFloat():
		if keepMax {
			d.SetFloat(max(d.Float(), s.Float()))
		} else {
			d.SetFloat(d.Float() + s.Float())
		}
	default:
		panic(fmt.Sprintf("numfield: cannot add a %s", d.Type()))
	}
}

// Find returns the index (for reflect's FieldByIndex) of the number field
// of struct type t at path, a field name or names joined by dots for a
// field of a nested struct, or an error naming path and t.
func Find(t reflect.Type, path string) ([]int, error) {
	var index []int
	for name := range strings.SplitSeq(path, ".") {
		if t.Kind() != reflect.Struct {
			return nil, fmt.Errorf("numfield: %s: %s is not a struct", path, t)
		}
		f, ok := t.FieldByName(name)
		if !ok || !f.IsExported() {
			return nil, fmt.Errorf("numfield: %s: %s has no field %s", path, t, name)
		}
		index, t = append(index, f.Index...), f.Type
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return index, nil
	}
	return nil, fmt.Errorf("numfield: %s is a %s, not a number", path, t)
}

// Float reads the field of struct v at index (from Find) as a float64; a
// time.Duration in seconds.
func Float(v reflect.Value, index []int) float64 {
	f := v.FieldByIndex(index)
	switch {
	case f.Type() == reflect.TypeFor[time.Duration]():
		return time.Duration(f.Int()).Seconds()
	case f.CanInt():
		return float64(f.Int())
	case f.CanUint():
		return float64(f.Uint())
	default:
		return f.Float()
	}
}
