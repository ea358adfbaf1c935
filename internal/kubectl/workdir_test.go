package kubectl

import (
	"path/filepath"
	"testing"

	"github.com/qinglong/ql3/verdict/argv"
)

// TestWorkdirNameIsCanonical: the directory a run makes is one the invocation check accepts.
func TestWorkdirNameIsCanonical(t *testing.T) {
	d, err := makeWorkdir([]byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := removeDir(d); err != nil {
			t.Error(err)
		}
	}()
	if !argv.ValidDir(d.Path) || filepath.Dir(d.Path) != tempRoot {
		t.Fatalf("makeWorkdir made %s", d.Path)
	}
}
