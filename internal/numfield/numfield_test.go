package numfield

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

type inner struct {
	N uint8
	F float64
}

type counts struct {
	A    uint64
	B, C int
	D    time.Duration
	Arr  [3]uint32
	In   inner
	High int64  `numfield:"max"`
	Top  [2]int `numfield:"max"`
}

// TestAdd: every kind is summed, wrapping as its type does, and the
// fields tagged max keep the larger value.
func TestAdd(t *testing.T) {
	dst := counts{A: 1, B: -2, C: 3, D: time.Second, Arr: [3]uint32{1, 2, 3}, In: inner{N: 250, F: 0.5}, High: 7, Top: [2]int{5, 1}}
	src := counts{A: 10, B: 5, C: -3, D: time.Millisecond, Arr: [3]uint32{10, 0, 1}, In: inner{N: 10, F: 0.25}, High: 4, Top: [2]int{2, 9}}
	Add(&dst, &src)
	want := counts{A: 11, B: 3, C: 0, D: time.Second + time.Millisecond, Arr: [3]uint32{11, 2, 4}, In: inner{N: 4, F: 0.75}, High: 7, Top: [2]int{5, 9}}
	if dst != want {
		t.Fatalf("Add = %+v, want %+v", dst, want)
	}
	if src.A != 10 || src.High != 4 {
		t.Fatalf("Add changed its source: %+v", src)
	}
}

// TestAddRefuses: a field that is not a number panics, naming its type.
func TestAddRefuses(t *testing.T) {
	type bad struct {
		N    int
		Name string
	}
	defer func() {
		if r, _ := recover().(string); !strings.Contains(r, "string") {
			t.Fatalf("recovered %q, want a panic naming the string field", r)
		}
	}()
	Add(&bad{}, &bad{})
}

// TestFindFloat: Find resolves a field, a nested one by a dotted path,
// and refuses what is not a number field; Float reads counts as they are
// and durations in seconds.
func TestFindFloat(t *testing.T) {
	c := counts{A: 3, B: -2, D: 1500 * time.Millisecond, In: inner{N: 9, F: 0.25}}
	v := reflect.ValueOf(c)
	for path, want := range map[string]float64{"A": 3, "B": -2, "D": 1.5, "In.N": 9, "In.F": 0.25} {
		idx, err := Find(v.Type(), path)
		if err != nil {
			t.Fatal(err)
		}
		if got := Float(v, idx); got != want {
			t.Errorf("%s = %v, want %v", path, got, want)
		}
	}
	for _, bad := range []string{"Nope", "In", "Arr", "A.B", "In.Nope", "name"} {
		if _, err := Find(reflect.TypeFor[counts](), bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("Find(%q): %v, want an error naming it", bad, err)
		}
	}
}
