// Package ceremonytest is test support, imported only by tests and by other test-support packages
// (TestOnlyTestsImport enforces it): the private directories and files the ceremony requires, and
// the synthetic release 3.4.1 materialized into its own namespace with a command that names it,
// on the real cluster of internal/testbed/testcluster. The ceremony's cluster tests (package
// ceremony_test) and the auditor's live tests (audit/livetest) build their beds on it.
package ceremonytest

import (
	"os"
	"path/filepath"
	"testing"
)

// PrivateDir returns a fresh 0700 directory with a canonical path (the store refuses a root with
// a symlink component, and TMPDIR may be one).
func PrivateDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// WritePrivate replaces whatever is at path (a file, or a link to one) with a new 0600 file
// holding b, whatever the umask.
func WritePrivate(t testing.TB, path string, b []byte) {
	t.Helper()
	_ = os.Remove(path)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
}

// moduleRoot returns the directory of the module's go.mod above the working directory: a test
// runs in its package's directory.
func moduleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("ceremonytest: no go.mod above the working directory")
		}
		dir = parent
	}
}
