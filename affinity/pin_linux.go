package affinity

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maskBits bounds the CPU mask getMask will grow to. The kernel rejects a
// sched_getaffinity buffer smaller than its own mask (nr_cpu_ids bits) with
// EINVAL, so getMask starts at the 1024 bits glibc's cpu_set_t holds and
// doubles; 1<<17 bits (16 KiB) is past any NR_CPUS Linux allows.
const maskBits = 1 << 17

// getMask returns the calling thread's affinity mask.
func getMask() (unix.CPUSetDynamic, error) {
	for n := 1024; ; n *= 2 {
		set := unix.NewCPUSet(n)
		err := unix.SchedGetaffinityDynamic(0, set)
		if err == nil {
			return set, nil
		}
		if !errors.Is(err, unix.EINVAL) || n >= maskBits {
			return nil, fmt.Errorf("affinity: sched_getaffinity: %w", err)
		}
	}
}

// maskCPUs lists the CPUs in a mask, sorted.
func maskCPUs(set unix.CPUSetDynamic) []int {
	cpus := make([]int, 0, set.Count())
	for cpu := range maskLen(set) {
		if set.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	return cpus
}

// maskLen is the number of CPUs a mask can hold. Its words are 32 bits
// wide on 32-bit platforms, 64 elsewhere.
func maskLen(set unix.CPUSetDynamic) int {
	return len(set) * int(unsafe.Sizeof(set[0])) * 8
}

// allowedCPUs lists the CPUs the calling thread may run on.
func allowedCPUs() ([]int, error) {
	set, err := getMask()
	if err != nil {
		return nil, err
	}
	return maskCPUs(set), nil
}

// pinOS is Pin on Linux.
func pinOS(cpu int) (unpin func(), err error) {
	runtime.LockOSThread()
	prev, err := getMask()
	if err != nil {
		runtime.UnlockOSThread()
		return func() {}, err
	}
	if cpu < 0 || !prev.IsSet(cpu) {
		runtime.UnlockOSThread()
		return func() {}, fmt.Errorf("affinity: CPU %d is not in the allowed set %q", cpu, formatCPUList(maskCPUs(prev)))
	}
	one := unix.NewCPUSet(maskLen(prev))
	one.Set(cpu)
	if err := unix.SchedSetaffinityDynamic(0, one); err != nil {
		runtime.UnlockOSThread()
		return func() {}, fmt.Errorf("affinity: pinning to CPU %d: %w", cpu, err)
	}
	done := false
	return func() {
		if done {
			return
		}
		done = true
		if unix.SchedSetaffinityDynamic(0, prev) == nil {
			runtime.UnlockOSThread()
		}
	}, nil
}

// currentCPUOS is CurrentCPU on Linux: the getcpu system call (x/sys has
// no portable wrapper for it).
func currentCPUOS() (int, error) {
	var cpu uint32
	_, _, errno := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), 0, 0)
	if errno != 0 {
		return -1, fmt.Errorf("affinity: getcpu: %w", errno)
	}
	return int(cpu), nil
}
