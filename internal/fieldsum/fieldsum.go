// Package fieldsum adds one counters struct into another, field by field:
// the aggregation of per-shard or per-executor counters written once, so
// that a counter added to such a struct is summed without a line of its
// own (a line that, forgotten, would drop it from every total).
package fieldsum

import (
	"fmt"
	"reflect"
)

// Add adds each field of *src into the same field of *dst: integers and
// floats summed (wrapping as the type does), arrays element by element,
// nested structs field by field. A field tagged `fieldsum:"max"` keeps the
// larger of the two instead (a high-water mark). Every field must be
// exported and of those kinds: T is a counters struct of the caller's,
// and any other field panics, the first time its tests sum one.
func Add[T any](dst, src *T) {
	add(reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem(), false)
}

func add(d, s reflect.Value, keepMax bool) {
	switch d.Kind() {
	case reflect.Struct:
		t := d.Type()
		for i := range d.NumField() {
			add(d.Field(i), s.Field(i), t.Field(i).Tag.Get("fieldsum") == "max")
		}
	case reflect.Array:
		for i := range d.Len() {
			add(d.Index(i), s.Index(i), keepMax)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if keepMax {
			d.SetInt(max(d.Int(), s.Int()))
		} else {
			d.SetInt(d.Int() + s.Int())
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if keepMax {
			d.SetUint(max(d.Uint(), s.Uint()))
		} else {
			d.SetUint(d.Uint() + s.Uint())
		}
	case reflect.Float32, reflect.Float64:
		if keepMax {
			d.SetFloat(max(d.Float(), s.Float()))
		} else {
			d.SetFloat(d.Float() + s.Float())
		}
	default:
		panic(fmt.Sprintf("fieldsum: cannot add a %s", d.Type()))
	}
}
