package refuse_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestReasonCodesDocumented keeps docs/reason-codes.md and the code in step: every refuse.Code
// constant is defined exactly once in the tree and documented, and every documented code exists.
func TestReasonCodesDocumented(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string][]string{} // code -> positions
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if !isCodeType(vs.Type, f.Name.Name) {
					continue
				}
				for _, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					code, err := strconv.Unquote(lit.Value)
					if err != nil {
						return err
					}
					defined[code] = append(defined[code], fset.Position(lit.Pos()).String())
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(defined) == 0 {
		t.Fatal("found no refuse.Code constants: the walk is broken")
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "reason-codes.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	row := regexp.MustCompile("(?m)^\\|\\s*`([A-Z][A-Z0-9_]*)`\\s*\\|")
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	var codes []string
	for c := range defined {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	for _, c := range codes {
		if !regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`).MatchString(c) {
			t.Errorf("code %q at %s is not UPPER_CASE", c, defined[c][0])
		}
		if len(defined[c]) > 1 {
			t.Errorf("code %s is defined %d times: %v", c, len(defined[c]), defined[c])
		}
		if !documented[c] {
			t.Errorf("code %s (%s) is missing from docs/reason-codes.md", c, defined[c][0])
		}
	}
	for c := range documented {
		if _, ok := defined[c]; !ok {
			t.Errorf("docs/reason-codes.md documents %s, which no package defines", c)
		}
	}
}

func isCodeType(e ast.Expr, pkg string) bool {
	switch x := e.(type) {
	case *ast.SelectorExpr:
		id, ok := x.X.(*ast.Ident)
		return ok && id.Name == "refuse" && x.Sel.Name == "Code"
	case *ast.Ident:
		return pkg == "refuse" && x.Name == "Code"
	}
	return false
}
