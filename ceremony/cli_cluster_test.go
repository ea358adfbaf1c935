package ceremony_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	auditpkg "github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/kubeconfig"
	"github.com/qinglong/ql3/internal/testbed/ceremonytest"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/refuse"
)

// buildQL3 builds cmd/ql3 into a private directory of t.
func buildQL3(t *testing.T) string {
	t.Helper()
	goBin := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(goBin); os.Getenv("GOROOT") == "" || err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(t.TempDir(), "ql3")
	cmd := exec.Command(goBin, "build", "-o", bin, "./cmd/ql3")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/ql3: %v\n%s", err, out)
	}
	return bin
}

// leaks reports whether data holds any form of the cluster's credentials.
func leaks(data []byte) bool {
	for _, s := range cluster.Secrets() {
		if len(s) > 0 && bytes.Contains(data, s) {
			return true
		}
	}
	return false
}

// cliRun is one run of the built ql3.
type cliRun struct {
	exit           int
	stdout, stderr []byte
}

// ql3 runs the built binary and scans everything it printed for the cluster's credentials.
func (b *bed) ql3(bin string, args ...string) cliRun {
	b.t.Helper()
	cmd := exec.Command(bin, args...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := cliRun{stdout: so.Bytes(), stderr: se.Bytes()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.exit = ee.ExitCode()
	} else if err != nil {
		b.t.Fatalf("run ql3 %v: %v", args, err)
	}
	if leaks(r.stdout) || leaks(r.stderr) {
		b.t.Errorf("ql3 %v printed a credential", args)
	}
	b.out.Write(r.stdout)
	b.out.Write(r.stderr)
	return r
}

// digest checks a successful run's output and returns the digest it printed (field of the json object): the digest alone in text, one JSON object in json.
func (r cliRun) digest(t *testing.T, asJSON bool, field string) string {
	t.Helper()
	if r.exit != 0 {
		t.Fatalf("exit %d: %s", r.exit, r.stderr)
	}
	if !asJSON {
		d := strings.TrimSuffix(string(r.stdout), "\n")
		if _, err := evidence.ParseDigest(d); err != nil || strings.Contains(d, "\n") {
			t.Fatalf("text output %q is not one digest", r.stdout)
		}
		return d
	}
	var m map[string]any
	if err := json.Unmarshal(r.stdout, &m); err != nil || m["ok"] != true {
		t.Fatalf("json output %q: %v", r.stdout, err)
	}
	d, _ := m[field].(string)
	return d
}

// wantRefusal checks a refused run: exit 1, one `ql3: refused: CODE: ` line, and under json one
// object with ok false and the code.
func (r cliRun) wantRefusal(t *testing.T, asJSON bool, code refuse.Code) {
	t.Helper()
	if r.exit != 1 {
		t.Fatalf("exit %d, want 1: %s", r.exit, r.stderr)
	}
	if n := strings.Count(string(r.stderr), "ql3: refused: "); n != 1 || !strings.Contains(string(r.stderr), "ql3: refused: "+string(code)+": ") {
		t.Fatalf("stderr has %d refusal lines, want one of %s:\n%s", n, code, r.stderr)
	}
	if asJSON {
		var m map[string]any
		if err := json.Unmarshal(r.stdout, &m); err != nil || m["ok"] != false || m["code"] != string(code) {
			t.Fatalf("json output %q: %v", r.stdout, err)
		}
	} else if len(r.stdout) != 0 {
		t.Fatalf("a refusal printed %q on stdout", r.stdout)
	}
}

// wantAuditRefusal checks a failed audit: exit 1, one refusal line with the first failed check's
// code on stderr, and the report on stdout (one line per check ending in FAILED, or the report
// object with ok false and that code).
func (r cliRun) wantAuditRefusal(t *testing.T, asJSON bool, code refuse.Code) {
	t.Helper()
	if r.exit != 1 || strings.Count(string(r.stderr), "ql3: refused: ") != 1 || !strings.Contains(string(r.stderr), "ql3: refused: "+string(code)+": ") {
		t.Fatalf("exit %d, want 1 with one %s refusal line:\n%s", r.exit, code, r.stderr)
	}
	if asJSON {
		var m map[string]any
		if err := json.Unmarshal(r.stdout, &m); err != nil || m["ok"] != false || m["code"] != string(code) {
			t.Fatalf("json report %q: %v", r.stdout, err)
		}
	} else if !bytes.Contains(r.stdout, []byte(" FAILED: ")) {
		t.Fatalf("text report %q does not end FAILED", r.stdout)
	}
}

// TestCeremonyCLI runs the happy path and three refusals through the built ql3 binary, in text
// and in json output, and scans its stdout and stderr for the cluster's credentials (the bed's
// cleanup scans the store).
func TestCeremonyCLI(t *testing.T) {
	testcluster.Need(t)
	if !leaks(cluster.KubeconfigBytes()) || !leaks([]byte(cluster.Token)) {
		t.Fatal("the scan does not recognise the credentials of the kubeconfig")
	}
	bin := buildQL3(t)
	for _, output := range []string{"text", "json"} {
		isJSON := output == "json"
		t.Run(output+"/happy path", func(t *testing.T) {
			b := newBed(t, true, nil)
			if isJSON {
				b.Set("kubeconfig", "context", cluster.TokenContext) // the token user this time
			}
			pf, af := b.WriteCommand("preflight.json", evidence.CommandPreflight, ""), filepath.Join(b.Dir, "apply.json")
			pre := b.ql3(bin, "--output", output, "preflight", "--command-file="+pf, "--write-apply-command="+af).digest(t, isJSON, "preflight")
			rc := b.ql3(bin, "--output", output, "apply", "--command-file="+af).digest(t, isJSON, "receipt")
			again := b.ql3(bin, "--output", output, "run", "--command-file="+af).digest(t, isJSON, "receipt")
			if pre == "" || rc == "" || again != rc {
				t.Fatalf("preflight %q, receipt %q, rerun %q", pre, rc, again)
			}
			for _, args := range [][]string{{"store", "verify"}, {"audit", rc}, {"audit", pre}} {
				if r := b.ql3(bin, append([]string{"--output", output, "--store", b.Store}, args...)...); r.exit != 0 {
					t.Fatalf("ql3 %v: exit %d\n%s", args, r.exit, r.stderr)
				}
			}
			// The receipt.audit command through ql3 run: it passes for its receipt and target,
			// and is refused for a preflight digest and for another target.
			audit := func(receipt string, edit func(c map[string]any)) cliRun {
				c := map[string]any{}
				for k, v := range b.Cmd {
					c[k] = v
				}
				c["command"], c["receipt"] = evidence.CommandReceiptAudit, receipt
				if edit != nil {
					edit(c)
				}
				raw, err := json.Marshal(c)
				if err != nil {
					t.Fatal(err)
				}
				f := filepath.Join(b.Dir, "audit.json")
				ceremonytest.WritePrivate(t, f, raw)
				return b.ql3(bin, "--output", output, "run", "--command-file="+f)
			}
			ok := audit(rc, nil)
			if ok.exit != 0 || (isJSON && !bytes.Contains(ok.stdout, []byte(`"ok":true`))) || (!isJSON && !bytes.Contains(ok.stdout, []byte(" passed: "))) {
				t.Fatalf("receipt.audit: exit %d\n%s%s", ok.exit, ok.stdout, ok.stderr)
			}
			audit(pre, nil).wantAuditRefusal(t, isJSON, auditpkg.CodeSubject)
			audit(rc, func(c map[string]any) { c["expectedClusterUid"] = "0b4e9c5a-3f1d-4c2b-9a7e-5d6f8e9a0b1c" }).wantAuditRefusal(t, isJSON, auditpkg.CodeTarget)
		})
		vectors := []struct {
			name string
			edit func(t *testing.T, b *bed)
			code refuse.Code
		}{
			// Another cluster than the reviewed one.
			{"uid mismatch", func(_ *testing.T, b *bed) {
				b.Cmd["expectedClusterUid"] = "0b4e9c5a-3f1d-4c2b-9a7e-5d6f8e9a0b1c"
			}, ceremony.CodeClusterUID},
			// An exec plugin beside the credentials the kubeconfig holds.
			{"kubeconfig exec", func(t *testing.T, b *bed) {
				b.repin("kubeconfig", []byte(insertAfter(t, string(cluster.KubeconfigBytes()), kcAdminUser,
					"    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/true\n")))
			}, kubeconfig.CodeExecForbidden},
			// A repeated key next to the token: a decoder error must not echo the file.
			{"kubeconfig duplicate key", func(t *testing.T, b *bed) {
				b.repin("kubeconfig", []byte(insertAfter(t, string(cluster.KubeconfigBytes()), kcTokenUser,
					"    token: "+cluster.Token+"\n")))
			}, kubeconfig.CodeDuplicateKey},
		}
		for _, v := range vectors {
			t.Run(output+"/"+v.name, func(t *testing.T) {
				b := newBed(t, true, nil)
				v.edit(t, b)
				r := b.ql3(bin, "--output", output, "preflight", "--command-file="+b.WriteCommand("preflight.json", evidence.CommandPreflight, ""))
				r.wantRefusal(t, isJSON, v.code)
				if b.Count(evidence.IndexPreflights) != 0 || b.Count(evidence.IndexReceipts) != 0 {
					t.Fatal("a refused run published a preflight or receipt")
				}
			})
		}
	}
}
