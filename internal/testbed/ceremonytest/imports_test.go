package ceremonytest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// testSupport are the non-test packages that may import ceremonytest: test support themselves,
// imported only by tests.
var testSupport = map[string]bool{"audit/internal/audittest": true}

// TestOnlyTestsImport: no production package imports ceremonytest (it materializes releases and
// writes command files; ql3 itself must never carry it).
func TestOnlyTestsImport(t *testing.T) {
	const self = "github.com/qinglong/ql3/internal/testbed/ceremonytest"
	root := moduleRoot(t)
	importers := 0
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := e.Name()
		if e.IsDir() {
			if p != root && (name == "testdata" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, im := range f.Imports {
			if path, _ := strconv.Unquote(im.Path.Value); path != self {
				continue
			}
			importers++
			rel, _ := filepath.Rel(root, filepath.Dir(p))
			if !strings.HasSuffix(name, "_test.go") && !testSupport[filepath.ToSlash(rel)] {
				t.Errorf("%s imports %s outside a test", p, self)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if importers == 0 {
		t.Fatal("no file imports ceremonytest: the walk found nothing")
	}
}
