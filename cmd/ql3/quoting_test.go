package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/ql3/internal/materialize"
)

// goodKubeconfig passes the kubeconfig policy offline (the same file as kubeconfig-check.txtar).
const goodKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: k
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJkekNDQVIyZ0F3SUJBZ0lCQVRBS0JnZ3Foa2pPUFFRREFqQVVNUkl3RUFZRFZRUURFd2x4YkRNdGRHVnoKZEMwd0hoY05NalV3TVRBeE1EQXdNREF3V2hjTk16VXdNVEF4TURBd01EQXdXakFVTVJJd0VBWURWUVFERXdseApiRE10ZEdWemRDMHdXVEFUQmdjcWhrak9QUUlCQmdncWhrak9QUU1CQndOQ0FBUXhTcEZ2b2ZPSUJRbWdOL09VCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K
contexts:
- name: c
  context:
    cluster: k
    user: u
current-context: c
users:
- name: u
  user:
    token: secret-token
`

// Finding 16 of issue 22: command new's review quotes every path that holds a control character
// (here a newline that would print a forged refusal line, and an escape sequence), so the review
// shows only lines ql3 wrote; its next: line is shell-quoted and runs as printed: bash reads back
// exactly the arguments ql3 means. A refusal naming such a path quotes it too.
func TestCommandNewQuotesPaths(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(root, "in\nql3: refused: FORGED: x", "it's \x1b[31mred")
	if err := os.MkdirAll(in, 0o700); err != nil {
		t.Fatal(err)
	}
	for d := in; d != root; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "release-3.4.1", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	rel, err := materialize.Materialize(read("catalog.json"), read("unlocked.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte, mode os.FileMode) string {
		p := filepath.Join(in, name)
		if err := os.WriteFile(p, b, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	kubectl, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip("no /bin/true to stand in as kubectl")
	}
	args := []string{"command", "new", "--store", filepath.Join(root, "store"),
		"--manifest", write("locked.yaml", rel.Manifest, 0o600), "--lock-report", write("lock-report.json", rel.Report, 0o600),
		"--kubeconfig", write("kubeconfig", []byte(goodKubeconfig), 0o600), "--context", "c",
		"--kubectl", write("kubectl", kubectl, 0o700), "--cluster-uid", "4fd9a2fb-bc12-4e5c-b216-d4abd4edb95d",
		"--out", filepath.Join(in, "preflight.json")}
	if o, e, c := run(t, "", "store", "init", filepath.Join(root, "store")); c != 0 {
		t.Fatalf("store init: %d %s%s", c, o, e)
	}
	stdout, stderr, code := run(t, "", args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != 9 || strings.Contains(stdout, "\x1b") || strings.Contains(stdout, "\nql3: refused") {
		t.Fatalf("the review holds lines ql3 did not write:\n%s", stdout)
	}
	if !strings.HasPrefix(lines[0], `wrote "`+root+`/in\nql3: refused: FORGED: x/it's \x1b[31mred/preflight.json" (sha256:`) {
		t.Fatalf("wrote line: %s", lines[0])
	}
	next, ok := strings.CutPrefix(lines[len(lines)-1], "next: ")
	if !ok {
		t.Fatalf("no next line: %s", stdout)
	}
	// The line runs as printed: bash splits it into exactly the arguments ql3 means.
	words, err := exec.Command(bash, "-c", `printf '%s\0' `+strings.TrimPrefix(next, "ql3 ")).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"preflight", "--command-file=" + filepath.Join(in, "preflight.json"), "--write-apply-command=" + filepath.Join(in, "preflight-apply.json")}
	if got := strings.Split(strings.TrimSuffix(string(words), "\x00"), "\x00"); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("next: %s\nbash reads %q, want %q", next, got, want)
	}
	// A refusal naming the path (the file exists already) quotes it.
	_, stderr, code = run(t, "", args...)
	if code != 1 || strings.Count(stderr, "\n") != 2 || strings.Contains(stderr, "\x1b") || !strings.Contains(stderr, `"`+root+`/in\nql3: refused: FORGED`) {
		t.Fatalf("exit %d, refusal not quoted:\n%s", code, stderr)
	}
}
