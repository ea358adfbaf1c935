package main

import (
	"bytes"
	"context"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

var updateDocs = flag.Bool("update", false, "rewrite the generated part of docs/cli.md from the commands' help")

const (
	helpBegin = "<!-- BEGIN GENERATED: ql3 --help of every command (go test ./cmd/ql3 -run TestCLIDocMatchesHelp -update) -->\n"
	helpEnd   = "<!-- END GENERATED -->\n"
)

// helpReference renders every command's --help, depth first in the order `ql3 --help` lists them,
// each from a run of the command line itself (`ql3 PATH... --help`, as a user types it), so the
// page shows exactly what the binary prints.
func helpReference(t *testing.T) string {
	var b strings.Builder
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		path := strings.Fields(c.CommandPath())[1:]
		var out, errs bytes.Buffer
		if st := execute(context.Background(), append(path, "--help"), &out, &errs); st != 0 || errs.Len() != 0 {
			t.Fatalf("%s --help: exit %d, stderr %q", c.CommandPath(), st, errs.String())
		}
		b.WriteString("\n### " + c.CommandPath() + "\n\n```text\n" + strings.TrimRight(out.String(), "\n") + "\n```\n")
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(&RootOptions{}))
	return b.String()
}

// TestCLIDocMatchesHelp: docs/cli.md carries every command's --help verbatim, so that the user's
// contract cannot drift from the binary.
func TestCLIDocMatchesHelp(t *testing.T) {
	const path = "../../docs/cli.md"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i, j := strings.Index(doc, helpBegin), strings.Index(doc, helpEnd)
	if i < 0 || j < i {
		t.Fatalf("docs/cli.md lacks the generated-help markers")
	}
	want := doc[:i+len(helpBegin)] + helpReference(t) + doc[j:]
	if *updateDocs {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want != doc {
		t.Fatal("docs/cli.md does not match the commands' --help: go test ./cmd/ql3 -run TestCLIDocMatchesHelp -update")
	}
}

// TestEveryCommandHasExamples: every command's help shows how it is used.
func TestEveryCommandHasExamples(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Example == "" {
			t.Errorf("%s has no Examples section", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(&RootOptions{}))
}

// TestNoInitRegistration: commands are added to the root explicitly in newRoot, never from init().
func TestNoInitRegistration(t *testing.T) {
	names, err := filepath.Glob("*.go")
	if err != nil || len(names) == 0 {
		t.Fatalf("no source files: %v", err)
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
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == "init" {
				t.Errorf("%s has an init function", name)
			}
		}
	}
}

// TestMaterializeDocMatchesOutput: the example of docs/materialize.md is what lock materialize
// prints, byte for byte (the documented --out replaced by a fresh directory).
func TestMaterializeDocMatchesOutput(t *testing.T) {
	raw, err := os.ReadFile("../../docs/materialize.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "```\n$ ql3 lock materialize ")
	block, _, ok2 := strings.Cut(rest, "```\n")
	if !ok || !ok2 {
		t.Fatal("docs/materialize.md has no lock materialize example")
	}
	cmdline, want, _ := strings.Cut(strings.ReplaceAll(block, "\\\n    ", ""), "\n")
	out := filepath.Join(t.TempDir(), "lock")
	args := append([]string{"lock", "materialize"}, strings.Fields(cmdline)...)
	for i, a := range args {
		if strings.HasPrefix(a, "testdata/") {
			args[i] = "../../" + a
		}
		if a == "/tmp/lock" {
			args[i] = out
		}
	}
	var stdout, stderr bytes.Buffer
	if st := execute(context.Background(), args, &stdout, &stderr); st != 0 {
		t.Fatalf("exit %d: %s", st, stderr.String())
	}
	if got := strings.ReplaceAll(stdout.String(), out, "/tmp/lock"); got != want {
		t.Fatalf("docs/materialize.md shows\n%s\nlock materialize prints\n%s", want, got)
	}
}
