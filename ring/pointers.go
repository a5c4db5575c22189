package ring

import "reflect"

// hasPointers reports whether a T holds anything the garbage collector
// follows. The consumer clears a slot it lets go only then: a stale pointer
// left in a slot would keep its target alive until the producer wraps round
// to overwrite it, while a stale pointer-free element costs nothing, and
// clearing it would be a wasted store per element. Called once, in New.
func hasPointers[T any]() bool {
	return typeHasPointers(reflect.TypeFor[T]())
}

func typeHasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.UnsafePointer, reflect.Map, reflect.Chan,
		reflect.Func, reflect.Interface, reflect.Slice, reflect.String:
		return true
	case reflect.Array:
		return t.Len() > 0 && typeHasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if typeHasPointers(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}
