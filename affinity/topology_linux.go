package affinity

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// sysCPU is where Linux describes its CPUs.
const sysCPU = "/sys/devices/system/cpu"

func (t *Topology) fillOS() error {
	allowed, err := allowedCPUs()
	if err != nil {
		return err
	}
	t.Allowed = allowed
	t.Online, t.CPUs, err = readSysfs(os.DirFS(sysCPU))
	return err
}

// readSysfs reads the online CPU list and each online CPU's topology from a
// tree laid out like /sys/devices/system/cpu. A missing tree or a missing
// topology directory is not an error (containers may hide sysfs): the
// affected fields read as unknown. A file that exists but does not parse is
// an error naming the file and its content.
func readSysfs(root fs.FS) (online []int, cpus []CPU, err error) {
	online, err = readCPUListFile(root, "online")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	cpus = make([]CPU, 0, len(online))
	for _, id := range online {
		c := CPU{ID: id, Core: -1, Package: -1, Siblings: []int{id}}
		dir := "cpu" + strconv.Itoa(id) + "/topology/"
		if c.Core, err = readIntFile(root, dir+"core_id"); err != nil {
			return nil, nil, err
		}
		if c.Package, err = readIntFile(root, dir+"physical_package_id"); err != nil {
			return nil, nil, err
		}
		sib, err := readCPUListFile(root, dir+"thread_siblings_list")
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, nil, err
		default:
			// Keep the invariant that a CPU is its own sibling even if the
			// file says otherwise.
			if _, found := slices.BinarySearch(sib, id); !found {
				sib = append(sib, id)
				slices.Sort(sib)
			}
			c.Siblings = sib
		}
		cpus = append(cpus, c)
	}
	return online, cpus, nil
}

// readCPUListFile parses a cpulist file. A missing file is reported with an
// error wrapping fs.ErrNotExist.
func readCPUListFile(root fs.FS, name string) ([]int, error) {
	b, err := fs.ReadFile(root, name)
	if err != nil {
		return nil, fmt.Errorf("affinity: reading %s: %w", filepath.Join(sysCPU, name), err)
	}
	cpus, err := parseCPUList(string(b))
	if err != nil {
		return nil, fmt.Errorf("affinity: %s: %w", filepath.Join(sysCPU, name), err)
	}
	return cpus, nil
}

// readIntFile reads a sysfs integer such as core_id; a missing file reads as
// -1 (unknown) without error.
func readIntFile(root fs.FS, name string) (int, error) {
	b, err := fs.ReadFile(root, name)
	if errors.Is(err, fs.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return -1, fmt.Errorf("affinity: reading %s: %w", filepath.Join(sysCPU, name), err)
	}
	s := strings.TrimSpace(string(b))
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1, fmt.Errorf("affinity: %s: malformed integer %q", filepath.Join(sysCPU, name), s)
	}
	return n, nil
}
