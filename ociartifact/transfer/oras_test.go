package transfer_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/ql3/audit"
	"github.com/qinglong/ql3/internal/testbed/ocitest"
	"github.com/qinglong/ql3/ociartifact"
	"github.com/qinglong/ql3/ociartifact/transfer"
	"github.com/qinglong/ql3/refuse"
)

// oras runs the oras CLI (v1.3.6, built by scripts/build-tool.sh) in dir with the
// registry's CA and the Docker config the test set; its output is scanned for the password.
func oras(t testing.TB, r *ocitest.Registry, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(ocitest.Tool(t, "oras"), "oras"), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	checkNoSecret(t, r, "oras output", out)
	if err != nil {
		t.Fatalf("oras %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func orasAuth(r *ocitest.Registry, prefix string) []string {
	return []string{"--" + prefix + "ca-file", r.CAFile, "--" + prefix + "registry-config", filepath.Join(os.Getenv("DOCKER_CONFIG"), "config.json")}
}

// TestOrasClient: an auditor outside ql3 pulls ql3's artifact with the oras CLI, gets one file
// per object named by its hex digest, and copies it to an OCI layout that ql3 reads in place.
func TestOrasClient(t *testing.T) {
	r := registry(t)
	src, rc, att := source(t)
	ctx := context.Background()
	ref := r.Host + "/ql3/oras:evidence"
	desc, err := transfer.Push(ctx, src, rc.Digest, ref, att, opts(r))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ociartifact.Collect(src, rc.Digest, nil)
	if err != nil {
		t.Fatal(err)
	}

	out := t.TempDir()
	oras(t, r, out, append([]string{"pull", "-o", out, ref}, orasAuth(r, "")...)...)
	for _, d := range c.Closure {
		b, err := os.ReadFile(filepath.Join(out, d.Digest.Encoded()))
		if err != nil || !bytes.Equal(b, c.Blobs[d.Digest]) {
			t.Fatalf("oras pull: object %s: %v", d.Digest, err)
		}
	}
	if ents, _ := os.ReadDir(out); len(ents) != len(c.Closure) {
		t.Fatalf("oras pull wrote %d files, the closure has %d", len(ents), len(c.Closure))
	}

	layout := filepath.Join(t.TempDir(), "layout")
	oras(t, r, t.TempDir(), append([]string{"copy", "--to-oci-layout", ref, layout + ":evidence"}, orasAuth(r, "from-")...)...)
	l, err := ociartifact.OpenLayout(layout)
	if err != nil {
		t.Fatalf("open oras's layout: %v", err)
	}
	defer l.Close()
	rep, err := l.Verify()
	if err != nil || !rep.OK() || len(rep.Receipts) != 1 || rep.Receipts[0].Descriptor != rc {
		t.Fatalf("verify oras's layout: %v %+v", err, rep)
	}
	ar, err := audit.Audit(l, rc.Digest)
	if err != nil || !ar.OK {
		t.Fatalf("audit of oras's layout: %v %v", err, ar.Err())
	}
	if !strings.Contains(oras(t, r, t.TempDir(), append([]string{"discover", "--format", "json", ref}, orasAuth(r, "")...)...), ociartifact.MediaTypeBundle) {
		t.Fatal("oras discover does not list the attestation")
	}
	// Our own export of the same root is the same artifact: the manifest digest is the pushed one.
	exp := filepath.Join(t.TempDir(), "export")
	ed, err := ociartifact.Export(c, exp, "")
	if err != nil || ed.Digest != desc.Digest {
		t.Fatalf("export %v: %s, pushed %s", err, ed.Digest, desc.Digest)
	}
	oras(t, r, t.TempDir(), "manifest", "fetch", "--oci-layout", exp+"@"+string(desc.Digest))
	if _, err := ociartifact.Export(c, exp, ""); refuse.CodeOf(err) != ociartifact.CodeLayout {
		t.Fatalf("second export into the same directory: %v", err)
	}
}

// writeFiles writes the closure as files named by hex digest and returns oras push's arguments.
func writeFiles(t testing.TB, c *ociartifact.Collected) (string, []string) {
	dir := t.TempDir()
	var args []string
	for _, d := range c.Closure {
		if err := os.WriteFile(filepath.Join(dir, d.Digest.Encoded()), c.Blobs[d.Digest], 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, d.Digest.Encoded()+":"+d.MediaType)
	}
	return dir, args
}

// BenchmarkPush and BenchmarkOrasPush push the same 1,000-resource closure to a fresh repository
// each iteration (so no blob is already there); BenchmarkPull and BenchmarkOrasPull pull it.
func BenchmarkPush(b *testing.B) {
	r := registry(b)
	src, rc, _ := source(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := transfer.Push(ctx, src, rc.Digest, fmt.Sprintf("%s/bench/ql3-push-%d:x", r.Host, i), nil, opts(r)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOrasPush(b *testing.B) {
	r := registry(b)
	src, rc, _ := source(b)
	c, err := ociartifact.Collect(src, rc.Digest, nil)
	if err != nil {
		b.Fatal(err)
	}
	dir, files := writeFiles(b, c)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		args := append([]string{"push", "--artifact-type", ociartifact.ArtifactType, fmt.Sprintf("%s/bench/oras-push-%d:x", r.Host, i)}, files...)
		oras(b, r, dir, append(args, orasAuth(r, "")...)...)
	}
}

func BenchmarkPull(b *testing.B) {
	r := registry(b)
	src, rc, _ := source(b)
	ctx := context.Background()
	ref := r.Host + "/bench/pull:x"
	if _, err := transfer.Push(ctx, src, rc.Digest, ref, nil, opts(r)); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		dst := freshStore(b)
		b.StartTimer()
		if _, _, err := transfer.Pull(ctx, ref, dst, opts(r)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOrasPull(b *testing.B) {
	r := registry(b)
	src, rc, _ := source(b)
	ctx := context.Background()
	ref := r.Host + "/bench/pull:x"
	if _, err := transfer.Push(ctx, src, rc.Digest, ref, nil, opts(r)); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		out := b.TempDir()
		b.StartTimer()
		oras(b, r, out, append([]string{"pull", "-o", out, ref}, orasAuth(r, "")...)...)
	}
}
