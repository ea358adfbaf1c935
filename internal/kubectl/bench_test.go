package kubectl

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/testbed/kubectltest"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/verdict/argv"
)

// BenchmarkIdentityRead is one identity read through the Runner: private directory, kubeconfig
// copy, exec through the held descriptor, concurrent drain, group handling, removal.
func BenchmarkIdentityRead(b *testing.B) {
	r := realRunner(b)
	for b.Loop() {
		res, err := r.Run(context.Background(), evidence.StepIdentity, nil)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("identity read: %v", err)
		}
	}
}

// BenchmarkIdentityReadDirect is the same kubectl command run directly with os/exec, reusing one
// directory and kubeconfig file, with a writable cache directory that stays warm between runs:
// what a cache kept across runs would save, which rationale §6 does not allow.
func BenchmarkIdentityReadDirect(b *testing.B) {
	testcluster.Need(b)
	dir := b.TempDir()
	writableRunDir(b, dir)
	for b.Loop() {
		directIdentityRead(b, dir)
	}
}

// BenchmarkIdentityReadDirectFresh runs the command directly too, but like the Runner with a fresh
// directory and kubeconfig copy each time, and its cache path a file, so kubectl keeps no cache.
func BenchmarkIdentityReadDirectFresh(b *testing.B) {
	testcluster.Need(b)
	root := b.TempDir()
	for b.Loop() {
		dir, err := os.MkdirTemp(root, "run-")
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, argv.KubeconfigName), cluster.KubeconfigBytes(), 0o600); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, argv.CacheName), nil, 0o600); err != nil {
			b.Fatal(err)
		}
		directIdentityRead(b, dir)
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunnerOverheadStandIn isolates the Runner's own cost with a program that does almost
// nothing (the partial stand-in: 137 bytes of stdout, exit 1), against os/exec of the same file.
func BenchmarkRunnerOverheadStandIn(b *testing.B) {
	r := standInRunner(b, kubectltest.ModePartial, time.Minute, 4<<20)
	path := r.Exe.Input().Path
	b.Run("runner", func(b *testing.B) {
		for b.Loop() {
			if res, err := r.Run(context.Background(), evidence.StepIdentity, nil); err != nil || res.ExitCode != 1 {
				b.Fatalf("run: %v", err)
			}
		}
	})
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			cmd := exec.Command(path)
			cmd.Env = []string{}
			var out bytes.Buffer
			cmd.Stdout = &out
			if err := cmd.Run(); err == nil || out.Len() == 0 {
				b.Fatalf("run: %v", err)
			}
		}
	})
}
