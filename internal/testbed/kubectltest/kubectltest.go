// Package kubectltest builds the stand-in kubectl of testdata/standin-kubectl for fault-injection
// tests. A stand-in is only for faults a real kubectl cannot produce on demand (a hang past the
// timeout, a flood of output, a crash mid-output, a lost response); tests that use one carry
// "StandIn" in their name.
package kubectltest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
)

// Modes of the stand-in (see testdata/standin-kubectl/main.go).
const (
	ModeHang         = "hang"
	ModeFlood        = "flood"
	ModeChatty       = "chatty"
	ModePartial      = "partial"
	ModePartialKill  = "partial-kill"
	ModeLostResponse = "lost-response"
	// ModeVersionClientOnly answers the version read with kubectl's own version alone, exit 0.
	ModeVersionClientOnly = "version-client-only"
)

// FloodBytes is how much the flood mode writes to stdout; FloodLine is the line it repeats.
const (
	FloodBytes = 5 << 20
	FloodLine  = "flood\n"
)

// PartialJSON is exactly what the partial modes write to stdout before they exit or die.
const PartialJSON = `{"apiVersion":"v1","kind":"Namespace","metadata":{"creationTimestamp":"2025-01-01T00:00:00Z","name":"kube-system","resourceVersion":"1`

var modes = []string{ModeHang, ModeFlood, ModeChatty, ModePartial, ModePartialKill, ModeLostResponse, ModeVersionClientOnly}

// BuildStandIn builds the stand-in in mode (realKubectl is the absolute path of the real kubectl
// that lost-response and version-client-only delegate to; "" for the other modes) and returns its path in a fresh private
// 0700 directory (binary 0755, owned by the current uid, one link) and its digest, so that
// stablefile.OpenExecutable accepts it.
func BuildStandIn(t testing.TB, mode, realKubectl string) (string, digest.Digest) {
	t.Helper()
	if !slices.Contains(modes, mode) {
		t.Fatalf("kubectltest: unknown stand-in mode %q", mode)
	}
	if (mode == ModeLostResponse || mode == ModeVersionClientOnly) && !filepath.IsAbs(realKubectl) {
		t.Fatalf("kubectltest: mode %s needs the absolute path of the real kubectl", mode)
	}
	// -ldflags splits on spaces and honours quotes: such a path would be cut.
	if strings.ContainsAny(realKubectl, " \t\n'\"") {
		t.Fatalf("kubectltest: the real kubectl path %q cannot be passed through -ldflags", realKubectl)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// t.TempDir may sit under a symlinked TMPDIR; the executable checks want a canonical path.
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "kubectl")
	// The go build cache makes this a link step only (about 0.3 s).
	if err := compile(path, mode, realKubectl); err != nil {
		t.Fatalf("kubectltest: build stand-in %s: %v", mode, err)
	}
	if err := os.Chmod(path, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, digest.FromBytes(src)
}

func compile(bin, mode, realKubectl string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	goBin, err := goTool()
	if err != nil {
		return err
	}
	cmd := exec.Command(goBin, "build", "-trimpath", "-o", bin,
		"-ldflags", fmt.Sprintf("-X main.mode=%s -X main.real=%s", mode, realKubectl),
		"./testdata/standin-kubectl")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w: %s", err, stderr.Bytes())
	}
	return nil
}

// moduleRoot walks up from the working directory (a package directory under go test) to go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "testdata", "standin-kubectl", "main.go")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("kubectltest: no module root with testdata/standin-kubectl above the working directory")
		}
		dir = parent
	}
}

// goTool finds the go command that runs the tests: $GOROOT/bin/go when go test set GOROOT,
// else the go on PATH.
func goTool() (string, error) {
	if root := os.Getenv("GOROOT"); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return exec.LookPath("go")
}
