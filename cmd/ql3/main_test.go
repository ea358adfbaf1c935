package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

var (
	bin      string // ql3 built as make build builds it (static), for tests that need a real file
	buildErr error
	built    sync.Once
)

// TestMain runs the tests, and runs ql3 itself when testscript invokes this binary as "ql3".
func TestMain(m *testing.M) {
	testscript.Main(cleanupM{m}, map[string]func(){"ql3": func() { os.Exit(mainStatus()) }})
}

// cleanupM stops the scripts' cluster and removes the built binary once the tests ran.
type cleanupM struct{ m *testing.M }

func (c cleanupM) Run() int {
	code := c.m.Run()
	stopScriptCluster()
	stopScriptRegistry()
	if bin != "" {
		os.RemoveAll(filepath.Dir(bin))
	}
	return code
}

// ql3Binary builds ql3 once per test run, static and trimmed like make build.
func ql3Binary(t *testing.T) string {
	t.Helper()
	built.Do(func() {
		dir, err := os.MkdirTemp("", "ql3-cli-")
		if err != nil {
			buildErr = err
			return
		}
		bin = filepath.Join(dir, "ql3")
		build := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bin
}

func run(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(ql3Binary(t), args...)
	cmd.Env = append(os.Environ(), "QL3_STORE=")
	cmd.Stdin = bytes.NewBufferString(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code := 0
	if x, ok := err.(*exec.ExitError); ok {
		code = x.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}
