package attest_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoExecNoNetworkImports: the auditor imports this package, so nothing it depends on may be
// able to run a program or make a connection. Keys are parsed with encoding/asn1, not crypto/x509,
// which imports net.
func TestNoExecNoNetworkImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/qinglong/ql3/attest").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		switch {
		case pkg == "os/exec", pkg == "net", strings.HasPrefix(pkg, "net/"), pkg == "crypto/tls", pkg == "crypto/x509", pkg == "plugin":
			t.Errorf("attest depends on %s", pkg)
		}
	}
}
