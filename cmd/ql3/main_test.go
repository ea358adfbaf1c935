package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ql3-cli-")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "ql3")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func run(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
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

func TestCLIStoreFlow(t *testing.T) {
	root := filepath.Join(t.TempDir(), "s")
	if _, e, c := run(t, "", "store", "init", root); c != 0 {
		t.Fatalf("init: %s %d", e, c)
	}
	out, e, c := run(t, "hi\n", "--store", root, "store", "put", "-")
	const want = "sha256:98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4\n"
	if c != 0 || out != want {
		t.Fatalf("put: %q %q %d", out, e, c)
	}
	out, _, c = run(t, "", "--store", root, "store", "cat", want[:len(want)-1])
	if c != 0 || out != "hi\n" {
		t.Fatalf("cat: %q %d", out, c)
	}
	if _, e, c := run(t, "", "--store", root, "store", "verify"); c != 0 {
		t.Fatalf("verify: %s %d", e, c)
	}
}

func TestCLIErrors(t *testing.T) {
	vectors := []struct {
		args   []string // command line
		stderr string   // exact stderr
		stdout string   // exact stdout
		code   int      // exit status
	}{
		{[]string{"store", "ls"}, "ql3: refused: STORE_NEEDED: no store given\nql3: hint: pass --store DIR or set QL3_STORE\n", "", 2},
		{[]string{"--output", "json", "store", "ls"}, "ql3: refused: STORE_NEEDED: no store given\nql3: hint: pass --store DIR or set QL3_STORE\n",
			`{"code":"STORE_NEEDED","hint":"pass --store DIR or set QL3_STORE","message":"no store given","ok":false}` + "\n", 2},
		{[]string{"store", "cat", "sha256:xx", "--store", "/nonexistent"}, "ql3: refused: STORE_ROOT: store path \"/nonexistent\" is missing or has a symlink component\n", "", 1},
		{[]string{"version", "--bogus"}, "ql3: usage: unknown flag: --bogus\n", "", 2},
		{[]string{"store", "init"}, "ql3: usage: accepts 1 arg(s), received 0\n", "", 2},
	}
	for _, v := range vectors {
		out, e, c := run(t, "", v.args...)
		if e != v.stderr || out != v.stdout || c != v.code {
			t.Errorf("%v: got stderr %q stdout %q exit %d", v.args, e, out, c)
		}
	}
}

func TestCLICanonicalize(t *testing.T) {
	out, e, c := run(t, `{"b":1, "a":"x"}`, "canonicalize", "-")
	if c != 0 || out != `{"a":"x","b":1}`+"\n" || e != "" {
		t.Fatalf("got %q %q %d", out, e, c)
	}
	if _, e, c := run(t, `{"a":1,"a":2}`, "canonicalize"); c != 1 || len(e) < 20 || e[:13] != "ql3: refused:" {
		t.Fatalf("duplicate key: %q %d", e, c)
	}
}
