package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestOneOutputPath: the output format is looked at in output.go (printResult) and main.go
// (report, --output's check) only, and every command prints a named result type, never an
// anonymous struct.
func TestOneOutputPath(t *testing.T) {
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.SelectorExpr:
				if x.Sel.Name == "Output" && name != "output.go" && name != "main.go" {
					t.Errorf("%s: the output format is read outside output.go", fset.Position(x.Pos()))
				}
			case *ast.CallExpr:
				if sel, ok := x.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "printResult" && len(x.Args) > 1 {
					if cl, ok := x.Args[1].(*ast.CompositeLit); ok {
						if _, anon := cl.Type.(*ast.StructType); anon {
							t.Errorf("%s: printResult of an anonymous struct: give the command a result type", fset.Position(x.Pos()))
						}
					}
				}
			}
			return true
		})
	}
}
