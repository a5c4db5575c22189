package affinity

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// cpuLists are lists parseCPUList accepts, each with the CPUs it names.
// They and badCPULists seed FuzzParseCPUList.
var cpuLists = []struct {
	in   string
	want []int
}{
	{"", []int{}},
	{"\n", []int{}},
	{"0", []int{0}},
	{"0\n", []int{0}},
	{"0-3", []int{0, 1, 2, 3}},
	{"0-3,8,10-11", []int{0, 1, 2, 3, 8, 10, 11}},
	{"5-5", []int{5}},
	{"7,3,1", []int{1, 3, 7}},
	{"7,3,1\n", []int{1, 3, 7}},
	{"0-3,2-5", []int{0, 1, 2, 3, 4, 5}},
	{"1,1", []int{1}},
	{"0010", []int{10}},
	{"65535", []int{maxCPU}},
}

// badCPULists are lists parseCPUList refuses.
var badCPULists = []string{
	",",
	"0,",
	",0",
	"0,,1",
	"-",
	"-1",
	"1-",
	"3-1",
	"1--2",
	"1-2-3",
	"+1",
	"0x1",
	"a",
	"1 ,2",
	"1, 2",
	"0-3:2/4", // kernel command-line stride syntax, never in sysfs
	"65536",
	"0-65536",
	"99999999999999999999999",
	"1\x002",
}

func TestParseCPUList(t *testing.T) {
	for _, tc := range cpuLists {
		got, err := parseCPUList(tc.in)
		if err != nil {
			t.Errorf("parseCPUList(%q): %v", tc.in, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("parseCPUList(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestParseCPUListRejects(t *testing.T) {
	for _, in := range badCPULists {
		got, err := parseCPUList(in)
		if err == nil {
			t.Errorf("parseCPUList(%q) = %v, want an error", in, got)
			continue
		}
		// The error quotes the whole (trimmed) input.
		if msg, want := err.Error(), strconv.Quote(strings.TrimSpace(in)); !strings.Contains(msg, want) {
			t.Errorf("parseCPUList(%q) error %q does not quote %s", in, msg, want)
		}
	}
}

func TestFormatCPUList(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{
		{nil, ""},
		{[]int{0}, "0"},
		{[]int{0, 1}, "0-1"},
		{[]int{0, 1, 2, 3, 8, 10, 11}, "0-3,8,10-11"},
		{[]int{11, 10, 8, 3, 2, 1, 0, 8}, "0-3,8,10-11"},
		{[]int{1, 3, 5}, "1,3,5"},
	} {
		if got := formatCPUList(tc.in); got != tc.want {
			t.Errorf("formatCPUList(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzParseCPUList checks parseCPUList against formatCPUList: whatever
// parses must come back sorted and unique, and format to a list that parses
// to the same set. The seeds are the lists the tests above accept and
// refuse.
func FuzzParseCPUList(f *testing.F) {
	for _, tc := range cpuLists {
		f.Add(tc.in)
	}
	for _, s := range badCPULists {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := parseCPUList(s)
		if err != nil {
			return
		}
		if !slices.IsSorted(cpus) || len(slices.Compact(slices.Clone(cpus))) != len(cpus) {
			t.Fatalf("parseCPUList(%q) = %v: not sorted and unique", s, cpus)
		}
		again, err := parseCPUList(formatCPUList(cpus))
		if err != nil || !slices.Equal(again, cpus) {
			t.Fatalf("round trip of %q: %v, %v; want %v", s, again, err, cpus)
		}
	})
}
