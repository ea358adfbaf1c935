package ceremony_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	auditpkg "github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/store"
)

// minorOf returns the minor of a Kubernetes version v1.MINOR.PATCH.
func minorOf(t *testing.T, v string) int64 {
	t.Helper()
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(parts) < 2 {
		t.Fatalf("version %q", v)
	}
	n, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		t.Fatalf("version %q: %v", v, err)
	}
	return n
}

// TestPreflightNamesKubectlSkew: with a real kubectl more than one minor from the real API server
// (make matrix runs it with kubectl 1.34 against 1.37, three minors apart), the preflight passes
// (the skew is named, not refused): its text output names kubectl's and the server's version, how
// far apart they are and the supported skew in one line on stderr, its json carries the versions,
// the report records them, and the offline audit passes; a report whose versions member is
// changed fails the audit with AUDIT_VERSIONS_MISMATCH. `make test` builds kubectl of the server's
// own minor only: the test skips there, saying so, whatever CI says (make matrix runs it, and its
// table fails a cell in which it did not pass).
func TestPreflightNamesKubectlSkew(t *testing.T) {
	tools := testcluster.NeedTools(t) // without tools: skipped, or failed under CI=true
	apart := minorOf(t, tools.KubectlVersion) - minorOf(t, tools.KubernetesVersion)
	if apart < 0 {
		apart = -apart
	}
	if apart <= evidence.SupportedSkew {
		t.Skipf("kubectl %s is within the supported skew of the API server %s: this test needs $%s naming the tools of a kubectl at least two minors away (make matrix runs it with kubectl 1.34 against 1.37)",
			tools.KubectlVersion, tools.KubernetesVersion, testcluster.KubectlToolsEnv)
	}
	testcluster.Need(t)
	want := evidence.Versions{Kubectl: tools.KubectlVersion, Server: tools.KubernetesVersion, MinorsApart: apart, SupportedSkew: false}
	wantLine := fmt.Sprintf("ql3: warning: kubectl %s is %d minor versions from the API server %s: the supported skew is ±1 (docs/kubectl.md#version-skew)",
		want.Kubectl, apart, want.Server)
	bin := buildQL3(t)
	b := newBed(t, true, nil)
	pf := b.WriteCommand("preflight.json", evidence.CommandPreflight, "")

	// Text: stdout the digest alone, the warning one line of stderr.
	text := b.ql3(bin, "preflight", "--command-file="+pf)
	d := text.digest(t, false, "preflight")
	if n := strings.Count(string(text.stderr), wantLine+"\n"); n != 1 {
		t.Fatalf("stderr holds the skew line %d times, want once:\n%s", n, text.stderr)
	}
	// json: the versions member, and the same line on stderr.
	js := b.ql3(bin, "-o", "json", "preflight", "--command-file="+pf)
	dj := js.digest(t, true, "preflight")
	var out struct {
		Versions *evidence.Versions `json:"versions"`
	}
	if err := json.Unmarshal(js.stdout, &out); err != nil || out.Versions == nil || *out.Versions != want {
		t.Fatalf("json versions %+v (%v), want %+v:\n%s", out.Versions, err, want, js.stdout)
	}
	if !strings.Contains(string(js.stderr), wantLine+"\n") {
		t.Fatalf("json run's stderr lacks the skew line:\n%s", js.stderr)
	}

	st, err := store.Open(b.Store)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, dd := range []string{d, dj} {
		p := decodePreflight(t, st, digest.Digest(dd))
		if p.Versions == nil || *p.Versions != want || len(p.Execs) != 3 {
			t.Fatalf("report %s: versions %+v, %d execs; want %+v and 3", dd, p.Versions, len(p.Execs), want)
		}
		rep, err := auditpkg.Audit(st, digest.Digest(dd))
		if err != nil || rep.Err() != nil {
			t.Fatalf("audit of %s: %v %v", dd, err, rep.Err())
		}
		if r := b.ql3(bin, "--store", b.Store, "audit", dd); r.exit != 0 {
			t.Fatalf("ql3 audit %s: exit %d\n%s", dd, r.exit, r.stderr)
		}
	}

	// Tampered, in a copy of the store: the report claims a supported skew, or another distance.
	for _, edit := range []struct {
		name string
		f    func(v *evidence.Versions)
	}{
		{"supported", func(v *evidence.Versions) { v.SupportedSkew, v.MinorsApart = true, 1 }},
		{"one more apart", func(v *evidence.Versions) { v.MinorsApart++ }},
		{"kubectl of the server's version", func(v *evidence.Versions) { v.Kubectl = v.Server }},
	} {
		t.Run("tampered/"+edit.name, func(t *testing.T) {
			cp := filepath.Join(t.TempDir(), "store")
			if out, err := exec.Command("cp", "-a", b.Store, cp).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v\n%s", err, out)
			}
			cst, err := store.Open(cp)
			if err != nil {
				t.Fatal(err)
			}
			defer cst.Close()
			p := decodePreflight(t, cst, digest.Digest(d))
			edit.f(p.Versions)
			nd, _, err := cst.PutRecord(evidence.MediaTypePreflight, p)
			if err != nil {
				t.Fatal(err)
			}
			if err := cst.PutIndex(evidence.IndexPreflights, nd.Digest, nd); err != nil {
				t.Fatal(err)
			}
			rep, err := auditpkg.Audit(cst, nd.Digest)
			if err != nil {
				t.Fatal(err)
			}
			c, ok := checkOf(rep, "versions")
			if rep.OK || rep.Code != auditpkg.CodeVersions || !ok || c.OK || c.Code != auditpkg.CodeVersions {
				t.Fatalf("audit of the tampered report: code %q, versions check %+v: %v", rep.Code, c, rep.Err())
			}
			r := b.ql3(bin, "--store", cp, "audit", string(nd.Digest))
			r.wantAuditRefusal(t, false, auditpkg.CodeVersions)
		})
	}
	t.Logf("%s", wantLine)
	if w := ceremony.SkewWarning(&want); w != wantLine {
		t.Fatalf("SkewWarning %q", w)
	}
}

func decodePreflight(t *testing.T, st *store.Store, d digest.Digest) *evidence.Preflight {
	t.Helper()
	raw, err := st.Get(d)
	if err != nil {
		t.Fatal(err)
	}
	var p evidence.Preflight
	if err := evidence.DecodeRecord(evidence.MediaTypePreflight, raw, &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func checkOf(rep *auditpkg.Report, name string) (auditpkg.Check, bool) {
	for _, c := range rep.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return auditpkg.Check{}, false
}
