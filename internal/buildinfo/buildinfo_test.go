package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	vcs := func(rev, at, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: at}, {Key: "vcs.modified", Value: modified}}
	}
	for _, c := range []struct {
		name string
		bi   debug.BuildInfo
		want Info
		line string
	}{
		{"built in a clone",
			debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: Module + "/cmd/ackbench", Version: "v0.0.0-20261203095750-be8024cd795c"},
				Deps:     []*debug.Module{{Path: Module, Version: "(devel)"}},
				Settings: vcs("be8024cd795c8552472ff5cb6ae799fa9eb5da6d", "2026-12-03T09:57:50Z", "false")},
			Info{Path: Module + "/cmd/ackbench", MainVersion: "v0.0.0-20261203095750-be8024cd795c", Version: "(devel)",
				Revision: "be8024cd795c8552472ff5cb6ae799fa9eb5da6d", Time: "2026-12-03T09:57:50Z", Modified: "false", GoVersion: "go1.26.8"},
			"ackbench v0.0.0-20261203095750-be8024cd795c (module github.com/xorack/xorack/cmd/ackbench, revision be8024cd795c8552472ff5cb6ae799fa9eb5da6d, time 2026-12-03T09:57:50Z, modified false, go1.26.8)"},
		{"built in a modified clone",
			debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: Module, Version: "v0.0.0-20261203095750-be8024cd795c+dirty"},
				Settings: vcs("be8024cd795c8552472ff5cb6ae799fa9eb5da6d", "2026-12-03T09:57:50Z", "true")},
			Info{Path: Module, MainVersion: "v0.0.0-20261203095750-be8024cd795c+dirty", Version: "v0.0.0-20261203095750-be8024cd795c+dirty",
				Revision: "be8024cd795c8552472ff5cb6ae799fa9eb5da6d+dirty", Time: "2026-12-03T09:57:50Z", Modified: "true", GoVersion: "go1.26.8"},
			"ackerd v0.0.0-20261203095750-be8024cd795c+dirty (module github.com/xorack/xorack, revision be8024cd795c8552472ff5cb6ae799fa9eb5da6d, time 2026-12-03T09:57:50Z, modified true, go1.26.8)"},
		{"go install @pseudo-version: the revision and time from the version",
			debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: Module, Version: "v0.0.0-20261203095750-be8024cd795c"}},
			Info{Path: Module, MainVersion: "v0.0.0-20261203095750-be8024cd795c", Version: "v0.0.0-20261203095750-be8024cd795c",
				Revision: "be8024cd795c", Time: "2026-12-03T09:57:50Z", Modified: "false", GoVersion: "go1.26.8"},
			"ackerd v0.0.0-20261203095750-be8024cd795c (module github.com/xorack/xorack, revision be8024cd795c, time 2026-12-03T09:57:50Z, modified false, go1.26.8)"},
		{"go install @tag",
			debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: Module, Version: "v0.3.1"}},
			Info{Path: Module, MainVersion: "v0.3.1", Version: "v0.3.1", Revision: "unknown", Modified: "unknown", GoVersion: "go1.26.8"},
			"ackerd v0.3.1 (module github.com/xorack/xorack, revision unknown, time unknown, modified unknown, go1.26.8)"},
		{"-buildvcs=false",
			debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: Module, Version: "(devel)"}},
			Info{Path: Module, MainVersion: "(devel)", Version: "(devel)", Revision: "unknown", Modified: "unknown", GoVersion: "go1.26.8"},
			"ackerd (devel) (module github.com/xorack/xorack, revision unknown, time unknown, modified unknown, go1.26.8)"},
		{"a dependency of an embedder",
			debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "example.com/app", Version: "v1.0.0"},
				Deps: []*debug.Module{{Path: Module, Version: "v0.2.0"}}},
			Info{Path: "example.com/app", MainVersion: "v1.0.0", Version: "v0.2.0", Revision: "unknown", Modified: "unknown", GoVersion: "go1.26.8"},
			"app v1.0.0 (module example.com/app, revision unknown, time unknown, modified unknown, go1.26.8)"},
	} {
		got := FromBuildInfo(&c.bi)
		if got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
		if l, names := got.Labels(), LabelNames(); len(l) != len(names) || l[0] != c.want.Version || l[1] != c.want.Revision || l[2] != c.want.GoVersion {
			t.Errorf("%s: Labels %q for %q", c.name, l, names)
		}
		cmd, _, _ := strings.Cut(c.line, " ")
		if line := got.Line(cmd); line != c.line {
			t.Errorf("%s: Line\n got %q\nwant %q", c.name, line, c.line)
		}
	}
}
