package affinity

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// maxCPU is the largest CPU number parseCPUList accepts. Linux caps
// CONFIG_NR_CPUS at 8192 on every architecture it ships for; 1<<16 leaves
// room for growth while bounding what a hostile or corrupt list can make
// parseCPUList allocate (one int per listed CPU, so at most 512 KiB).
const maxCPU = 1<<16 - 1

// parseCPUList parses a Linux cpulist, the format of
// /sys/devices/system/cpu/online and of thread_siblings_list: comma-separated
// elements, each a CPU number or an inclusive range "lo-hi" with lo <= hi,
// for example "0-3,8,10-11". Surrounding white space (the trailing newline of
// a sysfs file) is ignored, and an empty list yields an empty set.
//
// The result is sorted and free of duplicates; overlapping elements are
// accepted, as the kernel accepts them. Anything else (empty elements, signs,
// spaces inside the list, reversed ranges, numbers above maxCPU, the
// "lo-hi:stride/group" form used on the kernel command line) is rejected with
// an error that quotes the whole input and names the offending element; the
// caller adds the package and the file the list came from.
func parseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return []int{}, nil
	}
	var cpus []int
	for elem := range strings.SplitSeq(s, ",") {
		lo, hi, err := parseCPURange(elem)
		if err != nil {
			return nil, fmt.Errorf("malformed CPU list %q: %w", s, err)
		}
		for c := lo; c <= hi; c++ {
			cpus = append(cpus, c)
		}
	}
	slices.Sort(cpus)
	return slices.Compact(cpus), nil
}

// parseCPURange parses one element of a cpulist: "n" or "lo-hi".
func parseCPURange(elem string) (lo, hi int, err error) {
	if elem == "" {
		return 0, 0, fmt.Errorf("empty element")
	}
	a, b, isRange := strings.Cut(elem, "-")
	if lo, err = parseCPUNumber(a, elem); err != nil {
		return 0, 0, err
	}
	if !isRange {
		return lo, lo, nil
	}
	if hi, err = parseCPUNumber(b, elem); err != nil {
		return 0, 0, err
	}
	if hi < lo {
		return 0, 0, fmt.Errorf("element %q: range runs backwards", elem)
	}
	return lo, hi, nil
}

// parseCPUNumber accepts only plain decimal digits: strconv.Atoi alone would
// let "+3" through.
func parseCPUNumber(num, elem string) (int, error) {
	if num == "" {
		return 0, fmt.Errorf("element %q: missing CPU number", elem)
	}
	for i := 0; i < len(num); i++ {
		if num[i] < '0' || num[i] > '9' {
			return 0, fmt.Errorf("element %q: unexpected character %q", elem, num[i])
		}
	}
	n, err := strconv.Atoi(num)
	if err != nil || n > maxCPU {
		return 0, fmt.Errorf("element %q: CPU number %s exceeds %d", elem, num, maxCPU)
	}
	return n, nil
}

// formatCPUList renders a set of CPU numbers in cpulist form, folding runs of
// consecutive numbers into ranges: {0,1,2,3,8,10,11} becomes "0-3,8,10-11".
// The input need not be sorted or unique; an empty set renders as "".
// parseCPUList(formatCPUList(cpus)) returns the sorted, deduplicated cpus.
func formatCPUList(cpus []int) string {
	if len(cpus) == 0 {
		return ""
	}
	sorted := slices.Clone(cpus)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	var sb strings.Builder
	for i := 0; i < len(sorted); {
		j := i
		for j+1 < len(sorted) && sorted[j+1] == sorted[j]+1 {
			j++
		}
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(sorted[i]))
		if j > i {
			sb.WriteByte('-')
			sb.WriteString(strconv.Itoa(sorted[j]))
		}
		i = j + 1
	}
	return sb.String()
}
