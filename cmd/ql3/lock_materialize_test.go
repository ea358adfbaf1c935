package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/ql3/evidence"
)

var releaseDir = filepath.Join("..", "..", "testdata", "release-3.4.1")

func releaseFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(releaseDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func materializeArgs(out string) []string {
	return []string{"lock", "materialize", "--catalog", filepath.Join(releaseDir, "catalog.json"),
		"--manifest", filepath.Join(releaseDir, "unlocked.yaml"), "--out", out}
}

// TestCLILockMaterialize writes the synthetic release, compares both files with the committed
// ones, and checks that a second run into the same directory refuses and changes nothing.
func TestCLILockMaterialize(t *testing.T) {
	out := filepath.Join(t.TempDir(), "lock")
	stdout, stderr, code := run(t, "", materializeArgs(out)...)
	manifest, report := releaseFile(t, "locked.yaml"), releaseFile(t, "lock-report.json")
	var rep struct {
		ReportDigest string `json:"reportDigest"`
	}
	if err := json.Unmarshal(report, &rep); err != nil {
		t.Fatal(err)
	}
	want := "manifest " + filepath.Join(out, "locked.yaml") + " " + string(evidence.FromBytes(manifest)) + "\n" +
		"report " + filepath.Join(out, "lock-report.json") + " " + string(evidence.FromBytes(report)) + "\n" +
		"reportDigest " + rep.ReportDigest + "\n"
	if code != 0 || stderr != "" || stdout != want {
		t.Fatalf("exit %d\nstdout %q\nwant   %q\nstderr %q", code, stdout, want, stderr)
	}
	for name, b := range map[string][]byte{"locked.yaml": manifest, "lock-report.json": report} {
		got, err := os.ReadFile(filepath.Join(out, name))
		if err != nil || string(got) != string(b) {
			t.Fatalf("%s differs from the committed file: %v", name, err)
		}
		if st, err := os.Stat(filepath.Join(out, name)); err != nil || st.Mode() != 0o600 {
			t.Fatalf("%s mode %v: %v", name, st.Mode(), err)
		}
	}
	// The verifier's command accepts what the materializer's command wrote.
	if _, stderr, code := run(t, "", "lock", "verify", "--manifest", filepath.Join(out, "locked.yaml"), "--lock-report", filepath.Join(out, "lock-report.json")); code != 0 {
		t.Fatalf("lock verify: exit %d %s", code, stderr)
	}
	_, stderr, code = run(t, "", materializeArgs(out)...)
	if code != 1 || !strings.HasPrefix(stderr, "ql3: refused: MATERIALIZE_OUT_EXISTS: locked.yaml already exists in "+out+"\n") {
		t.Fatalf("second run: exit %d stderr %q", code, stderr)
	}
	if got, _ := os.ReadFile(filepath.Join(out, "locked.yaml")); string(got) != string(manifest) {
		t.Fatal("second run changed locked.yaml")
	}
}

func TestCLILockMaterializeJSON(t *testing.T) {
	out := filepath.Join(t.TempDir(), "lock")
	stdout, stderr, code := run(t, "", append([]string{"--output", "json"}, materializeArgs(out)...)...)
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d stderr %q", code, stderr)
	}
	var got struct {
		OK       bool   `json:"ok"`
		Release  string `json:"release"`
		Manifest struct {
			Path, Digest string
			Bytes        int
		} `json:"manifest"`
		Report struct {
			Path, Digest string
			Bytes        int
		} `json:"report"`
		ReportDigest string `json:"reportDigest"`
	}
	var members map[string]any
	if err := json.Unmarshal([]byte(stdout), &members); err != nil || len(members) != 7 || members["catalogDigest"] == nil || members["releaseSet"] == nil {
		t.Fatalf("result members %v: %v", members, err)
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || strings.Count(stdout, "\n") != 1 {
		t.Fatalf("not one json object: %v %q", err, stdout)
	}
	manifest, report := releaseFile(t, "locked.yaml"), releaseFile(t, "lock-report.json")
	if !got.OK || got.Release != "3.4.1" || got.Manifest.Path != filepath.Join(out, "locked.yaml") ||
		got.Manifest.Digest != string(evidence.FromBytes(manifest)) || got.Manifest.Bytes != len(manifest) ||
		got.Report.Digest != string(evidence.FromBytes(report)) || got.Report.Bytes != len(report) ||
		!strings.Contains(string(report), `"reportDigest": "`+got.ReportDigest+`"`) {
		t.Fatalf("unexpected result %+v", got)
	}
}

func TestCLILockMaterializeErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"schema":"x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	args := func(catalog, manifest, out string) []string {
		return []string{"lock", "materialize", "--catalog", catalog, "--manifest", manifest, "--out", out}
	}
	good, unlocked := filepath.Join(releaseDir, "catalog.json"), filepath.Join(releaseDir, "unlocked.yaml")
	vectors := []struct {
		args   []string // command line
		stderr string   // first line of stderr
		code   int      // exit status
	}{
		{[]string{"lock", "materialize", "--catalog", good}, "ql3: usage: FLAG_REQUIRED: missing required --manifest, --out", 2},
		{append(args(good, unlocked, filepath.Join(dir, "o1")), "extra"), `ql3: usage: USAGE: unknown command "extra" for "ql3 lock materialize"`, 2},
		{args(filepath.Join(dir, "missing.json"), unlocked, filepath.Join(dir, "o2")), "ql3: refused: INPUT_NOT_FOUND: " + filepath.Join(dir, "missing.json") + " does not exist", 1},
		{args(bad, unlocked, filepath.Join(dir, "o3")), "ql3: refused: MATERIALIZE_CATALOG_SHAPE: $ has no member \"release\"", 1},
		{args(good, good, filepath.Join(dir, "o4")), "ql3: refused: MATERIALIZE_MANIFEST_SYNTAX: manifest is json, not block yaml", 1},
		{args(good, unlocked, filepath.Join(dir, "no", "o5")), "ql3: refused: MATERIALIZE_OUT_DIR: cannot create output directory " + filepath.Join(dir, "no", "o5"), 1},
	}
	for _, v := range vectors {
		_, stderr, code := run(t, "", v.args...)
		if first, _, _ := strings.Cut(stderr, "\n"); code != v.code || !strings.HasPrefix(first, v.stderr) {
			t.Errorf("%v: exit %d stderr %q, want %d %q", v.args, code, stderr, v.code, v.stderr)
		}
	}
	// A refused input is refused before the output directory is touched.
	if _, err := os.Stat(filepath.Join(dir, "o3")); !os.IsNotExist(err) {
		t.Fatalf("refused run created its output directory: %v", err)
	}
}
