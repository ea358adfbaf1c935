package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

const lockFixtures = "../../testdata/lock"

func TestCLILockVerifyValid(t *testing.T) {
	dir := filepath.Join(lockFixtures, "valid")
	args := []string{"lock", "verify", "--manifest", filepath.Join(dir, "locked.yaml"), "--lock-report", filepath.Join(dir, "lock-report.json")}
	out, e, c := run(t, "", args...)
	if c != 0 || e != "" || !strings.HasPrefix(out, "lock verified: qinglong 3.4.1 (refs/tags/v3.4.1, commit 8806e4eb532f89b503d30ddb2b6fec837db58735)\n") ||
		!strings.Contains(out, "\nrunner     Deployment qinglong/runner initContainers/prepare ghcr.io/qinglong/qinglong-runner@sha256:") {
		t.Fatalf("text: exit %d\nstdout %q\nstderr %q", c, out, e)
	}
	out, e, c = run(t, "", append([]string{"--output", "json"}, args...)...)
	var got struct {
		OK   bool `json:"ok"`
		Lock struct {
			Release  struct{ Version string } `json:"release"`
			Manifest struct {
				Resources        int `json:"resources"`
				ImageAuthorities int `json:"imageAuthorities"`
			} `json:"manifest"`
			Authorities []struct {
				Role string `json:"role"`
				Name string `json:"name"`
			} `json:"authorities"`
		} `json:"lock"`
	}
	if c != 0 || e != "" || strings.Count(out, "\n") != 1 || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("json: exit %d\nstdout %q\nstderr %q", c, out, e)
	}
	if !got.OK || got.Lock.Release.Version != "3.4.1" || got.Lock.Manifest.Resources != 6 || got.Lock.Manifest.ImageAuthorities != 4 ||
		len(got.Lock.Authorities) != 4 || got.Lock.Authorities[3].Role != "web" || got.Lock.Authorities[3].Name != "web" {
		t.Fatalf("json: %+v", got)
	}
}

// TestCLILockVerifyFixtures runs every invalid fixture through the CLI: exit 1 and exactly the
// expected code in the one refusal line.
func TestCLILockVerifyFixtures(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join(lockFixtures, "invalid", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, d := range dirs {
		t.Run(filepath.Base(d), func(t *testing.T) {
			t.Parallel()
			want, err := os.ReadFile(filepath.Join(d, "expect"))
			if err != nil {
				t.Fatal(err)
			}
			code := strings.TrimSpace(string(want))
			out, e, c := run(t, "", "lock", "verify", "--manifest", filepath.Join(d, "locked.yaml"), "--lock-report", filepath.Join(d, "lock-report.json"))
			lines := strings.Split(strings.TrimSuffix(e, "\n"), "\n")
			if c != 1 || out != "" || !strings.HasPrefix(lines[0], "ql3: refused: "+code+": ") ||
				len(lines) > 2 || (len(lines) == 2 && !strings.HasPrefix(lines[1], "ql3: hint: ")) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 and code %s", c, out, e, code)
			}
		})
	}
}

func TestCLILockVerifyUsage(t *testing.T) {
	dir := t.TempDir()
	valid := filepath.Join(lockFixtures, "valid")
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	vectors := []struct {
		args   []string // after "lock verify"
		stderr string   // exact stderr prefix
		code   int      // exit status
	}{
		{nil, "ql3: usage: FLAG_REQUIRED: missing required --manifest, --lock-report\n", 2},
		{[]string{"--manifest", filepath.Join(valid, "locked.yaml")}, "ql3: usage: FLAG_REQUIRED: missing required --lock-report\n", 2},
		{[]string{"--manifest", filepath.Join(dir, "absent.yaml"), "--lock-report", filepath.Join(valid, "lock-report.json")},
			"ql3: refused: INPUT_NOT_FOUND: " + filepath.Join(dir, "absent.yaml") + " does not exist (or a component is not a directory): no such file or directory\n", 1},
		{[]string{"--manifest", filepath.Join(valid, "locked.yaml"), "--lock-report", dir},
			"ql3: refused: INPUT_NOT_REGULAR: " + dir + " is a directory, not a regular file\n", 1},
		{[]string{"--manifest", fifo, "--lock-report", filepath.Join(valid, "lock-report.json")},
			"ql3: refused: INPUT_NOT_REGULAR: " + fifo + " is a fifo, not a regular file\n", 1},
		{[]string{"--manifest", filepath.Join(valid, "locked.yaml"), "--lock-report", "/dev/null", "extra"}, "ql3: usage: USAGE: unknown command \"extra\" for \"ql3 lock verify\"\n", 2},
		{[]string{"--bogus"}, "ql3: usage: USAGE: ql3 lock verify: unknown flag: --bogus\n", 2},
		{[]string{"--report", "x"}, "ql3: usage: USAGE: ql3 lock verify: unknown flag: --report\nql3: hint: did you mean --lock-report?\n", 2},
	}
	for _, v := range vectors {
		_, e, c := run(t, "", append([]string{"lock", "verify"}, v.args...)...)
		if c != v.code || !strings.HasPrefix(e, v.stderr) {
			t.Errorf("%v: exit %d stderr %q", v.args, c, e)
		}
	}
}

// TestCLILockVerifyCeiling: a report past its ceiling is refused by the input reader, which reads
// no more than the ceiling plus one byte of it.
func TestCLILockVerifyCeiling(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(big, []byte("{"+strings.Repeat(" ", 2<<20)+"}"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, e, c := run(t, "", "lock", "verify", "--manifest", filepath.Join(lockFixtures, "valid", "locked.yaml"), "--lock-report", big)
	if c != 1 || e != "ql3: refused: INPUT_TOO_LARGE: "+big+" is 2097154 bytes, over the ceiling of 1048576\n" {
		t.Fatalf("exit %d stderr %q", c, e)
	}
}
