package affinity

import (
	"fmt"
	"slices"
	"strings"

	"github.com/klauspost/cpuid/v2"
)

// Topology describes the machine a benchmark runs on: what CPUID says about
// the processor, and what the operating system says about the CPUs this
// process may use and how they share physical cores.
//
// A Topology is a plain value. Detect fills it from the running machine;
// tests and planners may build one by hand.
type Topology struct {
	// From CPUID (github.com/klauspost/cpuid/v2). Under a hypervisor these
	// describe the virtual CPU the hypervisor presents, core counts included:
	// trust Allowed and CPUs, not LogicalCores, for what this process may use.

	Vendor     string // vendor string, e.g. "AuthenticAMD"; "" if unknown
	Brand      string // brand string, e.g. "AMD EPYC 9B45"; "" if unknown
	Hypervisor string // hypervisor, e.g. "KVM"; "" on bare metal
	Family     int
	Model      int
	Stepping   int

	CacheLine int // bytes; 0 if unknown
	L1D       int // bytes, per core; -1 if unknown
	L1I       int // bytes, per core; -1 if unknown
	L2        int // bytes; -1 if unknown
	L3        int // bytes; -1 if unknown

	LogicalCores   int // as CPUID reports; 0 if unknown
	PhysicalCores  int // as CPUID reports; 0 if unknown
	ThreadsPerCore int // as CPUID reports; 1 if unknown

	AVX2   bool
	AVX512 bool // AVX-512 Foundation (AVX512F)

	// From the operating system (Linux only; empty elsewhere).

	// Online lists the online CPUs (/sys/devices/system/cpu/online), sorted.
	Online []int
	// Allowed lists the CPUs the detecting thread may run on
	// (sched_getaffinity), sorted. Plan and Pin draw from this set.
	Allowed []int
	// CPUs describes each online CPU, sorted by ID. It may be empty when
	// sysfs is not mounted; planners then treat every allowed CPU as its own
	// physical core.
	CPUs []CPU
}

// CPU is one logical CPU as Linux numbers it.
type CPU struct {
	ID      int
	Core    int // core_id: unique within a package only; -1 if unknown
	Package int // physical_package_id; -1 if unknown
	// Siblings are the logical CPUs sharing this CPU's physical core
	// (thread_siblings_list), sorted, including ID itself.
	Siblings []int
}

// fillCPUID copies what CPUID reports into t.
func (t *Topology) fillCPUID() {
	c := &cpuid.CPU
	t.Vendor = strings.TrimSpace(c.VendorString)
	t.Brand = strings.TrimSpace(c.BrandName)
	t.Hypervisor = strings.TrimSpace(c.HypervisorVendorString)
	if c.HypervisorVendorID != cpuid.VendorUnknown {
		t.Hypervisor = c.HypervisorVendorID.String() // "Bhyve" rather than "bhyve bhyve "
	}
	t.Family, t.Model, t.Stepping = c.Family, c.Model, c.Stepping
	t.CacheLine = c.CacheLine
	t.L1D, t.L1I, t.L2, t.L3 = c.Cache.L1D, c.Cache.L1I, c.Cache.L2, c.Cache.L3
	t.LogicalCores, t.PhysicalCores, t.ThreadsPerCore = c.LogicalCores, c.PhysicalCores, c.ThreadsPerCore
	t.AVX2 = c.Supports(cpuid.AVX2)
	t.AVX512 = c.Supports(cpuid.AVX512F)
}

// cpu returns the description of CPU id, if t has one.
func (t *Topology) cpu(id int) (CPU, bool) {
	i, ok := slices.BinarySearchFunc(t.CPUs, id, func(c CPU, id int) int { return c.ID - id })
	if !ok {
		return CPU{}, false
	}
	return t.CPUs[i], true
}

// coreOf names the physical core CPU id belongs to by the lowest-numbered
// CPU on that core. core_id cannot serve: it repeats across packages. A CPU
// without sysfs information is its own core.
func (t *Topology) coreOf(id int) int {
	if c, ok := t.cpu(id); ok && len(c.Siblings) > 0 {
		return min(c.Siblings[0], id)
	}
	return id
}

// allowedCores returns the number of distinct physical cores among the
// allowed CPUs.
func (t Topology) allowedCores() int {
	seen := make(map[int]struct{}, len(t.Allowed))
	for _, id := range t.Allowed {
		seen[t.coreOf(id)] = struct{}{}
	}
	return len(seen)
}

