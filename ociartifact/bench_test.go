package ociartifact_test

import (
	"path/filepath"
	"testing"

	"github.com/qinglong/ql3/internal/testbed/ocitest"
	"github.com/qinglong/ql3/ociartifact"
)

// BenchmarkCollect reads and re-hashes the 1,000-resource closure and builds its manifest: the
// local part of a push or an export.
func BenchmarkCollect(b *testing.B) {
	s, rc := ocitest.Receipt1000(b)
	for b.Loop() {
		if _, err := ociartifact.Collect(s, rc.Digest, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpenVerifyLayout opens an exported layout and verifies it: the local part of a pull
// and of `store verify` on a layout.
func BenchmarkOpenVerifyLayout(b *testing.B) {
	s, rc := ocitest.Receipt1000(b)
	c, err := ociartifact.Collect(s, rc.Digest, nil)
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(b.TempDir(), "layout")
	if _, err := ociartifact.Export(c, dir, ""); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		l, err := ociartifact.OpenLayout(dir)
		if err != nil {
			b.Fatal(err)
		}
		if rep, err := l.Verify(); err != nil || !rep.OK() {
			b.Fatal(err, rep)
		}
		l.Close()
	}
}
