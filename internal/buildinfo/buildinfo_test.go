package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	vectors := []struct {
		bi   debug.BuildInfo
		want string // String()
	}{
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/qinglong/ql3", Version: "v0.3.0"}},
			"ql3 v0.3.0 go1.26.8"},
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/qinglong/ql3"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "15f1570"}, {Key: "vcs.modified", Value: "false"}}},
			"ql3 (devel) revision 15f1570 go1.26.8"},
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/qinglong/ql3", Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"}}},
			"ql3 (devel) revision abc+dirty go1.26.8"},
	}
	for _, v := range vectors {
		if got := fromBuildInfo(&v.bi).String(); got != v.want {
			t.Errorf("got %q, want %q", got, v.want)
		}
	}
}

func TestReadRunning(t *testing.T) {
	in := Read()
	if in.GoVersion == "" || in.Module == "" || in.Version == "" {
		t.Fatalf("incomplete build info %+v", in)
	}
}
