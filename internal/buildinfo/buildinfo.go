// Package buildinfo reads what the Go toolchain recorded in a binary about
// how it was built (runtime/debug.ReadBuildInfo): the module version, the
// VCS revision and time, the Go version. Commands print it for -version and
// exporters label a build-info series with it.
package buildinfo

import (
	"fmt"
	"runtime/debug"
)

// Module is xorack's module path: the version reported is this module's,
// whether the binary is xorack's own command or an embedder's.
const Module = "github.com/xorack/xorack"

// Info is what a binary says about its build. Fields the toolchain did not
// record are "unknown" (Version, Revision) or empty (Time).
type Info struct {
	Version   string // module version: v0.3.1 from go install ...@v0.3.1, (devel) from a checkout
	Revision  string // vcs.revision, with "+dirty" when vcs.modified
	Time      string // vcs.time, RFC 3339
	GoVersion string // the toolchain that built it
}

// Read returns the running binary's build information.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "unknown", Revision: "unknown", GoVersion: "unknown"}
	}
	return FromBuildInfo(bi)
}

// FromBuildInfo extracts Info from bi: xorack's module version whether it
// is the main module or a dependency.
func FromBuildInfo(bi *debug.BuildInfo) Info {
	in := Info{Version: "unknown", Revision: "unknown", GoVersion: bi.GoVersion}
	if bi.Main.Path == Module {
		in.Version = bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == Module {
			in.Version = d.Version
		}
	}
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified {
		in.Revision += "+dirty"
	}
	if in.Version == "" {
		in.Version = "unknown"
	}
	return in
}

// String is the one line a -version flag prints, after the command's name.
func (in Info) String() string {
	s := fmt.Sprintf("%s (revision %s", in.Version, in.Revision)
	if in.Time != "" {
		s += ", " + in.Time
	}
	return s + ", " + in.GoVersion + ")"
}