// Summary is a one-line description of the machine for a report header, e.g.
// "AMD EPYC 9B45 (AuthenticAMD 26/2/1, hypervisor KVM), 2 CPUs allowed
// (0-1) on 2 cores, L1d 48 KiB, L2 1 MiB, L3 n/a, line 64 B, AVX2, AVX-512".
func (t Topology) Summary() string {
	var sb strings.Builder
	sb.WriteString(orUnknown(t.Brand))
	fmt.Fprintf(&sb, " (%s %d/%d/%d", orUnknown(t.Vendor), t.Family, t.Model, t.Stepping)
	if t.Hypervisor != "" {
		fmt.Fprintf(&sb, ", hypervisor %s", t.Hypervisor)
	}
	sb.WriteString(")")
	if len(t.Allowed) > 0 {
		fmt.Fprintf(&sb, ", %d CPUs allowed (%s) on %d cores",
			len(t.Allowed), formatCPUList(t.Allowed), t.allowedCores())
	}
	fmt.Fprintf(&sb, ", L1d %s, L2 %s, L3 %s, line %s",
		formatBytes(t.L1D), formatBytes(t.L2), formatBytes(t.L3), formatBytes(t.CacheLine))
	if t.AVX2 {
		sb.WriteString(", AVX2")
	}
	if t.AVX512 {
		sb.WriteString(", AVX-512")
	}
	return sb.String()
}

// String describes the machine over several aligned lines, for the head of a
// benchmark report. It ends without a newline.
func (t Topology) String() string {
	var sb strings.Builder
	line := func(key, format string, args ...any) {
		if sb.Len() > 0 {
			sb.WriteByte('\n')
		}
		fmt.Fprintf(&sb, "%-12s", key+":")
		fmt.Fprintf(&sb, format, args...)
	}
	line("cpu", "%s", orUnknown(t.Brand))
	line("vendor", "%s family %d model %d stepping %d",
		orUnknown(t.Vendor), t.Family, t.Model, t.Stepping)
	if t.Hypervisor != "" {
		line("hypervisor", "%s (CPUID core counts describe the virtual CPU)", t.Hypervisor)
	}
	line("cpuid", "%d logical, %d physical cores, %s per core",
		t.LogicalCores, t.PhysicalCores, plural(t.ThreadsPerCore, "thread"))
	if len(t.Allowed) > 0 || len(t.Online) > 0 {
		line("os", "online %s; allowed %s (%d CPUs on %d physical cores)",
			orUnknown(formatCPUList(t.Online)), orUnknown(formatCPUList(t.Allowed)),
			len(t.Allowed), t.allowedCores())
		line("smt", "%s", t.smtSummary())
	}
	line("caches", "L1d %s, L1i %s, L2 %s, L3 %s, line %s",
		formatBytes(t.L1D), formatBytes(t.L1I), formatBytes(t.L2), formatBytes(t.L3),
		formatBytes(t.CacheLine))
	line("vector", "AVX2 %s, AVX-512 %s", yesNo(t.AVX2), yesNo(t.AVX512))
	return sb.String()
}

// smtSummary lists the groups of allowed CPUs that share a physical core.
func (t Topology) smtSummary() string {
	if len(t.CPUs) == 0 {
		return "unknown (no per-CPU topology)"
	}
	groups := map[int][]int{}
	var order []int
	for _, id := range t.Allowed {
		core := t.coreOf(id)
		if _, ok := groups[core]; !ok {
			order = append(order, core)
		}
		groups[core] = append(groups[core], id)
	}
	var shared []string
	for _, core := range order {
		if g := groups[core]; len(g) > 1 {
			shared = append(shared, formatCPUList(g))
		}
	}
	if len(shared) == 0 {
		return "no two allowed CPUs share a physical core"
	}
	return "siblings " + strings.Join(shared, " ")
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// formatBytes renders a cache size: "48 KiB", "1 MiB", "64 B"; "n/a" for the
// 0 or -1 that cpuid uses for unknown.
func formatBytes(n int) string {
	switch {
	case n <= 0:
		return "n/a"
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d B", n)
	}
}

// Detect describes the running machine: the CPUID fields always, and on
// Linux the online CPUs, the calling thread's allowed set and each CPU's
// physical core. Call it before pinning anything: Allowed is the calling
// thread's mask, which Pin narrows.
//
// The CPUID fields are filled even when the error is non-nil, so a report
// can still print what is known. On other systems the error wraps
// errors.ErrUnsupported and the operating-system fields are empty.
func Detect() (Topology, error) {
	var t Topology
	t.fillCPUID()
	err := t.fillOS()
	return t, err
}
