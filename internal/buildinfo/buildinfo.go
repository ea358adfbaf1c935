// Package buildinfo says which ql3 is running, from the build information the Go toolchain
// embeds: the module version, the VCS revision it was built from and the Go version. Receipts and
// reports record it so that an auditor knows which ql3 wrote them.
package buildinfo

import (
	"runtime/debug"
	"strings"

	"github.com/qinglong/ql3/evidence"
)

// Info identifies a ql3 build.
type Info struct {
	Module    string `json:"module"`
	Version   string `json:"version"`            // the module version, "(devel)" for a build from a checkout
	Revision  string `json:"revision,omitempty"` // VCS revision, absent when the build has none (go test, -buildvcs=false)
	Modified  bool   `json:"modified,omitempty"` // the checkout had uncommitted changes
	GoVersion string `json:"goVersion"`
}

// Read returns the running binary's build information.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Module: "github.com/qinglong/ql3", Version: "unknown", GoVersion: "unknown"}
	}
	return fromBuildInfo(bi)
}

func fromBuildInfo(bi *debug.BuildInfo) Info {
	in := Info{Module: bi.Main.Path, Version: bi.Main.Version, GoVersion: bi.GoVersion}
	if in.Version == "" {
		in.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is the one-line form `ql3 version` prints: version, revision (with +dirty for a modified
// checkout) and Go version.
func (in Info) String() string {
	var b strings.Builder
	b.WriteString("ql3 ")
	b.WriteString(in.Version)
	if in.Revision != "" {
		b.WriteString(" revision ")
		b.WriteString(in.Revision)
		if in.Modified {
			b.WriteString("+dirty")
		}
	}
	b.WriteString(" ")
	b.WriteString(in.GoVersion)
	return b.String()
}

// Writer is Info as the records carry it.
func (in Info) Writer() *evidence.Writer {
	return &evidence.Writer{Module: in.Module, Version: in.Version, Revision: in.Revision, Modified: in.Modified, GoVersion: in.GoVersion}
}
