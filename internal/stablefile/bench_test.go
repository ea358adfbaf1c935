package stablefile

import (
	"crypto/rand"
	"crypto/sha256"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/ql3/evidence"
)

// kubectlSize is about the size of kubectl 1.34, the executable rationale §4 (docs/rationale.md#4-private-inputs) hashes at the start and
// at the end of every ceremony.
const kubectlSize = 80 << 20

func benchExecutable(b *testing.B) (string, []byte, digest.Digest) {
	b.Helper()
	content := make([]byte, kubectlSize)
	_, _ = rand.Read(content)
	p := installExe(b, privateDir(b), content, 0o755)
	return p, content, evidence.FromBytes(content)
}

// BenchmarkSHA256 is the baseline: crypto/sha256 over the same bytes already in memory.
func BenchmarkSHA256(b *testing.B) {
	_, content, _ := benchExecutable(b)
	b.SetBytes(kubectlSize)
	for b.Loop() {
		sha256.Sum256(content)
	}
}

func BenchmarkOpenExecutable(b *testing.B) {
	p, _, pinned := benchExecutable(b)
	b.SetBytes(kubectlSize)
	for b.Loop() {
		e, err := OpenExecutable(p, pinned)
		if err != nil {
			b.Fatal(err)
		}
		e.Close()
	}
}

func BenchmarkReverifyFull(b *testing.B) {
	p, _, pinned := benchExecutable(b)
	e, err := OpenExecutable(p, pinned)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	b.SetBytes(kubectlSize)
	for b.Loop() {
		if err := e.ReverifyFull(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReverifyIdentity is the per-step cost: an fstat and a no-symlink re-resolution.
func BenchmarkReverifyIdentity(b *testing.B) {
	p, _, pinned := benchExecutable(b)
	e, err := OpenExecutable(p, pinned)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	for b.Loop() {
		if err := e.ReverifyIdentity(); err != nil {
			b.Fatal(err)
		}
	}
}

// manifestSize is the manifest ceiling of the ceremony, the largest private input.
const manifestSize = 8 << 20

func BenchmarkRead(b *testing.B) {
	p := privateFile(b, make([]byte, manifestSize))
	b.SetBytes(manifestSize)
	for b.Loop() {
		if _, err := Read(p, evidence.RoleManifest, manifestSize); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReverify(b *testing.B) {
	p := privateFile(b, make([]byte, manifestSize))
	f, err := Read(p, evidence.RoleManifest, manifestSize)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(manifestSize)
	for b.Loop() {
		if err := f.Reverify(); err != nil {
			b.Fatal(err)
		}
	}
}
