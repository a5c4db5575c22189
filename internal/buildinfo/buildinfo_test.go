package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	for _, c := range []struct {
		name string
		bi   debug.BuildInfo
		want Info
	}{
		{"installed", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: Module, Version: "v0.3.1"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-12-01T20:00:00Z"}}},
			Info{Version: "v0.3.1", Revision: "abc123", Time: "2026-12-01T20:00:00Z", GoVersion: "go1.26.0"}},
		{"checkout, modified", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: Module, Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}},
			Info{Version: "(devel)", Revision: "abc123+dirty", GoVersion: "go1.26.0"}},
		{"a dependency of an embedder", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "example.com/app", Version: "v1.0.0"},
			Deps: []*debug.Module{{Path: Module, Version: "v0.2.0"}}},
			Info{Version: "v0.2.0", Revision: "unknown", GoVersion: "go1.26.0"}},
		{"not linked in", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "example.com/app"}},
			Info{Version: "unknown", Revision: "unknown", GoVersion: "go1.26.0"}},
	} {
		if got := FromBuildInfo(&c.bi); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
	in := Info{Version: "v0.3.1", Revision: "abc123", Time: "2026-12-01T20:00:00Z", GoVersion: "go1.26.0"}
	if got, want := in.String(), "v0.3.1 (revision abc123, 2026-12-01T20:00:00Z, go1.26.0)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
