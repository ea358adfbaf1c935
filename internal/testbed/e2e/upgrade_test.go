package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/testbed/ceremonytest"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/ociartifact"
	"github.com/qinglong/ql3/ociartifact/transfer"
	"github.com/qinglong/ql3/store"
)

// TestUpgradePushPullExportAudit: evidence that travels audits where it lands. Release 3.4.1 and
// then 3.4.2 are applied on the real cluster; the 3.4.2 preflight's plan names the 3.4.1 receipt,
// which travels in the 3.4.2 receipt's closure. The receipt is pushed to the real registry, pulled
// into an empty store (which the pull creates), and exported from there as an OCI layout: the
// audit of the 3.4.2 receipt (its plan re-derived against the 3.4.1 receipt) passes in the pulled
// store and in the layout, and the 3.4.1 receipt is published in both (finding 5:
// AUDIT_PLAN_PREVIOUS before). Outputs and both stores are scanned for the registry password.
func TestUpgradePushPullExportAudit(t *testing.T) {
	reg := registry(t)
	testcluster.Need(t)
	ctx := context.Background()
	var out bytes.Buffer
	show := func(v any) {
		b, _ := json.Marshal(v)
		out.Write(append(b, '\n'))
	}
	ns := "ql3-e2e-upgrade"
	r1 := ceremonytest.NewRelease(t, cluster, ceremonytest.ReleaseOptions{Namespace: ns, NamespaceMode: ceremonytest.CreateNamespace})
	pre1, err := ceremony.Preflight(ctx, ceremony.Options{CommandFile: r1.WriteCommand("preflight.json", evidence.CommandPreflight, ""), Progress: &out})
	if err != nil {
		t.Fatalf("preflight 3.4.1: %v\n%s", err, out.String())
	}
	rc1, err := ceremony.Apply(ctx, ceremony.Options{CommandFile: r1.WriteCommand("apply.json", evidence.CommandApply, string(pre1.Preflight)), Progress: &out})
	if err != nil {
		t.Fatalf("apply 3.4.1: %v\n%s", err, out.String())
	}
	r2 := ceremonytest.NewRelease(t, cluster, ceremonytest.ReleaseOptions{Namespace: ns, NamespaceMode: ceremonytest.EnsureNamespace,
		Store: r1.Store, Release: "release-3.4.2"})
	pre2, err := ceremony.Preflight(ctx, ceremony.Options{CommandFile: r2.WriteCommand("preflight.json", evidence.CommandPreflight, ""), Progress: &out})
	if err != nil {
		t.Fatalf("preflight 3.4.2: %v\n%s", err, out.String())
	}
	rc2, err := ceremony.Apply(ctx, ceremony.Options{CommandFile: r2.WriteCommand("apply.json", evidence.CommandApply, string(pre2.Preflight)), Progress: &out})
	if err != nil {
		t.Fatalf("apply 3.4.2: %v\n%s", err, out.String())
	}
	show(rc2)
	src, err := store.Open(r1.Store)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	// The 3.4.2 preflight planned against the 3.4.1 receipt: the closure carries it.
	c, err := ociartifact.Collect(src, rc2.Receipt, nil)
	if err != nil {
		t.Fatal(err)
	}
	carried := false
	for _, d := range c.Closure {
		carried = carried || d.Digest == rc1.Receipt
	}
	if !carried {
		t.Fatal("the 3.4.2 receipt's closure does not carry the 3.4.1 receipt: the test would prove nothing")
	}
	if rep, err := audit.Audit(src, rc2.Receipt); err != nil || !rep.OK {
		t.Fatalf("audit of 3.4.2 in the source store: %v %v", err, rep.Err())
	}

	t.Setenv("DOCKER_CONFIG", reg.DockerConfig(t, reg.User, reg.Password))
	opts := transfer.Options{CAFile: reg.CAFile}
	ref := reg.Host + "/ql3/upgrade:" + strings.TrimPrefix(string(rc2.Receipt), "sha256:")[:12]
	man, err := transfer.Push(ctx, src, rc2.Receipt, ref, nil, opts)
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	show(man)

	// Pull into an empty store on another path.
	pulledRoot := filepath.Join(ceremonytest.PrivateDir(t), "pulled")
	dst, err := store.Init(pulledRoot)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	root, _, err := transfer.Pull(ctx, ref, dst, opts)
	if err != nil {
		fmt.Fprintln(&out, err)
		t.Fatalf("pull: %v", err)
	}
	show(root)
	for _, v := range []struct {
		where string
		src   audit.Source
	}{{"the pulled store", dst}} {
		ar, err := audit.Audit(v.src, rc2.Receipt)
		if err != nil || !ar.OK {
			t.Fatalf("audit of 3.4.2 in %s: %v %v", v.where, err, ar.Err())
		}
		show(ar)
		if ar, err := audit.Audit(v.src, rc1.Receipt); err != nil || !ar.OK {
			t.Fatalf("audit of 3.4.1 in %s: %v %v", v.where, err, ar.Err())
		}
	}
	vr, err := dst.Verify()
	if err != nil || !vr.OK() || len(vr.Receipts) != 2 || len(vr.Unreferenced) != 0 || len(vr.Unfinished) != 0 {
		t.Fatalf("pulled store verify: %v %+v", err, vr)
	}

	// Export from the pulled store, and audit in the layout.
	pc, err := ociartifact.Collect(dst, rc2.Receipt, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(ceremonytest.PrivateDir(t), "layout")
	if _, err := ociartifact.Export(pc, dir, ""); err != nil {
		t.Fatalf("export: %v", err)
	}
	l, err := ociartifact.OpenLayout(dir)
	if err != nil {
		t.Fatalf("open layout: %v", err)
	}
	defer l.Close()
	for _, rc := range []evidence.Descriptor{{Digest: rc2.Receipt}, {Digest: rc1.Receipt}} {
		ar, err := audit.Audit(l, rc.Digest)
		if err != nil || !ar.OK {
			t.Fatalf("audit of %s in the layout: %v %v", rc.Digest, err, ar.Err())
		}
		show(ar)
	}
	lr, err := l.Verify()
	if err != nil || !lr.OK() || len(lr.Receipts) != 2 {
		t.Fatalf("layout verify: %v %+v", err, lr)
	}

	for _, s := range reg.Secrets() {
		if bytes.Contains(out.Bytes(), s) {
			t.Fatal("the registry password appears in the output")
		}
		for _, d := range []string{pulledRoot, dir} {
			filepath.Walk(d, func(p string, fi os.FileInfo, err error) error {
				if err == nil && fi.Mode().IsRegular() {
					if b, _ := os.ReadFile(p); bytes.Contains(b, s) {
						t.Errorf("the registry password appears in %s", p)
					}
				}
				return nil
			})
		}
	}
}
