package refuse_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPublicAPIsNameNoInternalType: every exported declaration of a public package (one outside
// internal/, cmd/ and testdata/) names only types a caller outside the module can name too. A
// function that returned an internal type, or an Options field of one, could be called but its
// result not declared: the refusals' reason code is refuse.Code, public for that reason.
func TestPublicAPIsNameNoInternalType(t *testing.T) {
	root := ".."
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "internal", "cmd", "testdata", "scripts", "docs":
				return filepath.SkipDir
			}
			if strings.HasPrefix(d.Name(), ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		for _, name := range internalNames(f) {
			t.Errorf("%s: %s", path, name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("only %d files checked: the walk is broken", checked)
	}
}

// internalNames lists, for f, each exported declaration whose type names a package under an
// internal/ directory.
func internalNames(f *ast.File) []string {
	internal := map[string]string{} // local import name -> path, for internal imports
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if !strings.Contains(p, "/internal/") && !strings.HasSuffix(p, "/internal") {
			continue
		}
		name := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		internal[name] = p
	}
	if len(internal) == 0 {
		return nil
	}
	var found []string
	check := func(what string, n ast.Node) {
		if n == nil {
			return
		}
		ast.Inspect(n, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && internal[id.Name] != "" {
					found = append(found, what+" names "+internal[id.Name]+"."+sel.Sel.Name)
				}
			}
			// A function body is not part of the API.
			_, isBody := n.(*ast.BlockStmt)
			return !isBody
		})
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() || (d.Recv != nil && !exportedRecv(d.Recv)) {
				continue
			}
			check(d.Name.Name, d.Type)
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					if st, ok := s.Type.(*ast.StructType); ok {
						for _, field := range st.Fields.List {
							if exportedField(field) {
								check(s.Name.Name+" field", field.Type)
							}
						}
						continue
					}
					if it, ok := s.Type.(*ast.InterfaceType); ok {
						check(s.Name.Name, it)
						continue
					}
					check(s.Name.Name, s.Type)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							check(n.Name, s.Type)
							for _, v := range s.Values {
								if _, isFunc := v.(*ast.FuncLit); !isFunc {
									check(n.Name, v)
								}
							}
						}
					}
				}
			}
		}
	}
	return found
}

func exportedRecv(fl *ast.FieldList) bool {
	typ := fl.List[0].Type
	for {
		switch x := typ.(type) {
		case *ast.StarExpr:
			typ = x.X
		case *ast.IndexExpr:
			typ = x.X
		case *ast.IndexListExpr:
			typ = x.X
		case *ast.Ident:
			return x.IsExported()
		default:
			return false
		}
	}
}

func exportedField(f *ast.Field) bool {
	if len(f.Names) == 0 { // embedded: exported when its type name is
		typ := f.Type
		if s, ok := typ.(*ast.StarExpr); ok {
			typ = s.X
		}
		switch x := typ.(type) {
		case *ast.Ident:
			return x.IsExported()
		case *ast.SelectorExpr:
			return x.Sel.IsExported()
		}
		return false
	}
	for _, n := range f.Names {
		if n.IsExported() {
			return true
		}
	}
	return false
}
