package audit_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAuditorImportGraph: the offline auditor cannot run a program or open a socket because
// nothing it is built from can: no os/exec, no net (nor net/http, crypto/tls, crypto/x509, which
// reach it), no client-go.
func TestAuditorImportGraph(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/qinglong/ql3/audit").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 20 {
		t.Fatalf("go list -deps printed %d packages: the listing is broken", len(deps))
	}
	for _, pkg := range deps {
		switch {
		case pkg == "os/exec", pkg == "net", strings.HasPrefix(pkg, "net/"), pkg == "crypto/tls", pkg == "crypto/x509",
			pkg == "plugin", strings.HasPrefix(pkg, "k8s.io/client-go/"), pkg == "github.com/qinglong/ql3/ceremony",
			pkg == "github.com/qinglong/ql3/internal/kubectl":
			t.Errorf("the auditor depends on %s", pkg)
		}
	}
}
