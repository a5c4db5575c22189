package affinity

import (
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

func TestReadSysfs(t *testing.T) {
	fsys := fstest.MapFS{
		"online": {Data: []byte("0-2,4\n")},
		// cpu0 and cpu2 are siblings; cpu1's sibling file omits itself.
		"cpu0/topology/core_id":              {Data: []byte("0\n")},
		"cpu0/topology/physical_package_id":  {Data: []byte("0\n")},
		"cpu0/topology/thread_siblings_list": {Data: []byte("0,2\n")},
		"cpu1/topology/core_id":              {Data: []byte("1\n")},
		"cpu1/topology/physical_package_id":  {Data: []byte("0\n")},
		"cpu1/topology/thread_siblings_list": {Data: []byte("\n")},
		"cpu2/topology/core_id":              {Data: []byte("0\n")},
		"cpu2/topology/physical_package_id":  {Data: []byte("0\n")},
		"cpu2/topology/thread_siblings_list": {Data: []byte("0,2\n")},
		// cpu4 has no topology directory at all.
	}
	online, cpus, err := readSysfs(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(online, []int{0, 1, 2, 4}) {
		t.Errorf("online = %v", online)
	}
	want := []CPU{
		{ID: 0, Core: 0, Package: 0, Siblings: []int{0, 2}},
		{ID: 1, Core: 1, Package: 0, Siblings: []int{1}},
		{ID: 2, Core: 0, Package: 0, Siblings: []int{0, 2}},
		{ID: 4, Core: -1, Package: -1, Siblings: []int{4}},
	}
	if !slices.EqualFunc(cpus, want, func(a, b CPU) bool {
		return a.ID == b.ID && a.Core == b.Core && a.Package == b.Package && slices.Equal(a.Siblings, b.Siblings)
	}) {
		t.Errorf("cpus = %+v\nwant   %+v", cpus, want)
	}

	topo := Topology{Online: online, Allowed: online, CPUs: cpus}
	if got := topo.allowedCores(); got != 3 {
		t.Errorf("allowedCores = %d, want 3", got)
	}
	if got := Plan(3, topo).CPUs; !slices.Equal(got, []int{0, 1, 4}) {
		t.Errorf("Plan(3) = %v, want [0 1 4]", got)
	}
}

func TestReadSysfsMissing(t *testing.T) {
	online, cpus, err := readSysfs(fstest.MapFS{})
	if err != nil || online != nil || cpus != nil {
		t.Errorf("readSysfs(empty) = %v, %v, %v; want nothing and no error", online, cpus, err)
	}
}

func TestReadSysfsMalformed(t *testing.T) {
	for _, tc := range []struct {
		fsys fstest.MapFS
		want string
	}{
		{fstest.MapFS{"online": {Data: []byte("0-\n")}}, `/sys/devices/system/cpu/online: malformed CPU list "0-"`},
		{fstest.MapFS{
			"online":                {Data: []byte("0\n")},
			"cpu0/topology/core_id": {Data: []byte("zero\n")},
		}, `/sys/devices/system/cpu/cpu0/topology/core_id: malformed integer "zero"`},
		{fstest.MapFS{
			"online":                             {Data: []byte("0\n")},
			"cpu0/topology/thread_siblings_list": {Data: []byte("0,,1\n")},
		}, `thread_siblings_list: malformed CPU list "0,,1"`},
	} {
		_, _, err := readSysfs(tc.fsys)
		if err == nil || !strings.HasPrefix(err.Error(), "affinity: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("readSysfs error %v, want one containing %q", err, tc.want)
		}
	}
}

func TestDetect(t *testing.T) {
	topo, err := Detect()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s\n%s", topo, topo.Summary())
	if len(topo.Allowed) == 0 {
		t.Fatal("no allowed CPUs")
	}
	for _, id := range topo.Allowed {
		if !slices.Contains(topo.Online, id) {
			t.Errorf("allowed CPU %d is not online (%v)", id, topo.Online)
		}
	}
	for _, c := range topo.CPUs {
		if !slices.Contains(c.Siblings, c.ID) {
			t.Errorf("CPU %d is not among its siblings %v", c.ID, c.Siblings)
		}
	}
	if s := topo.String(); !strings.Contains(s, "allowed "+formatCPUList(topo.Allowed)) {
		t.Errorf("String() does not list the allowed CPUs:\n%s", s)
	}
}
