// Package buildinfo reads what the Go toolchain recorded in a binary about
// how it was built (runtime/debug.ReadBuildInfo): the module and its
// version, the VCS revision, its commit time and whether the tree was
// modified, the Go version. Commands print it for -version, all in one
// format (Info.Line), and exporters label a build-info series with it, all
// with the same labels (LabelNames, Info.Labels).
//
// A build from a clone (go build, go install ./cmd/ackerd) records the
// revision, its time and the modified flag, and versions the module by its
// pseudo-version (with +dirty when modified); `go install ...@version`
// records the version alone, and the revision and time are then read from
// a pseudo-version. A build with -buildvcs=false records neither: those
// fields are "unknown".
package buildinfo

import (
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// Module is xorack's module path: Version is this module's, whether the
// binary is xorack's own command or an embedder's.
const Module = "github.com/xorack/xorack"

// Info is what a binary says about its build. Fields the toolchain did not
// record are "unknown" (Time: empty).
type Info struct {
	Path        string // the binary's main module: github.com/xorack/xorack/cmd/ackbench
	MainVersion string // its version: v0.3.1, a pseudo-version (+dirty), (devel)
	Version     string // xorack's module version in the binary (the main module's when it is xorack)
	Revision    string // VCS revision, with "+dirty" when the tree was modified
	Time        string // the revision's commit time, RFC 3339
	Modified    string // "true", "false" or "unknown": the tree differed from the revision
	GoVersion   string // the toolchain that built it
}

// Read returns the running binary's build information.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Path: "unknown", MainVersion: "unknown", Version: "unknown", Revision: "unknown", Modified: "unknown", GoVersion: runtime.Version()}
	}
	return FromBuildInfo(bi)
}

// pseudo matches a pseudo-version's time and revision.
var pseudo = regexp.MustCompile(`^v\d+\.\d+\.\d+-(?:.*\.)?(\d{14})-([0-9a-f]{12})(?:\+.*)?$`)

// FromBuildInfo extracts Info from bi: xorack's module version whether it
// is the main module or a dependency.
func FromBuildInfo(bi *debug.BuildInfo) Info {
	in := Info{Path: or(bi.Main.Path), MainVersion: or(bi.Main.Version), Version: "unknown", Revision: "unknown", Modified: "unknown", GoVersion: or(bi.GoVersion)}
	if bi.Main.Path == Module {
		in.Version = or(bi.Main.Version)
	}
	for _, d := range bi.Deps {
		if d.Path == Module {
			in.Version = or(d.Version)
		}
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value
		}
	}
	if m := pseudo.FindStringSubmatch(bi.Main.Version); m != nil && in.Revision == "unknown" {
		// go install ...@version: the module zip has no VCS, its version
		// names the commit.
		in.Revision = m[2]
		if t, err := time.Parse("20060102150405", m[1]); err == nil {
			in.Time = t.Format(time.RFC3339)
		}
		in.Modified = "false"
	}
	if in.Modified == "true" {
		in.Revision += "+dirty"
	}
	return in
}

func or(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// String is the part of the -version line after the command's name.
func (in Info) String() string {
	t := in.Time
	if t == "" {
		t = "unknown"
	}
	return fmt.Sprintf("%s (module %s, revision %s, time %s, modified %s, %s)",
		in.MainVersion, in.Path, strings.TrimSuffix(in.Revision, "+dirty"), t, in.Modified, in.GoVersion)
}

// LabelNames are the labels of the build-info series every exporter of
// xorack's serves (a gauge, always 1: ackerd's ackerd_build_info, the
// engine's xorack_topology_build_info), in the order of Labels' values.
func LabelNames() []string { return []string{"version", "revision", "goversion"} }

// Labels are in's values for LabelNames: xorack's module version, the VCS
// revision ("+dirty" when the tree was modified) and the Go version.
func (in Info) Labels() []string { return []string{in.Version, in.Revision, in.GoVersion} }

// Line is the one line every xorack command prints for -version:
//
//	ackerd v0.0.0-20261203095750-be8024cd795c (module github.com/xorack/xorack, revision be8024cd795c8552472ff5cb6ae799fa9eb5da6d, time 2026-12-03T09:57:50Z, modified false, go1.26.8)
func (in Info) Line(command string) string { return command + " " + in.String() }
