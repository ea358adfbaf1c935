package audit_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAuditorImportGraph: the offline auditor cannot run a program or open a socket because
// nothing it is built from can: no os/exec, no net (nor net/http, crypto/tls, crypto/x509, which
// reach it), no client-go. The auditor and history are pure readers of stored bytes, so neither
// reaches the ceremony that produced them (the judgments both share live under verdict/), the
// kubectl runner or a test bed.
func TestAuditorImportGraph(t *testing.T) {
	for _, root := range []string{"github.com/qinglong/ql3/audit", "github.com/qinglong/ql3/history"} {
		out, err := exec.Command("go", "list", "-deps", root).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", root, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 20 {
			t.Fatalf("go list -deps %s printed %d packages: the listing is broken", root, len(deps))
		}
		for _, pkg := range deps {
			switch {
			case pkg == "os/exec", pkg == "net", strings.HasPrefix(pkg, "net/"), pkg == "crypto/tls", pkg == "crypto/x509",
				pkg == "plugin", strings.HasPrefix(pkg, "k8s.io/client-go/"),
				pkg == "github.com/qinglong/ql3/ceremony", strings.HasPrefix(pkg, "github.com/qinglong/ql3/ceremony/"),
				pkg == "github.com/qinglong/ql3/internal/kubectl", strings.HasPrefix(pkg, "github.com/qinglong/ql3/internal/kubectl/"),
				strings.HasPrefix(pkg, "github.com/qinglong/ql3/internal/testbed/"):
				t.Errorf("%s depends on %s", root, pkg)
			}
		}
	}
}
