package ceremony

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/command"
	"github.com/qinglong/ql3/refuse"
)

const dB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

func goodCommand(cmd string) map[string]any {
	const dA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	return map[string]any{
		"schema": evidence.SchemaCommand, "command": cmd, "store": "/srv/ql3/store",
		"manifest":           map[string]any{"path": "/srv/in/locked.yaml", "digest": dA},
		"lockReport":         map[string]any{"path": "/srv/in/lock-report.json", "digest": dA},
		"kubeconfig":         map[string]any{"path": "/srv/in/kubeconfig", "digest": dA, "context": "ops"},
		"kubectl":            map[string]any{"path": "/usr/local/bin/kubectl", "digest": dA},
		"expectedClusterUid": "7f6c2a1e-0000-4000-8000-000000000001",
		"fieldManager":       evidence.FieldManager,
	}
}

func encode(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWriteApplyCommand(t *testing.T) {
	pre, err := command.Parse(encode(t, goodCommand(evidence.CommandPreflight)))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil { // a private directory, as WriteApplyCommand requires
		t.Fatal(err)
	}
	p := dir + "/apply.json"
	if err := WriteApplyCommand(p, pre, dB); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v %v", fi.Mode(), err)
	}
	raw, _ := os.ReadFile(p)
	app, err := command.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if app.Command.Command != evidence.CommandApply || *app.Command.Preflight != dB || app.Target != pre.Target {
		t.Fatalf("apply command %+v", app.Command)
	}
	// Never replaced, never through a relative path.
	for _, path := range []string{p, "apply.json", t.TempDir() + "/../x.json"} {
		if got := refuse.CodeOf(WriteApplyCommand(path, pre, dB)); got != CodeApplyCommandWrite {
			t.Fatalf("%s: code %q", path, got)
		}
	}
}
