package attest_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoExecNoNetworkImports: the auditor imports this package, so nothing it depends on may be
// able to run a program or make a connection. crypto/x509 (PEM/PKIX key parsing) imports net and
// net/url for the IP and URI names of certificates; that is the one way in allowed: no package of
// the graph but crypto/x509 and net's own may import net, and none may import os/exec, net/http
// or crypto/tls.
func TestNoExecNoNetworkImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}:{{join .Imports \" \"}}",
		"github.com/qinglong/ql3/attest").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		switch pkg {
		case "os/exec", "net/http", "crypto/tls", "plugin":
			t.Errorf("attest depends on %s", pkg)
		}
		for _, imp := range strings.Fields(imports) {
			if (imp == "net" || strings.HasPrefix(imp, "net/")) && pkg != "crypto/x509" && pkg != "net" && !strings.HasPrefix(pkg, "net/") {
				t.Errorf("%s imports %s", pkg, imp)
			}
		}
	}
}
