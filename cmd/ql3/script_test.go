package main

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestScripts pins the exact stdout, stderr and exit status of every command, in text and in json,
// in the txtar scripts under testdata/script (the CLI contract of docs/cli.md).
func TestScripts(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/script",
		UpdateScripts: os.Getenv("QL3_UPDATE_SCRIPTS") == "1",
		Setup: func(e *testscript.Env) error {
			e.Setenv("REPO", repo)
			e.Setenv("QL3_STORE", "")
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"layout-store": cmdLayoutStore,
			"private":      cmdPrivate,
			"status":       cmdStatus,
		},
	})
}

// cmdLayoutStore lays out a committed store (git keeps neither modes nor empty directories) at a
// new path: directories 0700, objects and index entries 0400.
//
//	layout-store SRC DST
func cmdLayoutStore(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: layout-store SRC DST")
	}
	src, dst := ts.MkAbs(args[0]), ts.MkAbs(args[1])
	ts.Check(os.Mkdir(dst, 0o700))
	for _, d := range []string{"blobs", "blobs/sha256", "index", "index/receipts", "index/intents", "index/preflights", "tmp", "locks"} {
		ts.Check(os.Mkdir(filepath.Join(dst, d), 0o700))
	}
	ts.Check(filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o400)
	}))
}

// cmdPrivate makes private directories (0700) and files (0600), as ql3 requires of its inputs.
//
//	private PATH...
func cmdPrivate(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: private PATH...")
	}
	for _, a := range args {
		p := ts.MkAbs(a)
		fi, err := os.Lstat(p)
		ts.Check(err)
		mode := os.FileMode(0o600)
		if fi.IsDir() {
			mode = 0o700
		}
		ts.Check(os.Chmod(p, mode))
	}
}

// cmdStatus runs a program and requires its exact exit status; its stdout and stderr are then
// checked by the stdout and stderr commands as after exec.
//
//	status N PROGRAM ARGS...
func cmdStatus(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: status N PROGRAM ARGS...")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("%s: %v", args[1], err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", strings.Join(args[1:], " "), got, want)
	}
}
