// Package uringtest runs a test on both of the store's bulk read paths: through an io_uring and
// with one system call per step.
package uringtest

import (
	"os"
	"testing"

	"github.com/qinglong/ql3/internal/uring"
)

// BothPaths runs f as subtest "ring", with the package's rings in use, and as subtest "plain",
// with uring disabled. The ring's run skips with its reason where the kernel refuses io_uring,
// and fails under CI=true, whose machines have it.
func BothPaths(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	t.Run("ring", func(t *testing.T) {
		Require(t)
		f(t)
	})
	t.Run("plain", func(t *testing.T) {
		uring.Disable()
		defer uring.Enable()
		f(t)
	})
}

// Require skips t (fails it under CI=true) unless a ring can be had.
func Require(t *testing.T) {
	t.Helper()
	r := uring.Get()
	if r == nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("io_uring is unavailable under CI")
		}
		t.Skip("io_uring is unavailable here: only the plain path runs")
	}
	uring.Put(r)
}
