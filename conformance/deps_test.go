package conformance

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// conformanceOnly are the module paths this module adds for its tests; none may reach ql3's build.
var conformanceOnly = []string{
	"github.com/google/go-containerregistry",
	"github.com/in-toto/attestation",
	"github.com/secure-systems-lab/go-securesystemslib",
	"google.golang.org/protobuf",
	"github.com/docker/cli",
	"github.com/docker/docker-credential-helpers",
	"github.com/klauspost/compress",
	"github.com/sirupsen/logrus",
}

// TestConformanceDepsStayOut: ql3's own module neither requires these libraries nor builds them
// into the command: `go list -deps ./cmd/ql3`, run in ql3's module, lists none of their packages.
func TestConformanceDepsStayOut(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./cmd/ql3")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("deps_test.go: go list -deps ./cmd/ql3: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, m := range conformanceOnly {
			if pkg == m || strings.HasPrefix(pkg, m+"/") {
				t.Errorf("deps_test.go: ql3 builds %s, a conformance-only dependency", pkg)
			}
		}
	}
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range conformanceOnly[:3] {
		if strings.Contains(string(gomod), m) {
			t.Errorf("deps_test.go: ql3's go.mod names %s", m)
		}
	}
}
