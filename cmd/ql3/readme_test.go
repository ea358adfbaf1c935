package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/ql3/internal/testbed/testcluster"
)

// readmeFlow returns the operator flow's shell block from README.md, verbatim.
func readmeFlow(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "<!-- operator-flow: run verbatim by cmd/ql3/readme_test.go -->\n```sh\n")
	if !ok {
		t.Fatal("README.md has no operator-flow block")
	}
	block, _, ok := strings.Cut(rest, "```\n")
	if !ok {
		t.Fatal("README.md's operator-flow block is not closed")
	}
	return block
}

// TestREADMEFlow runs the README's operator flow, exactly as written, with bash against the real
// cluster: ql3 built as make build builds it, the release 3.4.1 in a private directory, and the
// reviewed kube-system UID typed on stdin.
func TestREADMEFlow(t *testing.T) {
	tools, err := testcluster.FindTools()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	c, err := testcluster.Start(context.Background(), tools, testcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	// The flow creates the namespace itself, as an operator must.
	bin := ql3Binary(t)
	work, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(work, "in")
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("ql3 %v: %v\n%s", args, err, out)
		}
	}
	release := "../../testdata/release-3.4.1/"
	run("lock", "materialize", "--catalog", release+"catalog.json", "--manifest", release+"unlocked.yaml", "--out", in)
	kc, err := os.ReadFile(c.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(in, "kubeconfig"), kc, 0o600); err != nil {
		t.Fatal(err)
	}
	sh := exec.Command("bash", "-euo", "pipefail", "-c", readmeFlow(t))
	sh.Env = []string{"PATH=" + filepath.Dir(bin) + ":/usr/bin:/bin", "HOME=" + work, "IN=" + in,
		"KUBECTL=" + c.KubectlPath, "CONTEXT=" + c.Context, "STORE=" + filepath.Join(work, "store")}
	sh.Stdin = strings.NewReader(c.KubeSystemUID + "\n")
	var stdout, stderr bytes.Buffer
	sh.Stdout, sh.Stderr = &stdout, &stderr
	if err := sh.Run(); err != nil {
		t.Fatalf("the README flow failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"kube-system    " + c.KubeSystemUID + "\n", "wrote " + filepath.Join(in, "preflight.json"),
		"\naudit of receipt sha256:", " passed: ", "receipts 1, preflights 1, intents 1, unfinished 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("the flow's stdout lacks %q:\n%s", want, out)
		}
	}
	for _, secret := range c.Secrets() {
		if bytes.Contains(stdout.Bytes(), secret) || bytes.Contains(stderr.Bytes(), secret) {
			t.Fatal("the flow's output holds a credential of the cluster")
		}
	}
}
